"""Latency of two builds of one model, interleaved run by run: before/after a change, or two targets.

    python benchmarks/compare_artifacts.py BEFORE.aot AFTER.aot [--runs 25]

Loads each artifact's CPU code with ctypes (as profile_kernels.py does) and
calls the model entry single-threaded, alternating the two, so noise on this
shared machine hits both alike. Both artifacts must take the same inputs.
Prints medians and the speedup (above 1: AFTER is faster). An artifact built
for another CPU (`aot-compile --cpu haswell`) runs wherever the host has its
instructions (an AVX-512 host runs AVX2 code).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_kernels  # noqa: E402


def entry_call(path: Path) -> tuple[Callable[[], None], dict[str, object]]:
    """A no-argument call of the artifact's model entry on seeded inputs, and its manifest."""
    manifest, lib, weight_bytes = profile_kernels._load(path)
    rng = np.random.default_rng(0)
    ins = [profile_kernels._tensor(spec, rng) for spec in manifest["inputs"]]
    outs = [np.zeros(spec["shape"], np.dtype(spec["dtype"])) for spec in manifest["outputs"]]
    arena = profile_kernels._aligned(manifest["arena"]["bytes"])
    weights = profile_kernels._aligned(len(weight_bytes))
    weights[:len(weight_bytes)] = np.frombuffer(weight_bytes, np.uint8)
    args = ((ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins]),
            (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs]),
            ctypes.c_void_p(arena.ctypes.data), ctypes.c_void_p(weights.ctypes.data))
    buffers = (ins, outs, arena, weights)

    def run() -> None:
        lib.aot_model_entry(*args)

    run.buffers = buffers  # type: ignore[attr-defined]  # the entry's pointers need the arrays alive
    return run, manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args(argv)
    before, before_manifest = entry_call(args.before)
    after, after_manifest = entry_call(args.after)
    if before_manifest["inputs"] != after_manifest["inputs"]:
        raise SystemExit(f"{args.before} and {args.after} take different inputs: not two builds of one model")
    before()
    after()  # warm both
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(args.runs):
        for call, sink in ((before, times[0]), (after, times[1])):
            start = time.perf_counter()
            call()
            sink.append(time.perf_counter() - start)
    first, second = (statistics.median(t) * 1e3 for t in times)
    print(f"runs={args.runs}, 1 thread, medians")
    print(f"before {first:9.3f} ms  {args.before}")
    print(f"after  {second:9.3f} ms  {args.after}")
    print(f"speedup {first / second:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
