"""What every test module shares: the `rng` fixture, and AOT_CPU=native.

Helpers live in small modules in tests/ (bodies_util, codegen_util, onnx_util, ops_util,
passes_util, paths_util, targets_util), on the path through pyproject's `pythonpath` and
imported by name; a test module is never imported by another.
"""
import os

import numpy as np
import pytest

# The suite compiles hundreds of models: each for this machine only (the default, portable,
# generates code twice). tests/runtime/test_cpu_variants.py and tests/compile/test_cpu_spec.py
# build portable artifacts by name.
os.environ.setdefault("AOT_CPU", "native")


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded per test, so a test's data does not depend on which tests ran before it."""
    return np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="session")
def _object_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Compiles cache their kernel objects in a folder of this session's, never in the user's
    ~/.cache/aot (shared by the session's tests and the aot-compile processes they start)."""
    os.environ["AOT_CACHE_DIR"] = str(tmp_path_factory.mktemp("aot-cache"))
