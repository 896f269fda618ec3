"""Scatter kernels (aot/codegen/cpu/scatter.py): every update kind and dtype, duplicate and out-of-bounds
windows, batching dims and empty updates, vs the reference interpreter (hand-built plans run with ctypes)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.ir import DType
from codegen_util import check, graph_with_inputs, ir_dtype, rand

ROWS = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


@pytest.mark.parametrize("kind", ["assign", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_scatter_rows_with_duplicates_and_out_of_bounds(kind, dtype, rng):
    i_val = np.array([1, 3, 1, 7, -2, 0, 4, 1], np.int32)  # duplicates; 7 and -2 are outside [0, 5)
    x_val = rand((5, 3), dtype, rng)
    u_val = rand((8, 3), dtype, rng)
    g, b, (x, i, u) = graph_with_inputs(("x", ir_dtype(dtype), (5, 3)), ("i", DType.I32, (8,)), ("u", ir_dtype(dtype), (8, 3)))
    g.add_output(b.op("scatter", [x, i, u], kind=kind, **ROWS), "y")
    check(g, {"x": x_val, "i": i_val, "u": u_val})


def test_scatter_windows_batching_and_empty(rng):
    # windows of 2 x 3 into a 6 x 4 operand, starts from 2-vectors (some windows stick out: skipped)
    i_val = np.array([[0, 0], [4, 1], [5, 0], [2, 2], [-1, 0], [3, 1]], np.int64)
    u_val = rng.standard_normal((6, 2, 3)).astype(np.float32)
    x_val = rng.standard_normal((6, 4)).astype(np.float32)
    g, b, (x, i, u, bi, bu, ei, eu) = graph_with_inputs(
        ("x", DType.F32, (6, 4)), ("i", DType.I64, (6, 2)), ("u", DType.F32, (6, 2, 3)),
        ("bi", DType.I32, (6, 2)), ("bu", DType.F32, (6, 2)), ("ei", DType.I32, (0, 1)), ("eu", DType.F32, (0, 4)))
    g.add_output(b.op("scatter", [x, i, u], update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1),
                      index_vector_dim=1, kind="add"), "windows")
    g.add_output(b.op("scatter", [x, bi, bu], update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
                      index_vector_dim=2, input_batching_dims=(0,), scatter_indices_batching_dims=(0,), kind="assign"), "batching")
    g.add_output(b.op("scatter", [x, ei, eu], kind="add", **ROWS), "empty")
    bi_val = rng.integers(-1, 5, (6, 2)).astype(np.int32)
    bu_val = rng.standard_normal((6, 2)).astype(np.float32)
    feeds = {"x": x_val, "i": i_val, "u": u_val, "bi": bi_val, "bu": bu_val,
             "ei": np.zeros((0, 1), np.int32), "eu": np.zeros((0, 4), np.float32)}
    check(g, feeds)
