"""Shape rules and numpy references of gather, scatter, reverse, sort/argsort,
conv lhs_dilation, reduce_window dilations and the new elementwise ops."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import IRError
from aot.ir.builder import normalize_attr
from aot.ir.types import DType, TensorType
from aot.ops import NON_ELEMENTAL, evaluate, infer_type

# numpy's own fmod/log1p/tan warn on the special values compared here
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def run(op: str, *arrays: np.ndarray, **attrs) -> np.ndarray:
    attrs = {k: normalize_attr(v) for k, v in attrs.items()}
    out = infer_type(op, [TensorType(DType.from_numpy(a.dtype), a.shape) for a in arrays], attrs)
    return evaluate(op, list(arrays), attrs, out)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# -- gather ---------------------------------------------------------------------------
def test_gather_take_along_axis_1(rng):
    x = rng.standard_normal((3, 5, 2)).astype(np.float32)
    idx = np.array([[4, 0], [2, 2], [1, 3]], dtype=np.int32)
    got = run("gather", x, idx, offset_dims=(0, 3), collapsed_slice_dims=(1,), start_index_map=(1,),
              index_vector_dim=2, slice_sizes=(3, 1, 2))
    np.testing.assert_array_equal(got, np.take(x, idx, axis=1))


def test_gather_rows_like_x_idx(rng):
    x = rng.standard_normal((6, 4)).astype(np.float32)
    idx = np.array([5, 0, 3, 3], dtype=np.int64)
    got = run("gather", x, idx, offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
              index_vector_dim=1, slice_sizes=(1, 4))
    np.testing.assert_array_equal(got, x[idx])


def test_gather_nd_like(rng):
    x = rng.standard_normal((4, 5, 3)).astype(np.float64)
    idx = np.array([[[0, 1], [3, 4]], [[2, 2], [1, 0]]], dtype=np.int32)  # [2, 2, 2]: index vectors last
    got = run("gather", x, idx, offset_dims=(2,), collapsed_slice_dims=(0, 1), start_index_map=(0, 1),
              index_vector_dim=2, slice_sizes=(1, 1, 3))
    np.testing.assert_array_equal(got, x[idx[..., 0], idx[..., 1]])


def test_gather_clamps_start_indices():
    x = np.arange(10, dtype=np.int32)
    idx = np.array([[-5], [8], [100], [3]], dtype=np.int32)
    got = run("gather", x, idx, offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,),
              index_vector_dim=1, slice_sizes=(3,))
    # starts clamp to [0, 10 - 3]
    np.testing.assert_array_equal(got, [[0, 1, 2], [7, 8, 9], [7, 8, 9], [3, 4, 5]])


def test_gather_batching_dims(rng):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    idx = np.array([[1, 4], [0, 0], [3, 2]], dtype=np.int32)  # per batch b: rows idx[b]
    got = run("gather", x, idx, offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
              index_vector_dim=2, slice_sizes=(1, 1, 4), operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    want = np.stack([x[b][idx[b]] for b in range(3)])
    np.testing.assert_array_equal(got, want)


def test_gather_index_vector_dim_in_middle(rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    idx = np.array([[[1], [2]], [[3], [0]]], dtype=np.int64)  # [2, 2, 1], vector dim 1: starts (1,2), (3,0)
    got = run("gather", x, idx, offset_dims=(2, 3), collapsed_slice_dims=(), start_index_map=(0, 1),
              index_vector_dim=1, slice_sizes=(1, 3))
    assert got.shape == (2, 1, 1, 3)
    np.testing.assert_array_equal(got[0, 0], x[1:2, 2:5])
    np.testing.assert_array_equal(got[1, 0], x[3:4, 0:3])


def test_gather_empty_indices(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    got = run("gather", x, np.zeros((0,), np.int32), offset_dims=(1,), collapsed_slice_dims=(0,),
              start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 3))
    assert got.shape == (0, 3)


@pytest.mark.parametrize("attrs,message", [
    (dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1, slice_sizes=(2, 3)), "slice size <= 1"),
    (dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1), index_vector_dim=1, slice_sizes=(1, 3)), "start_index_map"),
    (dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 9)), "does not fit"),
    (dict(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 3)), "offset_dims"),
])
def test_gather_rejects_bad_attrs(attrs, message):
    with pytest.raises(IRError, match=message):
        infer_type("gather", [TensorType(DType.F32, (4, 3)), TensorType(DType.I32, (5,))], attrs)


def test_gather_rejects_float_indices():
    with pytest.raises(IRError, match="integers"):
        infer_type("gather", [TensorType(DType.F32, (4, 3)), TensorType(DType.F32, (5,))],
                   dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1, slice_sizes=(1, 3)))


# -- scatter --------------------------------------------------------------------------
ROWS = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


def test_scatter_set_duplicates_last_wins(rng):
    x = np.zeros((5, 3), np.float32)
    idx = np.array([1, 3, 1], dtype=np.int32)
    upd = np.arange(9, dtype=np.float32).reshape(3, 3)
    got = run("scatter", x, idx, upd, kind="assign", **ROWS)
    want = x.copy()
    want[3] = upd[1]
    want[1] = upd[2]  # the later update of row 1 wins
    np.testing.assert_array_equal(got, want)


def test_scatter_add_accumulates_duplicates(rng):
    x = rng.standard_normal((5, 3)).astype(np.float64)
    idx = np.array([4, 0, 4, 4], dtype=np.int64)
    upd = rng.standard_normal((4, 3))
    got = run("scatter", x, idx, upd, kind="add", **ROWS)
    want = x.copy()
    np.add.at(want, idx, upd)
    np.testing.assert_allclose(got, want)


def test_scatter_skips_out_of_bounds_windows():
    x = np.zeros((6,), np.int32)
    idx = np.array([[0], [4], [5], [-1], [2]], dtype=np.int32)
    upd = np.array([[1, 1], [2, 2], [3, 3], [4, 4], [5, 5]], dtype=np.int32)  # windows of 2
    got = run("scatter", x, idx, upd, update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,),
              index_vector_dim=1, kind="add")
    # start 5 would write [5, 6): partly outside, skipped whole; -1 skipped
    np.testing.assert_array_equal(got, [1, 1, 5, 5, 2, 2])


@pytest.mark.parametrize("kind,fn", [("mul", np.multiply.at), ("max", np.maximum.at), ("min", np.minimum.at)])
def test_scatter_kinds(kind, fn, rng):
    x = rng.integers(-5, 5, (7,)).astype(np.int16)
    idx = rng.integers(0, 7, (10,)).astype(np.int32)
    upd = rng.integers(-5, 5, (10,)).astype(np.int16)
    got = run("scatter", x, idx, upd, update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
              index_vector_dim=1, kind=kind)
    want = x.copy()
    fn(want, idx, upd)
    np.testing.assert_array_equal(got, want)


def test_scatter_batching_dims(rng):
    x = np.zeros((2, 4), np.float32)
    idx = np.array([[3, 3], [0, 2]], dtype=np.int32)
    upd = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    got = run("scatter", x, idx, upd, update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
              index_vector_dim=2, input_batching_dims=(0,), scatter_indices_batching_dims=(0,), kind="add")
    np.testing.assert_array_equal(got, [[0, 0, 0, 3], [3, 0, 4, 0]])


def test_scatter_rejects_bad_kind_and_shapes():
    types = [TensorType(DType.F32, (5, 3)), TensorType(DType.I32, (2,)), TensorType(DType.F32, (2, 3))]
    with pytest.raises(IRError, match="kind"):
        infer_type("scatter", types, dict(ROWS, kind="sub"))
    with pytest.raises(IRError, match="scatter dims"):
        infer_type("scatter", [types[0], TensorType(DType.I32, (3,)), types[2]], dict(ROWS, kind="add"))
    with pytest.raises(IRError, match="dtype"):
        infer_type("scatter", [types[0], types[1], TensorType(DType.F64, (2, 3))], dict(ROWS, kind="add"))


# -- reverse, sort ----------------------------------------------------------------------
def test_reverse(rng):
    x = rng.standard_normal((3, 4, 5))
    np.testing.assert_array_equal(run("reverse", x, dims=(0, 2)), x[::-1, :, ::-1])
    np.testing.assert_array_equal(run("reverse", x, dims=()), x)
    with pytest.raises(IRError):
        infer_type("reverse", [TensorType(DType.F32, (3,))], {"dims": (1,)})


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


# -- conv / reduce_window dilation --------------------------------------------------------
def test_conv_lhs_dilation_equals_conv_of_spread_input(rng):
    x = rng.standard_normal((1, 2, 4, 3))
    w = rng.standard_normal((3, 2, 2, 3))
    attrs = dict(strides=(1, 2), padding=((1, 1), (2, 0)), dilation=(1, 1), groups=1)
    got = run("conv", x, w, lhs_dilation=(3, 2), **attrs)
    spread = np.zeros((1, 2, 10, 5))
    spread[:, :, ::3, ::2] = x
    np.testing.assert_allclose(got, run("conv", spread, w, **attrs))
    assert run("conv", x, w, lhs_dilation=(1, 1), **attrs).shape == run("conv", x, w, **attrs).shape


def test_conv_transposed_1d_by_hand():
    # stride-2 transposed conv of [1, 2] with kernel [1, 10, 100] (flipped: full correlation)
    x = np.array([[[1.0, 2.0]]])
    w = np.array([[[100.0, 10.0, 1.0]]])
    got = run("conv", x, w, strides=(1,), padding=((2, 2),), dilation=(1,), lhs_dilation=(2,), groups=1)
    np.testing.assert_allclose(got, [[[1.0, 10.0, 102.0, 20.0, 200.0]]])


def test_reduce_window_dilations_by_hand():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    # base dilation 2: [1, id, 2, id, 3]; windows of 2 with window dilation 2: (0,2), (1,3), (2,4)
    got = run("reduce_window", x, kind="sum", window=(2,), strides=(1,), padding=((0, 0),), base_dilation=(2,), window_dilation=(2,))
    np.testing.assert_array_equal(got, [3.0, 0.0, 5.0])
    got = run("reduce_window", x, kind="max", window=(2,), strides=(1,), padding=((1, 0),), base_dilation=(2,))
    np.testing.assert_array_equal(got, [1.0, 1.0, 2.0, 2.0, 3.0])
    with pytest.raises(IRError, match="window_dilation"):
        infer_type("reduce_window", [TensorType(DType.F32, (3,))],
                   {"kind": "sum", "window": (2,), "strides": (1,), "padding": ((0, 0),), "window_dilation": (0,)})


# -- elementwise --------------------------------------------------------------------------
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
