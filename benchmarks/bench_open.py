"""Opening a model: time and peak memory, aot's C runtime beside onnxruntime.

    python benchmarks/bench_open.py [--runs 5] [--models-dir DIR] [models...]

For each suite model (models/make_benchmarks.py, made with torch into a temporary
folder, or taken from --models-dir) compiled to an artifact, opens it in a fresh
process through the C runtime alone (`aot_model_open_file` over ctypes, no Python
session) and the ONNX file with onnxruntime, and reports the median open time and
the process's peak resident memory (VmHWM) above what it held just before the open.
The artifact's weight bytes and file bytes are printed beside them: opening holds
the decoded weights, and the runtime drops the file's pages as it checks and decodes
them, so the peak should stay near the weights. The same model compiled with
`weights_codec="none"` is opened too: its weights are read in place from the mapped
file, so opening holds no copy of them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "models"))

from side_by_side import cpu_model_name  # noqa: E402

# Each probe runs in its own process: VmHWM only grows, so one open per process.
_PROBE = r"""
import ctypes, json, sys, time
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
engine, path = sys.argv[1], sys.argv[2]
if engine == "aot":
    from aot.runtime.abi import CError
    from aot.runtime.library import load_library
    lib = load_library()
    model, err = ctypes.c_void_p(), CError()
    before_rss, before_hwm = kib("VmRSS"), kib("VmHWM")
    start = time.perf_counter()
    status = lib.aot_model_open_file(path.encode(), ctypes.byref(model), ctypes.byref(err))
    took = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"open failed: {err.text()}")
else:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    before_rss, before_hwm = kib("VmRSS"), kib("VmHWM")
    start = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    took = time.perf_counter() - start
peak = kib("VmHWM")
print(json.dumps({"seconds": took, "peak_kib": max(peak, before_hwm) - before_rss, "grew_hwm": peak > before_hwm}))
"""


def probe(engine: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, engine, str(path)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"{engine} on {path}: {done.stderr.strip() or done.stdout.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    import make_benchmarks

    import aot
    from aot.inspect import describe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="suite models (default: all)")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per engine and model; medians")
    parser.add_argument("--models-dir", type=Path, help="take MODEL.onnx from here instead of making them")
    args = parser.parse_args()
    names = args.models or list(make_benchmarks.MODELS)
    print(f"# CPU: {cpu_model_name()}; open in a fresh process, medians of {args.runs}; "
          f"peak: VmHWM above the RSS before the open")
    print("| model | weights MB | file MB | aot open ms | aot peak MB | uncompressed: file MB | open ms | peak MB "
          "| ort open ms | ort peak MB |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.models_dir or Path(tmp)
        if args.models_dir is None:
            make_benchmarks.main([str(folder), *names])
        for name in names:
            onnx_path = folder / f"{name}.onnx"
            artifact = Path(tmp) / f"{name}.aot"
            aot.compile(onnx_path, artifact)
            plain = Path(tmp) / f"{name}.none.aot"
            aot.compile(onnx_path, plain, weights_codec="none")
            info = describe(artifact)
            paths = {"aot": artifact, "none": plain, "ort": onnx_path}
            rows = {engine: [probe("ort" if engine == "ort" else "aot", path) for _ in range(args.runs)]
                    for engine, path in paths.items()}

            def med(engine: str, key: str, scale: float) -> str:
                return f"{statistics.median(r[key] for r in rows[engine]) * scale:.1f}"
            print(f"| {name} | {info['weights_bytes'] / 1e6:.1f} | {info['file_bytes'] / 1e6:.1f} "
                  f"| {med('aot', 'seconds', 1e3)} | {med('aot', 'peak_kib', 1024 / 1e6)} "
                  f"| {plain.stat().st_size / 1e6:.1f} | {med('none', 'seconds', 1e3)} | {med('none', 'peak_kib', 1024 / 1e6)} "
                  f"| {med('ort', 'seconds', 1e3)} | {med('ort', 'peak_kib', 1024 / 1e6)} |")


if __name__ == "__main__":
    main()
