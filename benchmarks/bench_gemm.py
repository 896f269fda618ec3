"""GFLOP/s of aot's packed f32 dot (layout pass + gemm microkernel) beside numpy (OpenBLAS).

    python benchmarks/bench_gemm.py [--runs 50] [--threads 1] [MxKxN ...]

Both run single-threaded by default (OPENBLAS_NUM_THREADS is set before numpy
loads), interleaved run by run in this one process, so noise hits both alike.
aot computes y = relu(x @ W + b) with W and b constants (the epilogue is fused
into the dot kernel); numpy computes x @ W alone, so the ratio slightly favours
numpy. Prints medians, GFLOP/s (2*M*K*N / time) and numpy/aot time ratio
(above 1 means aot is faster), and the elemental path for reference.
"""
from __future__ import annotations

import argparse
import os
import sys

ARGS = sys.argv[1:]
THREADS = ARGS[ARGS.index("--threads") + 1] if "--threads" in ARGS else "1"
os.environ["OPENBLAS_NUM_THREADS"] = THREADS  # before numpy is imported
os.environ["OMP_NUM_THREADS"] = THREADS

import ctypes  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from aot.codegen.cpu import CpuTarget, emit_cpu  # noqa: E402
from aot.ir import Builder, DType, Graph, TensorType  # noqa: E402
from aot.pipeline import PipelineOptions, run_pipeline  # noqa: E402
from aot.rewrite.const_fold import ConstFold  # noqa: E402
from aot.rewrite.dce import DeadCodeElim  # noqa: E402
from aot.rewrite.layout import Layout  # noqa: E402
from aot.rewrite.output_copies import OutputCopies  # noqa: E402

DEFAULT_SHAPES = ["1x1024x1024", "64x1024x1024", "256x256x256", "128x784x1024", "1x784x1024"]


def dense_graph(m: int, k: int, n: int, rng: np.random.Generator) -> Graph:
    g = Graph("dense")
    x = g.add_input("x", TensorType(DType.F32, (m, k)))
    b = Builder(g)
    w = b.constant(rng.standard_normal((k, n)).astype(np.float32))
    y = b.op("dot", [x, w], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    bias = b.op("broadcast", [b.constant(rng.standard_normal(n).astype(np.float32))], dims=(1,), shape=(m, n))
    zero = b.op("broadcast", [b.constant(np.float32(0))], dims=(), shape=(m, n))
    g.add_output(b.op("max", [b.op("add", [y, bias]), zero]), "y")
    return g


def compile_runner(graph: Graph, packed: bool) -> tuple[Callable[[], None], np.ndarray, np.ndarray]:
    """A no-argument call that runs the compiled graph on its own input/output buffers."""
    passes = [ConstFold(), DeadCodeElim(), OutputCopies()] + ([Layout()] if packed else [])
    plan = run_pipeline(graph, PipelineOptions(passes=passes))
    code = emit_cpu(plan, CpuTarget.host())
    fd, path = tempfile.mkstemp(suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(code.shared_object)
    lib = ctypes.CDLL(path)
    os.unlink(path)
    x = np.zeros(graph.inputs[0].type.shape, np.float32)
    y = np.zeros(graph.outputs[0].type.shape, np.float32)
    arena = np.zeros(plan.arena_bytes + 64, np.uint8)
    weights = np.frombuffer(plan.weights + bytes(64), np.uint8).copy()
    ins = (ctypes.c_void_p * 1)(x.ctypes.data)
    outs = (ctypes.c_void_p * 1)(y.ctypes.data)
    args = (ins, outs, ctypes.c_void_p(arena.ctypes.data), ctypes.c_void_p(weights.ctypes.data))
    entry = lib.aot_model_entry
    keep = (lib, arena, weights, ins, outs)

    def call() -> None:
        entry(*args)
        _ = keep

    return call, x, y


def median_time(fn: Callable[[], None], runs: int, inner: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", default="1")
    parser.add_argument("--elemental", action="store_true", help="also time the elemental (unpacked) path")
    args = parser.parse_args()
    print(f"threads={args.threads} (aot: 1), runs={args.runs}, medians; y = relu(x @ W + b) for aot, x @ W for numpy")
    header = f"{'MxKxN':<14} {'aot ms':>9} {'aot GF/s':>9} {'numpy ms':>9} {'numpy GF/s':>10} {'numpy/aot':>9} {'max|diff|':>9}"
    if args.elemental:
        header += f" {'elem GF/s':>9}"
    print(header)
    for shape in args.shapes:
        m, k, n = (int(s) for s in shape.split("x"))
        rng = np.random.default_rng(0)
        graph = dense_graph(m, k, n, rng)
        w = graph.constant_value(graph.nodes[0].out)
        bias = graph.constant_value(graph.nodes[2].out)
        run, x, y = compile_runner(graph, packed=True)
        x[...] = rng.standard_normal(x.shape)
        flops = 2.0 * m * k * n
        inner = max(1, int(2e7 // max(flops, 1)))

        def peer() -> None:
            np.matmul(x, w)

        run()
        diff = float(np.abs(y - np.maximum(x @ w + bias, 0)).max())
        t_ours, t_peer = [], []
        for _ in range(args.runs):  # interleaved
            t_ours.append(median_time(run, 1, inner))
            t_peer.append(median_time(peer, 1, inner))
        ours, theirs = statistics.median(t_ours), statistics.median(t_peer)
        line = (f"{shape:<14} {ours * 1e3:>9.4f} {flops / ours / 1e9:>9.1f} {theirs * 1e3:>9.4f} "
                f"{flops / theirs / 1e9:>10.1f} {theirs / ours:>9.2f} {diff:>9.1e}")
        if args.elemental:
            slow, _, _ = compile_runner(dense_graph(m, k, n, np.random.default_rng(0)), packed=False)
            line += f" {flops / median_time(slow, 3, 1) / 1e9:>9.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
