"""Accuracy of the libm-free transcendentals, in ulps, on dense grids."""
from __future__ import annotations

import math

import numpy as np
import pytest
from test_codegen_cpu import Compiled, graph_with_inputs, simple_plan

from aot.ir import DType

F32_FUNCS = {
    "exp": (np.exp, (-103.0, 88.7)),
    "log": (np.log, (1e-30, 1e30)),
    "tanh": (np.tanh, (-12.0, 12.0)),
    "logistic": (lambda x: 1.0 / (1.0 + np.exp(-x)), (-100.0, 100.0)),
    "erf": (np.vectorize(math.erf), (-6.0, 6.0)),
    "sin": (np.sin, (-1000.0, 1000.0)),
    "cos": (np.cos, (-1000.0, 1000.0)),
}
# max error in ulps of the f32 result (sin/cos near zeros measured against |result| >= 1e-3)
# f32 erf is a fast rational approximation: abs error <= 4.5e-7, so up to 8 ulp where |erf| nears 1
F32_MAX_ULP = {"exp": 2, "log": 2, "tanh": 3, "logistic": 3, "erf": 8, "sin": 1, "cos": 1}
F64_MAX_ULP = {**{op: 4 * ulp for op, ulp in F32_MAX_ULP.items()}, "erf": 8}


def _grid(low: float, high: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if low > 0:  # log-uniform over a positive range
        return np.exp(rng.uniform(np.log(low), np.log(high), n))
    return np.concatenate([np.linspace(low, high, n // 2), rng.uniform(low, high, n // 2), rng.uniform(-1e-3, 1e-3, 64)])


def _ulp_error(got: np.ndarray, exact: np.ndarray, dtype) -> np.ndarray:
    spacing = np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_transcendental_ulps(dtype):
    rng = np.random.default_rng(1)
    n = 20000
    grids = {op: _grid(*rng_range, n, rng).astype(dtype) for op, (_, rng_range) in F32_FUNCS.items()}
    ir_dtype = DType.from_numpy(np.dtype(dtype))
    g, b, inputs = graph_with_inputs(*[(op, ir_dtype, grids[op].shape) for op in F32_FUNCS])
    for value, op in zip(inputs, F32_FUNCS):
        g.add_output(b.op(op, [value]), op)
    outputs = Compiled(simple_plan(g)).run(grids)
    for op, got in zip(F32_FUNCS, outputs):
        fn = F32_FUNCS[op][0]
        exact = fn(grids[op].astype(np.float64))
        keep = np.abs(exact) >= 1e-3 if op in ("sin", "cos") else np.abs(exact) > 1e-300
        errors = _ulp_error(got, exact, dtype)[keep]
        # f64 "exact" is numpy's own f64 result (itself ~1 ulp): allow a little more
        limit = F32_MAX_ULP[op] if dtype == np.float32 else F64_MAX_ULP[op]
        assert errors.max() <= limit, f"{op}: max {errors.max():.2f} ulp at x={grids[op][keep][errors.argmax()]!r}"
