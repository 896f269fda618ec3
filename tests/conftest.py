"""What every test module shares: the `rng` fixture.

Helpers live in small modules in tests/ (bodies_util, codegen_util, onnx_util, ops_util,
passes_util, paths_util, targets_util), on the path through pyproject's `pythonpath` and
imported by name; a test module is never imported by another.
"""
import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded per test, so a test's data does not depend on which tests ran before it."""
    return np.random.default_rng(0)
