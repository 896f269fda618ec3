"""Shape rules and numpy references of gather, scatter and reverse (aot/ir/ops/indexing.py)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops import infer_type
from ops_util import run


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


# -- reverse ----------------------------------------------------------------------------
def test_reverse(rng):
    x = rng.standard_normal((3, 4, 5))
    np.testing.assert_array_equal(run("reverse", x, dims=(0, 2)), x[::-1, :, ::-1])
    np.testing.assert_array_equal(run("reverse", x, dims=()), x)
    with pytest.raises(IRError):
        infer_type("reverse", [TensorType(DType.F32, (3,))], {"dims": (1,)})
