"""Side-by-side latency: aot artifact vs onnxruntime at 1 and 2 threads, and artifact size.

    python benchmarks/bench_samples.py [--runs 100] [--threads 1,2] [models...]
    python benchmarks/bench_samples.py --suite benchmark [--runs 50]   # torch-made benchmark models
    python benchmarks/bench_samples.py --suite benchmark --cpu znver3  # the AVX2 code path
    python benchmarks/bench_samples.py --suite benchmark --cpu x86-64-v3 --peer avx2  # both on AVX2 code

Every engine (aot and onnxruntime, one session each per thread count) runs in
this one process, timed side by side in alternating blocks of runs
(benchmarks/side_by_side.py), so the ratios compare runs made under the same
machine load. The header names the CPU with its own code path and CPU count,
and the code path the artifact was built for (`--cpu`, default native:
avx512, avx2 or narrow). Prints medians, aot/onnxruntime per thread count
(above 1: aot is slower), aot's own 2-thread over 1-thread time, the
geometric means, and artifact bytes against the ONNX file and weight bytes.

onnxruntime picks its kernels from the CPU it runs on; `--peer avx2` times a
copy of it that takes its AVX2 kernels (benchmarks/peer_avx2.py), so that an
AVX2 build of aot on an AVX-512 host meets the onnxruntime an AVX2 server runs.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import make_samples  # noqa: E402
from peer_avx2 import use_avx2_onnxruntime  # noqa: E402
from side_by_side import alternate_medians, cpu_model_name  # noqa: E402

import aot  # noqa: E402
from aot.codegen.cpu.target import CpuTarget  # noqa: E402
from aot.inspect import describe  # noqa: E402


@dataclass(frozen=True)
class Result:
    aot_ms: dict[int, float]  # median per thread count
    ort_ms: dict[int, float]
    artifact_bytes: int
    onnx_bytes: int
    weights_bytes: int
    compile_s: float
    max_abs_diff: float


def bench(name: str, model: Path, out_dir: Path, runs: int, threads: Sequence[int], cpu: str) -> Result:
    import onnxruntime as ort

    artifact = out_dir / f"{name}.aot"
    start = time.perf_counter()
    aot.compile(model, artifact, cpu=cpu)
    compile_s = time.perf_counter() - start
    feeds = {"x": np.load(model.with_suffix(".input.npy"))}
    engines: list[Callable[[], object]] = []
    diff = 0.0
    for n in threads:
        ours = aot.Session(artifact, threads=n)
        options = ort.SessionOptions()
        options.intra_op_num_threads = n  # its defaults otherwise (workers spin, as aot's do)
        peer = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        diff = max(diff, float(np.max(np.abs(ours.run(None, feeds)[0] - peer.run(None, feeds)[0]))))
        engines += [lambda s=ours: s.run(None, feeds), lambda s=peer: s.run(None, feeds)]
    medians = alternate_medians(engines, runs)
    info = describe(artifact)
    return Result(
        aot_ms={n: medians[2 * i] * 1e3 for i, n in enumerate(threads)},
        ort_ms={n: medians[2 * i + 1] * 1e3 for i, n in enumerate(threads)},
        artifact_bytes=info["file_bytes"],
        onnx_bytes=model.stat().st_size,
        weights_bytes=info["weights_bytes"],
        compile_s=compile_s,
        max_abs_diff=diff,
    )


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model names (default: the whole suite)")
    parser.add_argument("--suite", choices=["samples", "benchmark"], default="samples",
                        help="samples: models/make_samples.py; benchmark: models/make_benchmarks.py (needs torch)")
    parser.add_argument("--runs", type=int, default=100, help="timed runs per engine and thread count")
    parser.add_argument("--threads", default="1,2", help="comma list of thread counts (default 1,2)")
    parser.add_argument("--cpu", default="native", help="the aot target CPU (znver3, x86-64-v3: AVX2 code)")
    parser.add_argument("--peer", choices=["native", "avx2"], default="native",
                        help="onnxruntime's kernels: this CPU's best (native) or its AVX2 ones (avx2)")
    args = parser.parse_args()
    if args.peer == "avx2":
        use_avx2_onnxruntime()
    threads = [int(t) for t in args.threads.split(",")]
    code_path = CpuTarget.from_name(args.cpu).code_path
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if args.suite == "samples":
            paths = make_samples.write_samples(out)
        else:
            import make_benchmarks

            paths = {name: make_benchmarks.make(name, out) for name in (args.models or make_benchmarks.MODELS)}
        names = args.models or list(paths)
        print(f"CPU: {cpu_model_name()} ({CpuTarget.host().code_path}, {os.cpu_count()} CPUs); aot --cpu {args.cpu} "
              f"({code_path}); onnxruntime {args.peer}; threads {args.threads}; runs {args.runs}; medians; aot/ort above 1: aot slower")
        cols = "".join(f" {'aot ms ' + str(n) + 't':>10} {'ort ms ' + str(n) + 't':>10} {'aot/ort':>7}" for n in threads)
        scaling = f" {'aot ' + str(threads[-1]) + 't/' + str(threads[0]) + 't':>9}" if len(threads) > 1 else ""
        print(f"{'model':<12}{cols}{scaling} {'artifact B':>11} {'onnx B':>10} {'weights B':>10} {'compile s':>9} {'max|diff|':>9}")
        ratios: dict[int, list[float]] = {n: [] for n in threads}
        for name in names:
            r = bench(name, paths[name], out, args.runs, threads, args.cpu)
            row = ""
            for n in threads:
                ratios[n].append(r.aot_ms[n] / r.ort_ms[n])
                row += f" {r.aot_ms[n]:>10.4f} {r.ort_ms[n]:>10.4f} {ratios[n][-1]:>7.2f}"
            if len(threads) > 1:
                row += f" {r.aot_ms[threads[-1]] / r.aot_ms[threads[0]]:>9.2f}"
            print(f"{name:<12}{row} {r.artifact_bytes:>11} {r.onnx_bytes:>10} {r.weights_bytes:>10} "
                  f"{r.compile_s:>9.2f} {r.max_abs_diff:>9.2e}", flush=True)
        means = "".join(f" {'':>10} {'':>10} {geomean(ratios[n]):>7.2f}" for n in threads)
        print(f"{'geomean':<12}{means}")


if __name__ == "__main__":
    main()
