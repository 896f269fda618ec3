"""Shape rules and numpy references of sort and argsort (aot/ir/ops/sorting.py)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops import NON_ELEMENTAL, infer_type
from ops_util import run


def test_argsort_stable_and_nan_order():
    x = np.array([[3.0, np.nan, 1.0, 0.0, -0.0, 1.0, np.nan]], np.float32)
    asc = run("argsort", x, dim=1, descending=False, dtype=DType.I32)
    desc = run("argsort", x, dim=1, descending=True, dtype=DType.I64)
    assert asc.dtype == np.int32 and desc.dtype == np.int64
    np.testing.assert_array_equal(asc, [[3, 4, 2, 5, 0, 1, 6]])  # ties in order, NaN last
    np.testing.assert_array_equal(desc, [[1, 6, 0, 2, 5, 3, 4]])  # NaN first, ties still in order
    values = run("sort", x, dim=1, descending=True)
    np.testing.assert_array_equal(values, x[:, desc[0]])


def test_sort_ints_along_dim0(rng):
    x = rng.integers(-50, 50, (9, 4)).astype(np.int8)
    np.testing.assert_array_equal(run("sort", x, dim=0, descending=False), np.sort(x, axis=0))
    np.testing.assert_array_equal(run("sort", x, dim=0, descending=True), np.sort(x, axis=0)[::-1])
    u = np.array([200, 3, 255, 0], np.uint8)
    np.testing.assert_array_equal(run("sort", u, dim=0, descending=False), [0, 3, 200, 255])


def test_sort_rejects_bad_attrs():
    t = [TensorType(DType.F32, (3, 4))]
    with pytest.raises(IRError):
        infer_type("sort", t, {"dim": 2, "descending": False})
    with pytest.raises(IRError):
        infer_type("argsort", t, {"dim": 1, "descending": False, "dtype": DType.F32})
    assert {"scatter", "sort", "argsort"} <= NON_ELEMENTAL
