"""Latency of two builds of one model, interleaved run by run: before/after a change, or two targets.

    python benchmarks/compare_artifacts.py BEFORE.aot AFTER.aot [--runs 25]

Loads each artifact's CPU code with ctypes (aot.kernel_runner.load_code) and
calls the model entry single-threaded, alternating the two, so noise on this
shared machine hits both alike. Both artifacts must take the same inputs.
Prints medians and the speedup (above 1: AFTER is faster). An artifact built
for another CPU (`aot-compile --cpu haswell`) runs wherever the host has its
instructions (an AVX-512 host runs AVX2 code).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from aot.kernel_runner import load_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args(argv)
    first_code, second_code = load_code(args.before), load_code(args.after)
    before, after = first_code.run_entry, second_code.run_entry
    if first_code.manifest["inputs"] != second_code.manifest["inputs"]:
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
