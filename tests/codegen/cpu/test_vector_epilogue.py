"""Fused epilogues computed on whole vectors (codegen/cpu/vector_epilogue.py) vs the interpreter.

The depthwise kernel's plane mode stores every run through store_run, so each graph
here is a depthwise conv on a plane followed by one kind of epilogue. A spy on
vectorizable() records which path each run took: the vector path must take the
epilogues it promises to (else the test would pass on the element path alone), and
one it cannot take must fall back to the element path and still be right.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from aot.codegen.cpu import vector_epilogue
from aot.codegen.cpu.depthwise import DEPTHWISE_EMITTER
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Value
from bodies_util import TOL, compile_and_run, emitters, feeds_for, seeded_constant
from targets_util import cpus_to_check

X_SHAPE = (1, 3, 20, 20)  # a 20x20 plane: 25 vectors of 16, or 50 of 8


def _full(b: Builder, value: float, shape: tuple[int, ...]) -> Value:
    return b.op("broadcast", [b.constant(np.float32(value))], dims=(), shape=shape)


def _gelu(b: Builder, y: Value, g: Graph) -> Value:  # erf lane by lane, constants splat
    s = y.type.shape
    inner = b.op("erf", [b.op("mul", [y, _full(b, 0.70710678, s)])])
    return b.op("mul", [b.op("mul", [y, _full(b, 0.5, s)]), b.op("add", [inner, _full(b, 1.0, s)])])


def _hardswish(b: Builder, y: Value, g: Graph) -> Value:  # max/min/div
    s = y.type.shape
    clip = b.op("min", [b.op("max", [b.op("add", [y, _full(b, 3.0, s)]), _full(b, 0.0, s)]), _full(b, 6.0, s)])
    return b.op("div", [b.op("mul", [y, clip]), _full(b, 6.0, s)])


def _leaky_select(b: Builder, y: Value, g: Graph) -> Value:  # compare + select
    s = y.type.shape
    positive = b.op("compare", [y, _full(b, 0.0, s)], direction="gt")
    return b.op("select", [positive, y, b.op("mul", [y, _full(b, 0.1, s)])])


def _channel_scale(b: Builder, y: Value, g: Graph) -> Value:  # a per-channel divisor: uniform along the plane
    s = y.type.shape
    scale = b.constant(np.array([0.5, -2.0, 4.0], np.float32))
    return b.op("div", [y, b.op("broadcast", [scale], dims=(1,), shape=s)])


def _sqrt_abs_residual(b: Builder, y: Value, g: Graph) -> Value:  # abs, sqrt, sub, neg, a residual param
    r = g.add_input("r", y.type)
    return b.op("neg", [b.op("sub", [b.op("sqrt", [b.op("abs", [y])]), r])])


def _column_bias(b: Builder, y: Value, g: Graph) -> Value:
    # a bias that varies along the width (not uniform over a plane, not of the root's
    # shape): the vector path cannot take it, the element path must
    s = y.type.shape
    bias = seeded_constant(b, (s[3],), 5)
    return b.op("add", [y, b.op("broadcast", [bias], dims=(3,), shape=s)])


EPILOGUES: dict[str, tuple[Callable[[Builder, Value, Graph], Value], bool]] = {
    "gelu": (_gelu, True),
    "hardswish": (_hardswish, True),
    "leaky_select": (_leaky_select, True),
    "channel_scale": (_channel_scale, True),
    "sqrt_abs_residual": (_sqrt_abs_residual, True),
    "column_bias": (_column_bias, False),
}


def depthwise_then(epilogue: Callable[[Builder, Value, Graph], Value]) -> Callable[[], Graph]:
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, X_SHAPE))
        b = Builder(g)
        w = seeded_constant(b, (X_SHAPE[1], 1, 3, 3), 3)
        y = b.op("conv", [x, w], strides=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=X_SHAPE[1])
        g.add_output(epilogue(b, y, g), "y")
        return g
    return make


@pytest.fixture
def vector_path_taken(monkeypatch) -> list[bool]:
    taken: list[bool] = []
    real = vector_epilogue.vectorizable

    def spy(*args, **kwargs) -> bool:
        result = real(*args, **kwargs)
        taken.append(result)
        return result
    monkeypatch.setattr(vector_epilogue, "vectorizable", spy)
    return taken


@pytest.mark.parametrize("name", list(EPILOGUES))
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_epilogue_on_vectors_matches_the_reference(name, target, vector_path_taken):
    epilogue, vectorizable = EPILOGUES[name]
    make = depthwise_then(epilogue)
    feeds = feeds_for(make)
    expected = interpret(make(), feeds)
    got, plan = compile_and_run(make(), feeds, pieces=2, target=target)
    assert emitters(plan) == [DEPTHWISE_EMITTER]
    assert vector_path_taken and set(vector_path_taken) == {vectorizable}
    np.testing.assert_allclose(got[0], expected[0], **TOL)


def test_compare_and_sqrt_on_nan_and_inf_match_the_element_path():
    # ordered compares are false on NaN (select takes the other side), sqrt(|-inf|) is inf
    for name in ("leaky_select", "sqrt_abs_residual"):
        make = depthwise_then(EPILOGUES[name][0])
        feeds = feeds_for(make)
        feeds["x"][0, 0, 4, 4] = np.nan
        feeds["x"][0, 2, 10, 0] = -np.inf
        expected = interpret(make(), feeds)[0]
        got, _ = compile_and_run(make(), feeds)
        np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
        np.testing.assert_allclose(got[0], expected, **TOL)
