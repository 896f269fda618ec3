"""sort / argsort kernels (aot/codegen/cpu/sort.py): ties, NaN and signed zeros, every dtype, inner and
outer dims, split work ranges and a fused transposed input, vs the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from aot.interpreter import interpret
from aot.ir import DType
from codegen_util import PlanBuilder, check, graph_with_inputs, ir_dtype, rand


@pytest.mark.parametrize("n", [0, 1, 2, 7, 33, 1000])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_sort_rows_f32_with_ties_and_nan(n, descending, rng):
    x_val = rng.integers(-4, 4, (3, n)).astype(np.float32)  # many ties
    x_val[x_val == 3] = np.nan
    x_val[x_val == -3] = -0.0
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (3, n)))
    g.add_output(b.op("sort", [x], dim=1, descending=descending), "values")
    g.add_output(b.op("argsort", [x], dim=1, descending=descending, dtype=DType.I32), "order")
    compiled = check(g, {"x": x_val})
    values, order = compiled.run_split({"x": x_val}, 3)
    want_values, want_order = interpret(g, {"x": x_val})
    np.testing.assert_array_equal(order, want_order)
    np.testing.assert_array_equal(np.signbit(values), np.signbit(want_values))  # -0.0 vs 0.0 kept in order


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.float64, np.float16, np.bool_], ids=lambda d: np.dtype(d).name)
def test_sort_along_inner_and_outer_dims(dtype, rng):
    x_val = rand((37, 4, 3), dtype, rng)
    g, b, (x,) = graph_with_inputs(("x", ir_dtype(dtype), x_val.shape))
    for dim in (0, 2):
        for descending in (False, True):
            suffix = f"{dim}{'d' if descending else 'a'}"
            g.add_output(b.op("sort", [x], dim=dim, descending=descending), f"sort{suffix}")
            g.add_output(b.op("argsort", [x], dim=dim, descending=descending, dtype=DType.I64), f"argsort{suffix}")
    check(g, {"x": x_val})


def test_sort_of_transposed_input_fused(rng):
    x_val = rng.standard_normal((5, 9)).astype(np.float32)
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (5, 9)))
    t = b.op("transpose", [x], perm=(1, 0))
    y = b.op("argsort", [t], dim=0, descending=True, dtype=DType.I32)
    g.add_output(y, "y")
    pb = PlanBuilder(g)
    check(g, {"x": x_val}, plan=pb.plan([pb.kernel([t.producer, y.producer])]))
