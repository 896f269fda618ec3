"""Helpers for CPU codegen tests: execution plans built by hand (every non-constant node its own
kernel, or hand-fused kernels), compiled, loaded with ctypes and run; results checked against the
reference interpreter at per-dtype tolerances."""
from __future__ import annotations

import ctypes
import os
import tempfile

import ml_dtypes
import numpy as np

from aot.codegen.cpu import CpuCode, CpuTarget, emit_cpu
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Node, Value
from aot.plan import ExecutionPlan, Kernel, Slice

HOST = CpuTarget.host()
FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8]


# -- plans ----------------------------------------------------------------------------
def _align(n: int) -> int:
    return (n + 63) // 64 * 64


class PlanBuilder:
    """Assigns slices: graph inputs/outputs, weights for constants, arena for the rest."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.slices: dict[str, Slice] = {}
        self.weights = bytearray()
        self.arena = 0
        for i, v in enumerate(graph.inputs):
            self.slices[v.name] = Slice("input", i, 0, v.type.nbytes)
        for i, v in enumerate(graph.outputs):
            self.slices.setdefault(v.name, Slice("output", i, 0, v.type.nbytes))

    def place(self, v: Value) -> None:
        if v.name in self.slices:
            return
        constant = self.graph.constant_value(v)
        if constant is not None:
            offset = _align(len(self.weights))
            self.weights.extend(b"\0" * (offset - len(self.weights)))
            self.weights.extend(np.ascontiguousarray(constant).tobytes())
            self.slices[v.name] = Slice("weights", 0, offset, v.type.nbytes)
            return
        offset = _align(self.arena)
        self.slices[v.name] = Slice("arena", 0, offset, v.type.nbytes)
        self.arena = offset + v.type.nbytes

    def kernel(self, nodes: list[Node], name: str = "") -> Kernel:
        """A kernel computing nodes[-1] with `nodes` fused; every other operand is a param."""
        fused = {id(n) for n in nodes}
        params: list[Value] = []
        for node in nodes:
            for v in node.inputs:
                if (v.producer is None or id(v.producer) not in fused) and all(p is not v for p in params):
                    params.append(v)
                    self.place(v)
        root = nodes[-1].out
        self.place(root)
        return Kernel(name or f"k.{root.name}", root, nodes, params)

    def plan(self, kernels: list[Kernel]) -> ExecutionPlan:
        return ExecutionPlan(self.graph, kernels, dict(self.slices), _align(self.arena), 0, bytes(self.weights))


def simple_plan(graph: Graph) -> ExecutionPlan:
    """Every non-constant node its own kernel; scalar constants fused, larger ones in weights."""
    pb = PlanBuilder(graph)
    kernels = []
    for node in graph.nodes:
        if node.op == "constant":
            continue
        fused = [v.producer for v in node.inputs if v.producer is not None and v.producer.op == "constant" and v.type.size == 1]
        unique = []
        for n in fused:
            if all(u is not n for u in unique):
                unique.append(n)
        kernels.append(pb.kernel([*unique, node]))
    return pb.plan(kernels)


# -- running --------------------------------------------------------------------------
def _aligned_empty(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes]


class Compiled:
    def __init__(self, plan: ExecutionPlan, target: CpuTarget = HOST):
        self.plan = plan
        self.code: CpuCode = emit_cpu(plan, target)
        fd, self.path = tempfile.mkstemp(suffix=".so")
        with os.fdopen(fd, "wb") as f:
            f.write(self.code.shared_object)
        self.lib = ctypes.CDLL(self.path)
        os.unlink(self.path)

    def _buffers(self, feeds: dict[str, np.ndarray]):
        g = self.plan.graph
        ins = [np.ascontiguousarray(np.asarray(feeds[v.name]).astype(v.type.dtype.to_numpy())) for v in g.inputs]
        outs = [np.empty(v.type.shape, dtype=v.type.dtype.to_numpy()) for v in g.outputs]
        arena = _aligned_empty(max(self.plan.arena_bytes, 64))
        weights = _aligned_empty(max(len(self.plan.weights), 64))
        weights[:len(self.plan.weights)] = np.frombuffer(self.plan.weights, dtype=np.uint8)
        in_ptrs = (ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins])
        out_ptrs = (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs])
        keep = (ins, arena, weights)
        return keep, outs, (in_ptrs, out_ptrs, ctypes.c_void_p(arena.ctypes.data), ctypes.c_void_p(weights.ctypes.data))

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        keep, outs, args = self._buffers(feeds)
        self.lib.aot_model_entry(*args)
        del keep
        return outs

    def run_split(self, feeds: dict[str, np.ndarray], pieces: int) -> list[np.ndarray]:
        """Run each kernel over its items in `pieces` ranges, last range first."""
        keep, outs, args = self._buffers(feeds)
        for symbol, items in self.code.kernels:
            cuts = sorted({0, items, *(items * k // pieces for k in range(1, pieces))})
            fn = getattr(self.lib, symbol)
            for begin, end in reversed(list(zip(cuts, cuts[1:]))):
                fn(*args, ctypes.c_int64(begin), ctypes.c_int64(end))
        del keep
        return outs


def tolerance(dtype: np.dtype) -> dict[str, float]:
    name = np.dtype(dtype).name
    return {
        "float16": dict(rtol=2e-3, atol=1e-3), "bfloat16": dict(rtol=1.6e-2, atol=1e-2),
        "float32": dict(rtol=2e-6, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-13),
    }.get(name, dict(rtol=0, atol=0))


def check(graph: Graph, feeds: dict[str, np.ndarray], plan: ExecutionPlan | None = None, tol: dict | None = None,
          target: CpuTarget = HOST) -> Compiled:
    compiled = Compiled(plan or simple_plan(graph), target)
    got = compiled.run(feeds)
    want = interpret(graph, feeds)
    for name, g, w in zip(graph.output_names, got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        t = tol or tolerance(w.dtype)
        if w.dtype.kind == "f" or w.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), equal_nan=True, err_msg=name, **t)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)
    return compiled


# -- graphs and data --------------------------------------------------------------------
def graph_with_inputs(*specs: tuple[str, DType, tuple[int, ...]]) -> tuple[Graph, Builder, list[Value]]:
    g = Graph()
    values = [g.add_input(name, TensorType(dtype, shape)) for name, dtype, shape in specs]
    return g, Builder(g), values


def specials(dtype) -> np.ndarray:
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, -1e-3, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 10.0, -10.0, 50.0, -50.0]
    if np.dtype(dtype) in (np.float32, np.float64):
        values += [1e-30, 88.0, -88.0, 89.0, -100.0, 100.0, -104.5, 1e-40, 3.0e38, 1e5, -1e5]
    if np.dtype(dtype) == np.float64:
        values += [700.0, -740.0, 710.0, -746.0, 1e-310, 1e300]
    return np.array(values).astype(dtype)


def ir_dtype(dtype) -> DType:
    return DType.from_numpy(np.dtype(dtype))


def rand(shape, dtype, rng, low=-3.0, high=3.0):
    dt = np.dtype(dtype) if dtype != "bfloat16" else np.dtype(ml_dtypes.bfloat16)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dt)
    return rng.uniform(low, high, size=shape).astype(dt)


def count_calls(monkeypatch, owner, name: str) -> list[int]:
    """Count the calls of owner.name from now on (calls[0]); llvmlite's, say: outside the code
    the kernel fingerprints digest."""
    calls = [0]
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(owner, name, counted)
    return calls
