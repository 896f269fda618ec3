"""`aot verify`: compile a model (or take its artifact), run it and a reference on the same
seeded inputs, compare every output, and on a mismatch find where it starts.

The reference is onnxruntime for ONNX models (graph optimizations off: the graph as
written), else the reference interpreter on the imported graph. Inputs are seeded
by dtype: floats ~ N(0, 1), bools 0/1, ints in [0, 4) -- except ints that index a
Gather (token ids into an embedding), which stay below the table's rows, and
inputs named like masks, which are all ones; or given as .npy files.

Bisection, on a mismatch (as Polygraphy's `debug reduce`, with the compiler's own seams):
  1. the reference interpreter runs the optimized graph: if it already differs from
     the reference, a pass (or the importer) changed the meaning: each pass is replayed
     with the interpreter after it, and the first whose graph differs is named;
  2. otherwise code generation is wrong: the artifact's kernels run one by one and each
     kernel's result is compared with the interpreter's value; the first that differs is
     named with the source nodes fused into it and the fusion decision that made it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aot.errors import ArtifactError, ModelError, RunError
from aot.feeds import index_bounds, manifest_specs, seeded_inputs

DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 1e-3


@dataclass(frozen=True)
class OutputReport:
    name: str
    shape: list[int]
    max_abs: float
    max_rel: float
    ok: bool
    problem: str = ""  # what differs and where, when not ok


@dataclass(frozen=True)
class Divergence:
    """Where a mismatch starts: a pass ("stage": "pass") or a kernel ("stage": "kernel")."""

    stage: str
    name: str
    detail: str
    source_nodes: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    fusion: list[str] = field(default_factory=list)


@dataclass
class VerifyReport:
    model: str
    reference: str
    cpu: str
    atol: float
    rtol: float
    inputs: dict[str, str]
    outputs: list[OutputReport]
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data


# == comparison ==========================================================================
def compare_arrays(got: np.ndarray, want: np.ndarray, atol: float, rtol: float) -> tuple[float, float, str]:
    """(max abs error, max rel error, "" or what differs): |got - want| <= atol + rtol * |want|
    element by element; NaN must meet NaN, inf the same inf; ints and bools exactly."""
    if got.shape != want.shape:
        return float("inf"), float("inf"), f"shape {list(got.shape)}, reference {list(want.shape)}"
    if got.size == 0:
        return 0.0, 0.0, ""
    if want.dtype.kind not in "fc":
        differs = got != want
        if differs.any():
            at = tuple(int(i) for i in np.argwhere(differs)[0])
            return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()), float("inf"), \
                f"{int(differs.sum())} element(s) differ, first at {at}: got {got[at]}, reference {want[at]}"
        return 0.0, 0.0, ""
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_differs = np.isnan(g) != np.isnan(w)
    if nan_differs.any():
        at = tuple(int(i) for i in np.argwhere(nan_differs)[0])
        return float("nan"), float("nan"), f"NaN at {at}: got {got[at]}, reference {want[at]}"
    finite = np.isfinite(g) & np.isfinite(w)
    inf_differs = ~finite & ~np.isnan(g) & ~np.isnan(w) & (g != w)
    g, w = np.where(finite, g, 0.0), np.where(finite, w, 0.0)  # non-finite places are judged above
    error = np.abs(g - w)
    rel = np.where(np.abs(w) > atol, error / np.maximum(np.abs(w), 1e-30), 0.0)
    max_abs, max_rel = float(error.max()), float(rel.max())
    bad = inf_differs | (error > atol + rtol * np.abs(w))
    if not bad.any():
        return max_abs, max_rel, ""
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(error)), error.shape))
    return max_abs, max_rel, (f"{int(bad.sum())} of {bad.size} element(s) out of tolerance, first at {at} "
                              f"(got {got[at]}, reference {want[at]}); largest error at {worst}")




# == references ==========================================================================
def onnxruntime_outputs(model: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's outputs for a model path or ModelProto, graph optimizations off (the graph
    as written); None where onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    source = str(model) if isinstance(model, (str, Path)) else model.SerializeToString()
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def _interpreter_outputs(graph: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    from aot.interpreter import interpret

    return interpret(graph, _by_value_name(graph, feeds))


def _by_value_name(graph: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Feeds keyed by the model's names -> keyed by the graph's value names."""
    return {value.name: feeds[name] for value, name in zip(graph.inputs, graph.input_names)}


# == verify ==============================================================================
def verify(model: str | Path, *, shapes: Mapping[str, tuple[int, ...]] | None = None,
           bind: Mapping[str, np.ndarray] | None = None, inputs: Mapping[str, np.ndarray] | None = None,
           artifact: str | Path | None = None, cpu: str = "native", threads: int = 1, seed: int = 0,
           atol: float = DEFAULT_ATOL, rtol: float = DEFAULT_RTOL, donate: Mapping[str, str] | None = None,
           infer_donation: bool = True) -> VerifyReport:
    """Compile `model` for `cpu` (or load `artifact`, built from it), run both and compare.
    `donate`, `infer_donation`: the compile's buffer donations (driver.compile_model); the
    run passes each donated input and its output apart, so the input is copied first."""
    from aot.artifact import read_artifact
    from aot.driver import compile_model, import_model
    from aot.runtime.session import Session

    model = Path(model)
    bind = dict(bind or {})
    if artifact is not None:
        artifact_bytes = read_artifact_bytes(Path(artifact))
        manifest = read_artifact(artifact_bytes).manifest
        if not manifest["cpu"]:  # verify runs the CPU code; a GPU-only artifact has none
            sms = ", ".join(s["sm"] for s in manifest.get("cuda", {}).get("sms", []))
            raise ArtifactError(f"'{artifact}' holds GPU code only (cuda: {sms or 'none'}): verify runs CPU code; "
                                f"compile with --target cpu,cuda")
        compiled = None  # the runtime picks the variant this CPU runs, or refuses naming what each lacks
    else:
        check_runnable(cpu)
        compiled = compile_model(model, shapes=shapes, bind=bind, cpu=cpu, donate=donate, infer_donation=infer_donation)
        artifact_bytes, manifest = compiled.artifact, compiled.manifest
    specs = manifest_specs(manifest["inputs"])
    is_onnx = model.suffix not in (".mlir", ".stablehlo")
    bounds = index_bounds(_load_onnx(model)) if is_onnx else {}
    feeds, how = seeded_inputs(specs, seed, bounds)
    for name, array in (inputs or {}).items():
        if name not in feeds:
            raise ModelError(f"--input '{name}': the model's inputs are {', '.join(repr(n) for n, _, _ in specs)}")
        given = np.asarray(array)
        if given.shape != feeds[name].shape or given.dtype != feeds[name].dtype:
            raise ModelError(f"--input '{name}': expected {feeds[name].dtype}{list(feeds[name].shape)}, "
                             f"got {given.dtype}{list(given.shape)}")
        feeds[name], how[name] = given, "given"
    with Session(artifact_bytes, threads=threads) as session:
        got = session.run(None, feeds)
        if len(manifest["cpu"]) > 1 or artifact is not None:  # the variant that ran
            cpu = session.cpu_variant or manifest["cpu"][0].get("cpu", cpu)
    reference_feeds = {**feeds, **{k: np.asarray(v) for k, v in bind.items()}}
    want = onnxruntime_outputs(model, reference_feeds) if is_onnx else None
    reference = "onnxruntime"
    if want is None:
        graph, _, _ = import_model(model, shapes, bind)
        want = _interpreter_outputs(graph, feeds)
        reference = "reference interpreter"
    outputs = []
    for spec, g, w in zip(manifest["outputs"], got, want):
        max_abs, max_rel, problem = compare_arrays(np.asarray(g), np.asarray(w), atol, rtol)
        outputs.append(OutputReport(spec["name"], list(spec["shape"]), max_abs, max_rel, not problem, problem))
    report = VerifyReport(str(model), reference, cpu, atol, rtol, how, outputs)
    if not report.ok:
        if compiled is None or compiled.artifact != artifact_bytes or len(manifest["cpu"]) > 1:
            # the plan, for bisection, with the code of the one variant that ran
            compiled = compile_model(model, shapes=shapes, bind=bind, cpu=cpu, donate=donate,
                                     infer_donation=infer_donation)
        report.divergence = bisect(model, shapes, bind, compiled, feeds, want, atol, rtol, cpu)
    return report


def read_artifact_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise ArtifactError(f"cannot read artifact '{path}': {err.strerror or err}") from None


def _load_onnx(model: Path) -> Any:
    from aot.importers.onnx import load_model

    return load_model(model)


def bisect(model: Path, shapes: Any, bind: Any, compiled: Any, feeds: Mapping[str, np.ndarray],
           want: list[np.ndarray], atol: float, rtol: float, cpu: str) -> Divergence | None:
    """Where the mismatch starts: a pass whose graph no longer means the model, else the
    first kernel whose result differs from the interpreter's."""
    from aot.interpreter import interpret_values

    plan = compiled.plan
    graph_feeds = _by_value_name(plan.graph, feeds)
    values = interpret_values(plan.graph, graph_feeds)
    for value, w in zip(plan.graph.outputs, want):
        if compare_arrays(np.asarray(values[value.name]), np.asarray(w), atol, rtol)[2]:
            return _bisect_passes(model, shapes, bind, feeds, want, atol, rtol, cpu)
    return _bisect_kernels(compiled, graph_feeds, values, atol, rtol)


def _bisect_passes(model: Path, shapes: Any, bind: Any, feeds: Mapping[str, np.ndarray], want: list[np.ndarray],
                   atol: float, rtol: float, cpu: str) -> Divergence:
    from aot.codegen.cpu.targets import plan_lanes, resolve_cpu_targets
    from aot.driver import import_model
    from aot.pipeline import default_passes

    graph, _, _ = import_model(model, shapes, bind)

    def differs() -> str:
        for got, w, name in zip(_interpreter_outputs(graph, feeds), want, graph.output_names):
            problem = compare_arrays(np.asarray(got), np.asarray(w), atol, rtol)[2]
            if problem:
                return f"output '{name}': {problem}"
        return ""

    problem = differs()
    if problem:
        return Divergence("import", "the importer", f"the imported graph already differs from the reference: {problem}")
    from aot.ir.verifier import verify_graph
    from aot.pipeline import MAX_ROUNDS, import_cleanup

    # as run_pipeline does: what the importer left dead goes once, before the rounds
    for p in import_cleanup():
        if p.run(graph):
            verify_graph(graph)
            problem = differs()
            if problem:
                return Divergence("pass", p.name, f"after import: after this pass the graph differs from the "
                                                  f"reference: {problem}")
    passes = default_passes(plan_lanes(resolve_cpu_targets(cpu)), pad_stems=True)
    for round_index in range(MAX_ROUNDS):
        changed_any = False
        for p in passes:
            if not p.run(graph):
                continue
            changed_any = True
            verify_graph(graph)
            problem = differs()
            if problem:
                return Divergence("pass", p.name, f"round {round_index + 1}: after this pass the graph differs "
                                                  f"from the reference: {problem}")
        if not changed_any:
            break
    return Divergence("pass", "none found", "every pass keeps the interpreter's result; the optimized graph the "
                                            "compile made differs only when interpreted whole (report this)")


def _bisect_kernels(compiled: Any, graph_feeds: Mapping[str, np.ndarray], values: Mapping[str, np.ndarray],
                    atol: float, rtol: float) -> Divergence | None:
    from aot.kernel_runner import load_code

    plan = compiled.plan
    ordered = [graph_feeds[v.name] for v in plan.graph.inputs]
    code = load_code(compiled.artifact, ordered)
    for index, kernel in enumerate(plan.kernels):
        code.run_kernel(index)
        where = plan.slices[kernel.root.name]
        dtype = kernel.root.type.dtype.to_numpy()
        got = code.read(where.kind, where.index, where.offset, where.size, np.dtype(dtype), kernel.root.type.shape)
        problem = compare_arrays(got, np.asarray(values[kernel.root.name]), atol, rtol)[2]
        if problem:
            locs = list(dict.fromkeys(n.loc for n in kernel.nodes if n.loc and n.op != "constant"))
            fusion = [f"%{kernel.root.name}: {kernel.reason}"] + [f"%{name}: {why}" for name, why in kernel.fused_reasons.items()]
            return Divergence("kernel", kernel.name, f"its result %{kernel.root.name} differs from the reference "
                                                     f"interpreter: {problem}", locs, kernel.ops, fusion)
    return Divergence("kernel", "none found", "each kernel run alone on one thread matches the interpreter: the "
                                              "mismatch needs the thread pool or the runtime (try --threads 1)")


# == text ================================================================================
def format_report(report: VerifyReport) -> str:
    lines = [f"aot verify {report.model}: cpu {report.cpu}, reference {report.reference}, "
             f"atol {report.atol:g}, rtol {report.rtol:g}"]
    for name, how in report.inputs.items():
        lines.append(f"  input  {name}: {how}")
    width = max([len(o.name) for o in report.outputs] + [6])
    lines.append(f"  {'output':<{width}}  {'shape':<18} {'max abs err':>12} {'max rel err':>12}  status")
    for o in report.outputs:
        lines.append(f"  {o.name:<{width}}  {str(o.shape):<18} {o.max_abs:12.3g} {o.max_rel:12.3g}  {'ok' if o.ok else 'MISMATCH'}")
    if report.ok:
        lines.append(f"PASS: {len(report.outputs)} output(s) match {report.reference}")
        return "\n".join(lines)
    for o in report.outputs:
        if not o.ok:
            lines.append(f"FAIL: output '{o.name}': {o.problem}")
    d = report.divergence
    if d is not None:
        if d.stage == "kernel" and d.name != "none found":
            lines.append(f"first divergence: kernel {d.name} ({'+'.join(d.ops)}): {d.detail}")
            lines.append(f"  source nodes: {', '.join(d.source_nodes) or '(none recorded)'}")
            lines.extend(f"  fusion: {why}" for why in d.fusion)
        elif d.stage in ("pass", "import") and d.name != "none found":
            lines.append(f"first divergence: {'pass ' + d.name if d.stage == 'pass' else d.name}: {d.detail}")
        else:
            lines.append(f"first divergence: not found: {d.detail}")
    return "\n".join(lines)


def check_runnable(cpu: str) -> None:
    """Raise unless this machine runs code built for `cpu` (for a list of variants, one of them)."""
    from aot.codegen.cpu import CpuTarget
    from aot.codegen.cpu.targets import resolve_cpu_targets

    if cpu in ("native", "host"):
        return
    host = CpuTarget.host()
    if not any(target == host or target.runs_on(host) for target in resolve_cpu_targets(cpu)):
        raise RunError(f"this machine ({host.cpu}) cannot run code built for {cpu}: verify it where it runs")
