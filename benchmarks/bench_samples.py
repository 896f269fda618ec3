"""Side-by-side latency and size: aot artifact vs onnxruntime on the sample models.

    python benchmarks/bench_samples.py [--runs 200] [--threads 1] [models...]
    python benchmarks/bench_samples.py --suite benchmark [--runs 50]   # torch-made benchmark models


Both engines run in this one process, with their default thread-pool settings,
timed side by side in alternating blocks of runs (benchmarks/side_by_side.py).
Prints medians and the ratio onnxruntime / aot (above 1 means aot is faster),
and artifact bytes against the ONNX file and weight bytes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import make_samples  # noqa: E402
from side_by_side import alternate_medians  # noqa: E402

import aot  # noqa: E402
from aot.inspect import describe  # noqa: E402


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
    aot_s, ort_s = alternate_medians([lambda: ours.run(None, feeds), lambda: peer.run(None, feeds)], runs)
    info = describe(artifact)
    diff = float(np.max(np.abs(ours.run(None, feeds)[0] - peer.run(None, feeds)[0])))
    return {
        "aot_ms": aot_s * 1e3,
        "ort_ms": ort_s * 1e3,
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
