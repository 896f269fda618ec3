"""What every test module shares: the helper modules on sys.path, and the `rng` fixture.

Helpers live in small modules beside the tests (bodies_util, codegen_util, onnx_util,
ops_util, passes_util, targets_util), imported by name; a test module is
never imported by another.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded per test, so a test's data does not depend on which tests ran before it."""
    return np.random.default_rng(0)
