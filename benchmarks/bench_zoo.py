"""aot vs onnxruntime on the transformers model zoo (models/make_zoo.py): compile, match, latency, size.

    python benchmarks/bench_zoo.py [--runs 30] [--threads 1,2] [--models bert gpt2_decode] [--out DIR] [--json FILE]
                                   [--cpu haswell [--peer avx2]]

For each zoo model: export it (or reuse OUT/NAME.onnx and NAME.inputs.npz from an
earlier run with the same --out), compile it with aot for this machine, compare
every output on the model's own inputs with onnxruntime's (graph optimizations
off: the graph as written; aot verify's comparison and tolerances), then time
both engines side by side at each thread count (onnxruntime with its default
optimizations; alternating blocks of runs, benchmarks/side_by_side.py) and print
medians and the ratio aot / onnxruntime: ABOVE 1 MEANS AOT IS SLOWER. The
geometric mean of the ratios of the models that match ends each column. A model
that fails to export, compile or run, or does not match, is a row saying so.

--cpu NAME compiles for another CPU (as aot-compile --cpu), to measure a code path
this machine can run but is not its own: `--cpu haswell` on an AVX-512 host times
the AVX2 code. onnxruntime picks its kernels for this machine, so such a ratio
is aot's AVX2 code against onnxruntime's best here (pessimistic for aot), unless
--peer avx2 times a copy of onnxruntime that takes its AVX2 kernels, as on an
AVX2 server (benchmarks/peer_avx2.py).

Needs torch and transformers to export the models (the `bench` extra).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import make_zoo  # noqa: E402
from peer_avx2 import use_avx2_onnxruntime  # noqa: E402
from side_by_side import alternate_medians, cpu_model_name  # noqa: E402

import aot  # noqa: E402
from aot.codegen.cpu.target import CpuTarget  # noqa: E402
from aot.verify import DEFAULT_ATOL, DEFAULT_RTOL, compare_arrays, onnxruntime_outputs  # noqa: E402


@dataclass
class Row:
    model: str
    status: str = "ok"  # ok, MISMATCH, or what failed
    detail: str = ""  # the error or the mismatch, when not ok
    export_s: float | None = None  # None: reused from --out
    compile_s: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    artifact_bytes: int | None = None
    onnx_bytes: int | None = None
    target: str = ""
    aot_ms: dict[int, float] = field(default_factory=dict)  # threads -> median
    ort_ms: dict[int, float] = field(default_factory=dict)

    def ratio(self, threads: int) -> float | None:
        if threads not in self.aot_ms:
            return None
        return self.aot_ms[threads] / self.ort_ms[threads]


def describe_target(artifact: Path) -> str:
    """The CPU aot compiled for and its x86 code path (avx512, avx2, narrow)."""
    from aot.artifact import read_artifact

    entry = read_artifact(artifact.read_bytes()).annotated["cpu"][0]  # triple and features: the tooling section's
    target = CpuTarget(entry["triple"], entry["cpu"], entry.get("features", ""))
    return f"{target.cpu} ({target.code_path})" if target.arch == "x86_64" else f"{target.arch} {target.cpu}"


def _error(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def export(name: str, out: Path, row: Row) -> Path | None:
    model = out / f"{name}.onnx"
    if model.is_file() and make_zoo.inputs_path(model).is_file():
        return model
    start = time.perf_counter()
    try:
        make_zoo.make(name, out)
    except Exception as err:  # noqa: BLE001 -- a row, not a crash of the whole benchmark
        row.status, row.detail = "export failed", _error(err)
        return None
    row.export_s = time.perf_counter() - start
    return model


def check(model: Path, artifact: Path, feeds: dict[str, np.ndarray], row: Row) -> None:
    """Compare aot's outputs with onnxruntime's as aot verify does: the row's errors and status."""
    session = aot.Session(artifact, threads=1)
    got = session.run(None, feeds)
    want = onnxruntime_outputs(model, feeds)
    row.max_abs, row.max_rel = 0.0, 0.0
    for info, g, w in zip(session.get_outputs(), got, want):
        max_abs, max_rel, problem = compare_arrays(np.asarray(g), np.asarray(w), DEFAULT_ATOL, DEFAULT_RTOL)
        row.max_abs, row.max_rel = max(row.max_abs, max_abs), max(row.max_rel, max_rel)
        if problem and row.status == "ok":
            row.status, row.detail = "MISMATCH", f"output {info.name}: {problem}"


def bench(name: str, out: Path, runs: int, threads: list[int], cpu: str = "native") -> Row:
    import onnxruntime as ort

    row = Row(name)
    model = export(name, out, row)
    if model is None:
        return row
    row.onnx_bytes = model.stat().st_size
    feeds = make_zoo.load_inputs(model)
    artifact = out / (f"{name}.aot" if cpu == "native" else f"{name}.{cpu}.aot")
    start = time.perf_counter()
    try:
        aot.compile(model, artifact, cpu=cpu)
    except Exception as err:  # noqa: BLE001
        row.status, row.detail = "compile failed", _error(err)
        return row
    row.compile_s = time.perf_counter() - start
    row.artifact_bytes = artifact.stat().st_size
    row.target = describe_target(artifact)
    try:
        check(model, artifact, feeds, row)
    except Exception as err:  # noqa: BLE001
        row.status, row.detail = "run failed", _error(err)
        return row
    for count in threads:
        ours = aot.Session(artifact, threads=count)
        options = ort.SessionOptions()
        options.intra_op_num_threads = count  # its defaults otherwise (workers spin, as aot's do)
        options.log_severity_level = 3
        peer = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        aot_s, ort_s = alternate_medians([lambda: ours.run(None, feeds), lambda: peer.run(None, feeds)], runs)
        row.aot_ms[count], row.ort_ms[count] = aot_s * 1e3, ort_s * 1e3
    return row


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _cell(value: float | None, fmt: str, width: int) -> str:
    return f"{'-' if value is None else format(value, fmt):>{width}}"


def print_row(row: Row, threads: list[int]) -> None:
    cells = [f"{row.model:<16}", _cell(row.export_s, ".1f", 8), _cell(row.compile_s, ".1f", 9),
             _cell(row.max_abs, ".1e", 9), _cell(row.max_rel, ".1e", 9)]
    for count in threads:
        cells += [_cell(row.aot_ms.get(count), ".3f", 9), _cell(row.ort_ms.get(count), ".3f", 9),
                  _cell(row.ratio(count), ".2f", 7)]
    size = f"{row.artifact_bytes / 1e6:.1f}" if row.artifact_bytes else "-"
    cells.append(f"{size:>8}")
    print(" ".join(cells) + f"  {row.status}" + (f": {row.detail}" if row.detail else ""), flush=True)


def header(threads: list[int]) -> str:
    cells = [f"{'model':<16}", f"{'export s':>8}", f"{'compile s':>9}", f"{'max abs':>9}", f"{'max rel':>9}"]
    for count in threads:
        cells += [f"{f'aot ms/{count}t':>9}", f"{f'ort ms/{count}t':>9}", f"{f'ratio/{count}t':>7}"]
    cells.append(f"{'aot MB':>8}")
    return " ".join(cells) + "  match"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(make_zoo.MODELS),
                        help="zoo models, space or comma separated (default: all; see models/make_zoo.py --list)")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per engine and thread count (medians)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--out", type=Path, help="export here and reuse what an earlier run exported "
                                                 "(default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    parser.add_argument("--cpu", default="native", help="compile for this CPU, as aot-compile --cpu (default: "
                        "this machine's); e.g. haswell times the AVX2 code on an AVX-512 host")
    parser.add_argument("--peer", choices=["native", "avx2"], default="native",
                        help="onnxruntime's kernels: this CPU's best (native) or its AVX2 ones (avx2)")
    args = parser.parse_args(argv)
    if args.peer == "avx2":
        use_avx2_onnxruntime()
    names = [n for item in args.models for n in item.split(",") if n]
    unknown = [n for n in names if n not in make_zoo.ZOO]
    if unknown:
        parser.error(f"unknown zoo model(s) {', '.join(unknown)}; choose from {', '.join(make_zoo.MODELS)}")
    threads = [int(t) for t in args.threads.split(",") if t]
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        host = CpuTarget.host()
        target = f"{host.cpu} ({host.code_path} code path)" if args.cpu == "native" else f"--cpu {args.cpu}"
        print(f"CPU: {cpu_model_name()}; aot compiles for {target}; onnxruntime's {args.peer} kernels")
        print(f"runs={args.runs} per engine and thread count, medians in ms; ratio = aot / onnxruntime "
              f"(ABOVE 1: AOT IS SLOWER); match: aot verify's tolerance (atol {DEFAULT_ATOL:g}, rtol {DEFAULT_RTOL:g}) "
              f"against onnxruntime")
        print(header(threads))
        rows = []
        for name in names:
            try:
                row = bench(name, out, args.runs, threads, args.cpu)
            except Exception as err:  # noqa: BLE001 -- any other failure is still one row
                row = Row(name, "failed", _error(err))
                traceback.print_exc()
            print_row(row, threads)
            rows.append(row)
        means = {count: geometric_mean([r.ratio(count) for r in rows if r.status == "ok" and r.ratio(count)])
                 for count in threads}
        matched = sum(r.status == "ok" for r in rows)
        print(f"geometric mean of aot / onnxruntime over the {matched} matching model(s): "
              + ", ".join(f"{count} thread(s) {_cell(means[count], '.3f', 0).strip()}" for count in threads))
        if args.json:
            data = {"cpu": cpu_model_name(), "target": target, "peer": args.peer, "runs": args.runs,
                    "threads": threads, "ratio": "aot / onnxruntime (above 1: aot slower)",
                    "atol": DEFAULT_ATOL, "rtol": DEFAULT_RTOL,
                    "models": [asdict(r) | {"ratios": {c: r.ratio(c) for c in threads}} for r in rows],
                    "geometric_mean": means}
            args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if all(r.status == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
