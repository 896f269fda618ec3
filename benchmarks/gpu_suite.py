"""GPU code for every kernel of the suites, without a GPU: ptxas per SM, and the kernels emulated.

    python benchmarks/gpu_suite.py                          # benchmark, light, stablehlo, 60 node cases
    python benchmarks/gpu_suite.py --suite light --no-emulate
    python benchmarks/gpu_suite.py --suite node --node-sample 200 --seed 3
    python benchmarks/gpu_suite.py --kernels kernels.md     # also every kernel's ptxas line

For each model: the plan (the CPU path's pipeline: same kernels, layouts and arena), its
NVPTX kernels for each SM (sm_80 and sm_90 unless --sm), each assembled by ptxas -v
(registers, spills, shared memory), packaged as a GPU-only artifact, and, unless
--no-emulate, that artifact run by the C runtime's CUDA path on the case's inputs (a
Session with device="cuda") through the test stand-in for the CUDA driver
(runtime_c/tests/fake_cuda.c), which runs each launch as the kernel's host build
(aot/codegen/nvptx/emulate.py: blocks and threads as loops, split at barriers); the
outputs are compared with the case's expected outputs (onnx's stored outputs, JAX's for
StableHLO, onnxruntime's for the benchmark models) with the case's tolerances. So the
runtime's launch sequence, argument marshalling, arena offsets, copies and checks are
tested on every model. `--emulate-in-process` runs the kernels in this process instead
(no C runtime). Prints a table per model and a summary; exit status 1 if any model fails.
The benchmark models need torch (models/make_benchmarks.py); without it they are skipped.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import onnx_suite  # noqa: E402

SUITES = ("benchmark", "light", "stablehlo", "node")  # and "zoo" with --zoo DIR
STABLEHLO_DIR = ROOT / "tests" / "data" / "stablehlo"


@dataclass
class GpuCase:
    name: str
    suite: str
    model: Any  # onnx.ModelProto or a Path to StableHLO text
    inputs: list[np.ndarray]
    expected: list[np.ndarray] | None
    rtol: float
    atol: float
    shapes: dict[str, tuple[int, ...]] | None = None
    source: Any = None  # the onnx_suite.Case of a node case (its inputs may be bound to constants)


@dataclass
class Row:
    case: GpuCase
    status: str = "ok"  # ok | rejected | ptxas | mismatch | crashed
    reason: str = ""
    kernels: int = 0
    bodies: Counter = field(default_factory=Counter)
    registers: dict[str, int] = field(default_factory=dict)  # sm -> max over kernels
    spilling: dict[str, int] = field(default_factory=dict)  # sm -> kernels with spill stores
    shared: int = 0  # max static shared bytes of a kernel
    max_error: float = 0.0
    seconds: float = 0.0
    per_kernel: list[str] = field(default_factory=list)


def _benchmark_cases(work: Path) -> list[GpuCase]:
    try:
        import make_benchmarks
        import onnx
        import onnxruntime as ort
    except ModuleNotFoundError as err:
        print(f"benchmark models skipped: {err}", file=sys.stderr)
        return []
    cases = []
    for name in make_benchmarks.MODELS:
        path = make_benchmarks.make(name, work)
        x = np.load(path.with_suffix(".input.npy"))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        expected = session.run(None, {session.get_inputs()[0].name: x})
        cases.append(GpuCase(name, "benchmark", onnx.load(str(path)), [x], expected, 1e-3, 1e-4))
    return cases


def _zoo_cases(folder: Path) -> list[GpuCase]:
    """The exported zoo models (benchmarks/bench_zoo.py writes NAME.onnx and NAME.inputs.npz) against onnxruntime."""
    import onnx
    import onnxruntime as ort

    cases = []
    for path in sorted(folder.glob("*.onnx")):
        feeds_file = path.with_name(path.stem + ".inputs.npz")
        if not feeds_file.exists():
            continue
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        feeds = dict(np.load(feeds_file))
        names = [i.name for i in session.get_inputs()]
        expected = session.run(None, {n: feeds[n] for n in names})
        cases.append(GpuCase(path.stem, "zoo", onnx.load(str(path)), [feeds[n] for n in names], expected, 1e-3, 1e-3,
                             {n: tuple(feeds[n].shape) for n in names}))
    return cases


def _light_cases() -> list[GpuCase]:
    """onnx's light models on seeded normal inputs, against onnxruntime: their stored inputs
    (arange / n) give near-constant outputs (squeezenet: 0.001 everywhere) that hide errors."""
    import onnxruntime as ort

    cases = []
    for c in onnx_suite.load_cases(["light"]):
        session = ort.InferenceSession(c.model.SerializeToString(), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(np.asarray(x).shape).astype(np.float32) for x in c.data_sets[0][0]]
        expected = session.run(None, {i.name: x for i, x in zip(session.get_inputs(), inputs)})
        cases.append(GpuCase(c.name.removeprefix("test_"), "light", c.model, inputs, expected, c.rtol, max(c.atol, 1e-5)))
    return cases


def _stablehlo_cases() -> list[GpuCase]:
    """The StableHLO test cases; expected outputs come from the reference interpreter (run_case),
    which tests/importers/stablehlo checks against JAX's stored outputs."""
    import ml_dtypes

    cases = []
    for path in sorted(STABLEHLO_DIR.rglob("*.mlir")):
        arrays = {}
        for key, value in np.load(path.with_suffix(".npz")).items():
            if key.startswith("bf16_"):  # stored as uint16 bits
                key, value = key[len("bf16_"):], value.view(ml_dtypes.bfloat16)
            arrays[key] = value
        inputs = [arrays[f"in_{i}"] for i in range(sum(k.startswith("in_") for k in arrays))]
        name = str(path.relative_to(STABLEHLO_DIR).with_suffix(""))
        shapes = {"x": inputs[0].shape} if name == "mlp_poly" else None  # shape-polymorphic export
        cases.append(GpuCase(name, "stablehlo", path, inputs, None, 1e-4, 1e-5, shapes))
    return cases


def _node_cases(sample: int, seed: int) -> list[GpuCase]:
    cases = onnx_suite.load_cases(["node"])
    random.Random(seed).shuffle(cases)
    picked = []
    for c in cases[:sample]:
        inputs = [onnx_suite._as_array(x) for x in c.data_sets[0][0]]
        expected = [onnx_suite._as_array(x) for x in c.data_sets[0][1]]
        if not all(isinstance(x, np.ndarray) for x in inputs + expected):
            continue  # sequences and optionals: not tensors
        picked.append(GpuCase(c.name.removeprefix("test_"), "node", c.model, inputs, expected, c.rtol, c.atol,
                              onnx_suite.symbolic_shapes(c.model, inputs) or None, c))
    return picked


# how run_case runs a model's GPU kernels
RUNS = ("runtime", "in-process", "none")


def _run_on_runtime(plan: Any, builds: list[Any], inputs: list[np.ndarray], host_dir: Path) -> list[np.ndarray]:
    """`plan`'s GPU-only artifact run by the C runtime's CUDA path, on the stand-in driver."""
    from aot.artifact import pack_artifact
    from aot.codegen.nvptx.host_library import artifact_host_libraries
    from aot.driver import CompileResult, build_manifest, build_tooling
    from aot.gpu_package import gpu_manifest, gpu_sections, gpu_tooling
    from aot.runtime.session import Session

    manifest = build_manifest(plan, [], "gpu_suite", gpu_manifest(plan, builds, "weights"))
    tooling = build_tooling(plan, [], "", gpu_tooling(plan, builds))
    artifact = pack_artifact(manifest, [("weights", plan.weights), *gpu_sections(builds)], tooling=tooling)
    artifact_host_libraries(CompileResult(None, artifact, manifest, tooling, plan), host_dir)
    with Session(artifact, device="cuda") as session:
        names = [info.name for info in session.get_inputs()]
        return session.run(None, dict(zip(names, inputs)))


def stand_in_driver(host_dir: Path) -> None:
    """Point the C runtime at the test stand-in for the CUDA driver (built once, cached), whose
    kernels are the host libraries in `host_dir`."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_cuda_util import fake_cuda_driver

    os.environ["AOT_CUDA_DRIVER"] = str(fake_cuda_driver())
    os.environ["AOT_FAKE_CUDA_HOST_DIR"] = str(host_dir)


def run_case(case: GpuCase, sms: list[str], run: str, host_dir: Path | None = None) -> Row:
    """`run`: "runtime" (the C runtime on the stand-in driver, whose environment stand_in_driver
    set with `host_dir`), "in-process" (emulate.py) or "none" (ptxas only)."""
    from aot.codegen.nvptx.emulate import emulate as run_emulated
    from aot.codegen.nvptx.ptxas import ptxas_path
    from aot.driver import import_model
    from aot.errors import AotError
    from aot.gpu_package import build_gpu
    from aot.interpreter import interpret
    from aot.pipeline import run_pipeline

    row = Row(case)
    start = time.perf_counter()
    try:
        try:
            given = case.inputs
            try:
                graph, _, _ = import_model(case.model, case.shapes)
                bind = None
            except AotError as err:
                # as onnx_suite.py and `aot-compile --bind`: parameters fed as inputs become constants
                bind = onnx_suite.freeze_int_inputs(case.source, str(err)) if case.source is not None else {}
                if not bind:
                    raise
                graph, _, _ = import_model(case.model, case.shapes, bind)
                names = [vi.name for vi in onnx_suite._real_inputs(case.model)]
                given = [x for name, x in zip(names, case.inputs) if name not in bind]
            inputs = [np.asarray(x).astype(v.type.dtype.to_numpy()) for x, v in zip(given, graph.inputs)]
            expected = case.expected
            if expected is None:  # the oracle: the reference interpreter on the imported graph
                expected = interpret(import_model(case.model, case.shapes, bind)[0], dict(zip(graph.input_names, inputs)))
            plan = run_pipeline(graph)
            try:
                builds = build_gpu(plan, sms)
            except AotError as err:
                if ptxas_path() is not None and "ptxas" in str(err):
                    row.status, row.reason = "ptxas", str(err).splitlines()[0]
                    return row
                raise
        except AotError as err:
            row.status, row.reason = "rejected", f"{type(err).__name__}: {str(err).splitlines()[0]}"
            return row
        first = builds[0].code
        row.kernels = len(first.kernels)
        row.bodies = Counter(k.body for k in first.kernels)
        row.shared = max((k.static_shared_bytes for k in first.kernels), default=0)
        if ptxas_path() is not None:
            for build in builds:
                sm, code, info = build.sm, build.code, build.assembly.kernels
                row.registers[sm] = max((i.registers for i in info.values()), default=0)
                row.spilling[sm] = sum(1 for i in info.values() if i.spill_store_bytes)
                for k in code.kernels:
                    i = info[k.symbol]
                    row.per_kernel.append(f"| {case.name} | {sm} | {k.symbol} | {k.name} | {k.body} | {k.grid} | "
                                          f"{k.block} | {i.registers} | {i.spill_store_bytes} | {k.static_shared_bytes} |")
        if run != "none":
            if run == "runtime":
                assert host_dir is not None, "stand_in_driver(host_dir) first"
                outputs = _run_on_runtime(plan, builds, inputs, host_dir)
            else:
                outputs = run_emulated(plan, inputs)
            why = onnx_suite.compare_outputs(outputs, expected, case.rtol, case.atol)
            for out, ref in zip(outputs, expected):
                if out.shape == ref.shape and out.dtype.kind == "f" and out.size:
                    with np.errstate(invalid="ignore"):
                        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
                    finite = diff[np.isfinite(diff)]
                    row.max_error = max(row.max_error, float(finite.max()) if finite.size else 0.0)
            if why:
                row.status, row.reason = "mismatch", why
    except Exception as err:  # a compiler bug: report it and go on
        row.status, row.reason = "crashed", f"{type(err).__name__}: {err} ({traceback.extract_tb(err.__traceback__)[-1].name})"
    finally:
        row.seconds = time.perf_counter() - start
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", action="append", choices=SUITES, help="suites to run (default: all)")
    parser.add_argument("--sm", default="sm_80,sm_90")
    parser.add_argument("--node-sample", type=int, default=60, help="node cases drawn at random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-emulate", action="store_true", help="ptxas only")
    parser.add_argument("--emulate-in-process", action="store_true",
                        help="run the kernels' host build in this process, not through the C runtime")
    parser.add_argument("--filter", action="append", default=[], help="only cases whose name contains this")
    parser.add_argument("--zoo", type=Path, help="also the zoo models exported in this folder (bench_zoo.py)")
    parser.add_argument("--kernels", type=Path, help="write every kernel's ptxas line (markdown) here")
    args = parser.parse_args(argv)
    from aot.codegen.nvptx import ptxas_path

    suites = args.suite or ([] if args.zoo else list(SUITES))
    sms = args.sm.split(",")
    if ptxas_path() is None:
        print("ptxas is not installed: no assembly, emulation only", file=sys.stderr)
    run = "none" if args.no_emulate else "in-process" if args.emulate_in_process else "runtime"
    with tempfile.TemporaryDirectory() as tmp:
        host_dir = Path(tmp) / "host_code"
        host_dir.mkdir()
        if run == "runtime":
            stand_in_driver(host_dir)
        cases: list[GpuCase] = []
        for suite in suites:
            cases += {"benchmark": lambda: _benchmark_cases(Path(tmp)), "light": _light_cases,
                      "stablehlo": _stablehlo_cases, "node": lambda: _node_cases(args.node_sample, args.seed)}[suite]()
        if args.zoo is not None:
            cases += _zoo_cases(args.zoo)
        if args.filter:
            cases = [c for c in cases if any(f in c.name for f in args.filter)]
        print(f"| model | suite | kernels | bodies | regs {'/'.join(sms)} | spilling kernels | max smem B | "
              f"emulated max err | s | status |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        rows = []
        for case in cases:
            row = run_case(case, sms, run, host_dir)
            rows.append(row)
            bodies = ", ".join(f"{name} {n}" for name, n in sorted(row.bodies.items()))
            regs = "/".join(str(row.registers.get(sm, "-")) for sm in sms)
            spills = "/".join(str(row.spilling.get(sm, "-")) for sm in sms)
            status = row.status + (f": {row.reason[:160]}" if row.reason else "")
            print(f"| {case.name} | {case.suite} | {row.kernels} | {bodies} | {regs} | {spills} | {row.shared} | "
                  f"{row.max_error:.2e} | {row.seconds:.1f} | {status} |", flush=True)
    counts = Counter(r.status for r in rows)
    print(f"\n{len(rows)} models: " + ", ".join(f"{n} {s}" for s, n in counts.most_common()))
    if args.kernels is not None:
        lines = ["| model | sm | symbol | kernel | body | grid | block | registers | spill stores B | smem B |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        args.kernels.write_text("\n".join(lines + [line for r in rows for line in r.per_kernel]) + "\n")
    # a node case the importer rejects is the CPU path's story (onnx_suite.py); the rest must pass
    bad = [r for r in rows if r.status in ("ptxas", "mismatch", "crashed") or (r.status == "rejected" and r.case.suite != "node")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
