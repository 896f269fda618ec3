"""Side-by-side latency and size: aot artifact vs onnxruntime on the sample models.

    python benchmarks/bench_samples.py [--runs 200] [--threads 1] [models...]
    python benchmarks/bench_samples.py --suite benchmark [--runs 50]   # torch-made benchmark models


Both engines run in this one process, with their default thread-pool settings,
alternating in blocks of BLOCK timed runs, so machine noise hits both alike;
a pause before each block keeps either from being timed while the other's
spinning workers hold the cores. Prints medians and the ratio onnxruntime / aot (above 1 means
aot is faster), and artifact bytes against the ONNX file and weight bytes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import make_samples  # noqa: E402

import aot  # noqa: E402
from aot.inspect import describe  # noqa: E402


# timed runs per engine before the other engine's turn; untimed running before
# them; the pause before each block (see bench)
BLOCK = 10
WAKE_S = 0.03
SETTLE_S = 0.5


def bench(name: str, model: Path, out_dir: Path, runs: int, threads: int) -> dict[str, float]:
    import onnxruntime as ort

    artifact = out_dir / f"{name}.aot"
    start = time.perf_counter()
    aot.compile(model, artifact)
    compile_s = time.perf_counter() - start
    x = np.load(model.with_suffix(".input.npy"))
    ours = aot.Session(artifact, threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # its defaults otherwise (workers spin, as aot's do)
    peer = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feeds = {"x": x}
    for _ in range(10):  # warm up both
        ours.run(None, feeds)
        peer.run(None, feeds)
    t_ours: list[float] = []
    t_peer: list[float] = []
    # Both pools spin after a run (onnxruntime's for about 100 ms), and a spinning
    # worker takes a core from the other engine. So the engines alternate in
    # blocks, with a pause that lets the other's workers park before each block
    # and untimed runs that wake its own (a woken worker may first share its
    # waker's core until the scheduler moves it).
    for _ in range(-(-runs // BLOCK)):
        for engine, times in ((ours, t_ours), (peer, t_peer)):
            time.sleep(SETTLE_S)
            awake = time.perf_counter() + WAKE_S
            while time.perf_counter() < awake:  # untimed: the scheduler settles the woken threads
                engine.run(None, feeds)
            for _ in range(BLOCK):
                start = time.perf_counter()
                engine.run(None, feeds)
                times.append(time.perf_counter() - start)
    info = describe(artifact)
    diff = float(np.max(np.abs(ours.run(None, feeds)[0] - peer.run(None, feeds)[0])))
    return {
        "aot_ms": statistics.median(t_ours) * 1e3,
        "ort_ms": statistics.median(t_peer) * 1e3,
        "artifact_bytes": info["file_bytes"],
        "onnx_bytes": model.stat().st_size,
        "weights_bytes": info["weights_bytes"],
        "compile_s": compile_s,
        "max_abs_diff": diff,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model names (default: the whole suite)")
    parser.add_argument("--suite", choices=["samples", "benchmark"], default="samples",
                        help="samples: models/make_samples.py; benchmark: models/make_benchmarks.py (needs torch)")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if args.suite == "samples":
            paths = make_samples.write_samples(out)
        else:
            import make_benchmarks

            paths = {name: make_benchmarks.make(name, out) for name in (args.models or make_benchmarks.MODELS)}
        names = args.models or list(paths)
        header = f"{'model':<10} {'aot ms':>9} {'ort ms':>9} {'ort/aot':>8} {'artifact B':>11} {'onnx B':>10} {'weights B':>10} {'compile s':>9} {'max|diff|':>10}"
        print(f"threads={args.threads}, runs={args.runs}, medians")
        print(header)
        for name in names:
            r = bench(name, paths[name], out, args.runs, args.threads)
            print(f"{name:<10} {r['aot_ms']:>9.4f} {r['ort_ms']:>9.4f} {r['ort_ms'] / r['aot_ms']:>8.2f} "
                  f"{r['artifact_bytes']:>11} {r['onnx_bytes']:>10} {r['weights_bytes']:>10} {r['compile_s']:>9.2f} {r['max_abs_diff']:>10.2e}")


if __name__ == "__main__":
    main()
