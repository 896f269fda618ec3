"""Per-kernel times of a compiled artifact, slowest first.

    python benchmarks/profile_kernels.py MODEL.aot [--runs 30] [--top 20]
    python benchmarks/profile_kernels.py MODEL.onnx [...]   # compiles it first (to a temporary file)

Loads the artifact's CPU shared object with ctypes, runs the whole model once
(so every arena value holds real data), then times each kernel alone over all
of its work items, single-threaded. Prints per kernel: median time, share of
the summed kernel times, the work items, the fused ops. The sum is what one
single-threaded run costs without the runtime's dispatch.

--in-sequence times each kernel where it runs in the model instead, run after
run: its inputs are in the caches the kernels before it left them in, as in a
real run (a kernel alone and repeated finds them hot, and looks faster).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aot.kernel_runner import load_code


def profile(artifact_path: Path, runs: int, in_sequence: bool = False) -> list[tuple[float, dict[str, Any]]]:
    """(median seconds, manifest kernel entry) per kernel, in plan order."""
    code = load_code(artifact_path)
    manifest, lib, args = code.manifest, code.lib, code.args
    code.run_entry()
    if in_sequence:
        return _profile_in_sequence(manifest, lib, args, runs)
    results = []
    for kernel in manifest["kernels"]:
        fn = getattr(lib, kernel["symbol"])
        end = ctypes.c_int64(kernel["work"])
        fn(*args, ctypes.c_int64(0), end)  # warm caches
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            fn(*args, ctypes.c_int64(0), end)
            times.append(time.perf_counter() - start)
        results.append((statistics.median(times), kernel))
    return results


def _profile_in_sequence(manifest: dict[str, Any], lib: Any, args: list[Any],
                         runs: int) -> list[tuple[float, dict[str, Any]]]:
    kernels = manifest["kernels"]
    calls = [(getattr(lib, k["symbol"]), ctypes.c_int64(k["work"])) for k in kernels]
    times: list[list[float]] = [[] for _ in kernels]
    zero = ctypes.c_int64(0)
    for run in range(runs + 1):  # the first run warms up
        for i, (fn, end) in enumerate(calls):
            start = time.perf_counter()
            fn(*args, zero, end)
            if run:
                times[i].append(time.perf_counter() - start)
    return [(statistics.median(t), k) for t, k in zip(times, kernels)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="an .aot artifact, or an ONNX model to compile first")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--top", type=int, default=0, help="print only the N slowest kernels (0: all)")
    parser.add_argument("--in-sequence", action="store_true",
                        help="time each kernel in model order, run after run (caches as in a real run)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if path.suffix != ".aot":
            import aot

            artifact = Path(tmp) / f"{path.stem}.aot"
            aot.compile(path, artifact)
            path = artifact
        results = profile(path, args.runs, args.in_sequence)
    total = sum(t for t, _ in results)
    ranked = sorted(results, key=lambda r: -r[0])
    shown = ranked[:args.top] if args.top else ranked
    print(f"{'kernel':<12} {'ms':>8} {'share':>6} {'work':>6}  ops")
    for seconds, kernel in shown:
        print(f"{kernel['name']:<12} {seconds * 1e3:8.3f} {seconds / total:6.1%} {kernel['work']:>6}  {'+'.join(kernel['ops'])}")
    print(f"{'sum':<12} {total * 1e3:8.3f}  ({len(results)} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
