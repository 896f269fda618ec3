"""Helpers for kernel-body tests: graphs compiled through the default pipeline (packed for the
target's vector width, as aot.compile does), run whole and split into thread-sized pieces (last
piece first: work items must be independent), and checked against the reference interpreter;
which body emitter took each kernel; dense and conv2d graphs with their epilogues."""
from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Callable

import numpy as np

from aot.codegen.cpu import CpuTarget, emit_cpu
from aot.codegen.cpu.bodies import body_emitter
from aot.codegen.cpu.body import BodyEmitter
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Value
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from aot.plan import ExecutionPlan

HOST = CpuTarget.host()
TOL = dict(rtol=2e-5, atol=2e-5)


def aligned(nbytes: int) -> np.ndarray:
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes + 64]


def load_shared(shared_object: bytes) -> ctypes.CDLL:
    fd, path = tempfile.mkstemp(suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(shared_object)
    lib = ctypes.CDLL(path)
    os.unlink(path)
    return lib


def compile_and_run(graph: Graph, feeds: dict[str, np.ndarray], pieces: int = 1,
                    target: CpuTarget = HOST) -> tuple[list[np.ndarray], ExecutionPlan]:
    # packed for the target's vector width, as aot.compile does
    plan = run_pipeline(graph, PipelineOptions(passes=default_passes(target.vector_lanes, pad_stems=True)))
    code = emit_cpu(plan, target)
    lib = load_shared(code.shared_object)
    ins = [np.ascontiguousarray(feeds[v.name], dtype=np.float32) for v in graph.inputs]
    outs = [np.full(v.type.shape, np.nan, np.float32) for v in graph.outputs]
    arena = aligned(plan.arena_bytes)
    weights = aligned(len(plan.weights))
    weights[:len(plan.weights)] = np.frombuffer(plan.weights, np.uint8)
    args = ((ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins]),
            (ctypes.c_void_p * len(outs))(*[a.ctypes.data for a in outs]),
            ctypes.c_void_p(arena.ctypes.data), ctypes.c_void_p(weights.ctypes.data))
    for symbol, items in code.kernels:
        cuts = sorted({0, items, *(items * k // pieces for k in range(1, pieces))})
        for begin, end in reversed(list(zip(cuts, cuts[1:]))):
            getattr(lib, symbol)(*args, ctypes.c_int64(begin), ctypes.c_int64(end))
    return outs, plan


def emitters(plan: ExecutionPlan) -> list[BodyEmitter | None]:
    return [body_emitter(k, HOST) for k in plan.kernels]


def check(make: Callable[[], Graph], feeds: dict[str, np.ndarray], pieces: int = 1,
          target: CpuTarget = HOST) -> ExecutionPlan:
    expected = interpret(make(), feeds)
    got, plan = compile_and_run(make(), feeds, pieces, target)
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, **TOL)
    return plan


# -- graphs ------------------------------------------------------------------------
def seeded_constant(b: Builder, shape: tuple[int, ...], seed: int) -> Value:
    return b.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def bias_relu(b: Builder, y: Value, axis: int, seed: int) -> Value:
    shape = y.type.shape
    bias = b.op("broadcast", [seeded_constant(b, (shape[axis],), seed)], dims=(axis,), shape=shape)
    zero = b.op("broadcast", [b.constant(np.float32(0))], dims=(), shape=shape)
    return b.op("max", [b.op("add", [y, bias]), zero])


def dense(m: int, k: int, n: int, epilogue: str = "bias_relu", lhs_shape: tuple[int, ...] | None = None,
          contract: int = -1) -> Callable[[], Graph]:
    def make() -> Graph:
        g = Graph()
        shape = lhs_shape or (m, k)
        x = g.add_input("x", TensorType(DType.F32, shape))
        b = Builder(g)
        w = seeded_constant(b, (k, n), 1)
        lc = contract % len(shape)
        y = b.op("dot", [x, w], lhs_batch=(), rhs_batch=(), lhs_contract=(lc,), rhs_contract=(0,))
        if epilogue == "bias_relu":
            y = bias_relu(b, y, y.type.rank - 1, 2)
        elif epilogue == "residual_tanh":
            r = g.add_input("r", y.type)
            y = b.op("tanh", [b.op("add", [y, r])])
        elif epilogue == "two_consumers":  # the dot becomes a kernel root of its own
            g.add_output(b.op("exp", [b.op("neg", [y])]), "z")
            y = b.op("mul", [y, y])
        g.add_output(y, "y")
        return g
    return make


def conv2d(x_shape: tuple[int, ...], o: int, kernel: tuple[int, int], epilogue: str = "bias_relu", groups: int = 1,
           strides: tuple[int, int] = (1, 1), padding=((0, 0), (0, 0)), dilation: tuple[int, int] = (1, 1)) -> Callable[[], Graph]:
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, x_shape))
        b = Builder(g)
        w = seeded_constant(b, (o, x_shape[1] // groups) + kernel, 3)
        y = b.op("conv", [x, w], strides=strides, padding=padding, dilation=dilation, groups=groups)
        if epilogue == "bias_relu":
            y = bias_relu(b, y, 1, 4)
        elif epilogue == "residual_tanh":
            r = g.add_input("r", y.type)
            y = b.op("tanh", [b.op("add", [y, r])])
        elif epilogue == "two_consumers":
            g.add_output(b.op("exp", [b.op("neg", [y])]), "z")
            y = b.op("mul", [y, y])
        g.add_output(y, "y")
        return g
    return make


def feeds_for(make: Callable[[], Graph], seed: int = 9) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.type.shape) for v in make().inputs}
