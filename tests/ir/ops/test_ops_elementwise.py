"""Shape rules and numpy references of rem, shifts, bitwise ops and counts, expm1/log1p/tan,
is_finite and atan2 (aot/ir/ops/elementwise.py), at their edge values."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops import infer_type
from ops_util import run

# numpy's own fmod/log1p/tan warn on the special values compared here
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def test_rem_int_and_float():
    a = np.array([7, -7, 7, -7, 5, -128, 0], np.int8)
    b = np.array([3, 3, -3, -3, 0, -1, 4], np.int8)
    np.testing.assert_array_equal(run("rem", a, b), [1, -1, 1, -1, 0, 0, 0])
    f = np.array([5.5, -5.5, 1e30, 3.0, np.inf, 1.0], np.float32)
    g = np.array([2.0, 2.0, 7.0, np.inf, 1.0, 0.0], np.float32)
    np.testing.assert_array_equal(run("rem", f, g), np.fmod(f, g))


def test_shifts_out_of_range():
    a = np.array([1, -8, 127, -128, 5, -3], np.int8)
    b = np.array([1, 2, 8, 7, -1, 100], np.int8)
    np.testing.assert_array_equal(run("shift_left", a, b), [2, -32, 0, 0, 0, 0])
    np.testing.assert_array_equal(run("shift_right_arithmetic", a, b), [0, -2, 0, -1, 0, -1])
    np.testing.assert_array_equal(run("shift_right_logical", a, b), [0, 62, 0, 1, 0, 0])
    with pytest.raises(IRError):
        infer_type("shift_left", [TensorType(DType.F32, (2,))] * 2, {})


def test_bitwise_on_ints_and_counts():
    a = np.array([0b1010, -1, 0, 255], np.int32)
    b = np.array([0b0110, 5, 0, 15], np.int32)
    np.testing.assert_array_equal(run("and", a, b), a & b)
    np.testing.assert_array_equal(run("or", a, b), a | b)
    np.testing.assert_array_equal(run("xor", a, b), a ^ b)
    np.testing.assert_array_equal(run("not", a), ~a)
    np.testing.assert_array_equal(run("popcnt", a), [2, 32, 0, 8])
    np.testing.assert_array_equal(run("clz", a), [28, 0, 32, 24])
    np.testing.assert_array_equal(run("not", np.array([True, False])), [False, True])
    with pytest.raises(IRError):
        infer_type("and", [TensorType(DType.F32, (2,))] * 2, {})


def test_float_unary_and_atan2():
    x = np.array([-1.0, -1e-8, 0.0, 0.5, 2.0, np.inf, np.nan], np.float64)
    np.testing.assert_array_equal(run("expm1", x), np.expm1(x))
    np.testing.assert_array_equal(run("log1p", x), np.log1p(x))
    np.testing.assert_array_equal(run("tan", x), np.tan(x))
    fin = run("is_finite", x.astype(np.float32))
    assert fin.dtype == np.bool_
    np.testing.assert_array_equal(fin, np.isfinite(x))
    y = np.array([0.0, -0.0, 1.0, -1.0, np.inf], np.float32)
    z = np.array([-0.0, -1.0, 0.0, -np.inf, np.inf], np.float32)
    np.testing.assert_array_equal(run("atan2", y, z), np.arctan2(y, z))
    with pytest.raises(IRError):
        infer_type("is_finite", [TensorType(DType.I32, (2,))], {})
