"""The ONNX backend test suite through aot, beside onnxruntime on the same cases.

    python benchmarks/onnx_suite.py                       # every case: node, light, pytorch-*
    python benchmarks/onnx_suite.py -k gather -k scatter  # names containing any of these
    python benchmarks/onnx_suite.py --suite node -j 2 --table out.tsv

Each case is compiled with aot (compile_model, with --shape-style shapes
for inputs whose dims the model leaves symbolic), run through the C runtime
(aot.Session) and compared with the case's expected outputs at the case's
own rtol/atol (bfloat16 outputs at two bf16 ulps, as onnx's runner does).
onnxruntime runs the same inputs in the same worker.

Statuses: passed; failed (ran, wrong numbers, shape or dtype); rejected
(refused at compile time with an aot error: unsupported op, dtype or
attribute, or a model aot deems malformed); crashed (anything else: an
internal error, a runtime error, a dead worker, a timeout). A crash is a
bug and can never be an expected failure (expected_failures.py).

Cases run in worker processes (fork), so a segfault in generated code or in
the runtime kills only its worker: the case is recorded as crashed and a
fresh worker takes the next one. The totals are printed last.
"""
from __future__ import annotations

import argparse
import glob
import multiprocessing
import multiprocessing.connection
import os
import re
import sys
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))

from expected_failures import expected_reason, unmatched  # noqa: E402

SUITES = ("node", "light", "pytorch-converted", "pytorch-operator")
DATA_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data"

# onnx's own list: (case name, file stem, rtol, atol); inputs are arange(n)/n in the input's shape
LIGHT_MODELS = (
    ("test_bvlc_alexnet", "bvlc_alexnet", 1e-3, 1e-7),
    ("test_densenet121", "densenet121", 2e-3, 1e-7),
    ("test_inception_v1", "inception_v1", 1e-3, 1e-7),
    ("test_inception_v2", "inception_v2", 1e-3, 1e-7),
    ("test_resnet50", "resnet50", 1e-3, 1e-7),
    ("test_shufflenet", "shufflenet", 1e-3, 1e-7),
    ("test_squeezenet", "squeezenet", 1e-3, 1e-7),
    ("test_vgg19", "vgg19", 1e-3, 1e-7),
    ("test_zfnet512", "zfnet512", 1e-3, 1e-7),
)


@dataclass
class Case:
    name: str
    suite: str
    model: onnx.ModelProto
    data_sets: list[tuple[list[Any], list[Any]]]
    rtol: float
    atol: float


@dataclass
class Result:
    name: str
    suite: str
    status: str  # passed | failed | rejected | crashed
    reason: str = ""
    compile_s: float = 0.0
    ort_status: str = ""
    ort_reason: str = ""
    expected: str = ""  # reason from expected_failures, "" if the case must pass
    extra: dict[str, Any] = field(default_factory=dict)


# -- loading cases ------------------------------------------------------------------
def _load_node_cases() -> list[Case]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        tests = load_model_tests(kind="node")
    return [Case(t.name, "node", t.model, list(t.data_sets), t.rtol, t.atol) for t in tests]


def _load_dir_cases(kind: str) -> list[Case]:
    from onnx.backend.test.loader import load_model_tests

    cases = []
    for t in load_model_tests(kind=kind):
        model = onnx.load(os.path.join(t.model_dir, "model.onnx"))
        data_sets = []
        for folder in sorted(glob.glob(os.path.join(t.model_dir, "test_data_set*"))):
            inputs = [_read_pb(p) for p in _numbered(folder, "input")]
            outputs = [_read_pb(p) for p in _numbered(folder, "output")]
            data_sets.append((inputs, outputs))
        cases.append(Case(t.name, kind, model, data_sets, t.rtol, t.atol))
    return cases


def _numbered(folder: str, prefix: str) -> list[str]:
    count = len(glob.glob(os.path.join(folder, f"{prefix}_*.pb")))
    return [os.path.join(folder, f"{prefix}_{i}.pb") for i in range(count)]


def _read_pb(path: str) -> np.ndarray:
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def _load_light_cases() -> list[Case]:
    cases = []
    for name, stem, rtol, atol in LIGHT_MODELS:
        model = onnx.load(str(DATA_DIR / "light" / f"light_{stem}.onnx"))
        inits = {i.name for i in model.graph.initializer}
        inputs = []
        for vi in model.graph.input:
            if vi.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        outputs = [_read_pb(str(DATA_DIR / "light" / f"light_{stem}_output_{i}.pb")) for i in range(len(model.graph.output))]
        cases.append(Case(name, "light", model, [(inputs, outputs)], rtol, atol))
    return cases


def load_cases(suites: Sequence[str] = SUITES, filters: Sequence[str] = ()) -> list[Case]:
    """Cases of `suites` whose names contain any of `filters` (all when none)."""
    loaders: dict[str, Callable[[], list[Case]]] = {
        "node": _load_node_cases,
        "light": _load_light_cases,
        "pytorch-converted": lambda: _load_dir_cases("pytorch-converted"),
        "pytorch-operator": lambda: _load_dir_cases("pytorch-operator"),
    }
    cases: list[Case] = []
    for suite in suites:
        cases.extend(loaders[suite]())
    if filters:
        cases = [c for c in cases if any(f in c.name for f in filters)]
    return cases


# -- running one case ---------------------------------------------------------------
def _as_array(x: Any) -> Any:
    """Case data as arrays: TensorProtos and numpy scalars become arrays; sequences stay lists."""
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def symbolic_shapes(model: onnx.ModelProto, inputs: Sequence[Any]) -> dict[str, tuple[int, ...]]:
    """--shape for each input whose model dims are not all fixed, taken from the feed."""
    shapes = {}
    for vi, value in zip(_real_inputs(model), inputs):
        if not isinstance(value, np.ndarray) or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        fixed = tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
        if not fixed:
            shapes[vi.name] = tuple(int(d) for d in value.shape)
    return shapes


def compare_outputs(outputs: Sequence[Any], expected: Sequence[Any], rtol: float, atol: float) -> str:
    """"" when `outputs` match `expected` as onnx's backend runner judges, else why not."""
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        if not isinstance(ref, np.ndarray) or not isinstance(out, np.ndarray):
            return f"output {i}: expected a {type(ref).__name__}, got {type(out).__name__}"
        if out.shape != ref.shape:
            return f"output {i}: shape {list(out.shape)}, expected {list(ref.shape)}"
        if out.dtype != ref.dtype:
            return f"output {i}: dtype {out.dtype}, expected {ref.dtype}"
        out_rtol = rtol
        if out.dtype.name == "bfloat16":
            out_rtol = max(rtol, 2**-6)  # two bfloat16 ulps
            out, ref = out.astype(np.float32), ref.astype(np.float32)
        if ref.dtype == object:
            if not np.array_equal(out, ref):
                return f"output {i}: values differ"
            continue
        try:
            np.testing.assert_allclose(out, ref, rtol=out_rtol, atol=atol)
        except AssertionError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip().startswith(("Mismatched", "Max abs"))]
            return f"output {i}: " + "; ".join(lines)
    return ""


def run_aot(case: Case) -> Result:
    from aot.driver import compile_model
    from aot.errors import CodegenError, ModelError, UnsupportedError
    from aot.runtime.session import Session

    result = Result(case.name, case.suite, "passed")
    first_inputs = [_as_array(x) for x in case.data_sets[0][0]] if case.data_sets else []
    model = case.model
    frozen: dict[str, np.ndarray] = {}
    start = time.perf_counter()
    try:
        try:
            compiled = compile_model(model, shapes=symbolic_shapes(model, first_inputs) or None)
        except UnsupportedError as err:
            frozen = freeze_int_inputs(case, str(err))
            if not frozen:
                raise
            # what `aot-compile --bind NAME=value.npy` does for a user
            compiled = compile_model(model, shapes=symbolic_shapes(model, first_inputs) or None, bind=frozen)
            result.extra["frozen"] = sorted(frozen)
    except (UnsupportedError, ModelError, CodegenError) as err:
        result.compile_s = time.perf_counter() - start
        result.status, result.reason = "rejected", f"{type(err).__name__}: {_one_line(err)}"
        return result
    except Exception as err:  # a compiler bug: report it, keep going
        result.compile_s = time.perf_counter() - start
        result.status, result.reason = "crashed", f"compile: {_last_frame(err)}"
        return result
    result.compile_s = time.perf_counter() - start
    try:
        session = Session(compiled.artifact)
        names = [vi.name for vi in _real_inputs(case.model)]
        for inputs, expected in case.data_sets:
            kept = [_as_array(x) for name, x in zip(names, inputs) if name not in frozen]
            feeds = {info.name: x for info, x in zip(session.get_inputs(), kept)}
            outputs = session.run(None, feeds)
            why = compare_outputs(outputs, [_as_array(e) for e in expected], case.rtol, case.atol)
            if why:
                result.status, result.reason = "failed", why
                return result
    except Exception as err:
        result.status, result.reason = "crashed", f"run: {_last_frame(err)}"
    return result


# Rejections that a value known at compile time cures: the node suite feeds axes, pads,
# shapes, ... as graph inputs, where exporters write constants.
NEEDS_CONSTANT = re.compile(r"must be (known at compile time|a constant)")


def freeze_int_inputs(case: Case, reason: str) -> dict[str, np.ndarray]:
    """Values to bind (`--bind`) for the small parameter inputs (ints; 1-D floats such as scales; 1-D bool masks; 0-d scalars).

    Only when the plain compile asked for a compile-time value, and only for
    inputs whose value is the same in every data set: the bound model is
    the one an exporter would have written with those operands constant.
    The table records which inputs were frozen.
    """
    if not NEEDS_CONSTANT.search(reason):
        return {}
    frozen: dict[str, np.ndarray] = {}
    for position, vi in enumerate(_real_inputs(case.model)):
        values = [_as_array(inputs[position]) for inputs, _ in case.data_sets]
        first = values[0]
        if not isinstance(first, np.ndarray):
            continue
        small_int = first.dtype in (np.int64, np.int32) and first.size <= 64
        # a float parameter (scales, roi) never comes first: the first input is the data
        small_float = position > 0 and first.dtype in (np.float32, np.float64) and first.ndim == 1 and first.size <= 16
        # a 1-D bool mask (Compress's condition) decides an output shape as axes do
        small_bool = position > 0 and first.dtype == np.bool_ and first.ndim == 1 and first.size <= 64
        # a 0-d value (Range's start/limit/delta, Loop's cond) is a parameter wherever it stands
        scalar = first.ndim == 0 and first.dtype.kind in "biuf"
        if not (small_int or small_float or small_bool or scalar):
            continue
        if any(not np.array_equal(v, first) for v in values[1:]):
            continue
        frozen[vi.name] = first
    return frozen


def run_ort(case: Case) -> tuple[str, str]:
    """onnxruntime on the same case: (status, reason), statuses as for aot."""
    import onnxruntime as ort

    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 4
        session = ort.InferenceSession(case.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as err:
        return "rejected", _one_line(err)
    try:
        names = [i.name for i in session.get_inputs()]
        for inputs, expected in case.data_sets:
            outputs = session.run(None, dict(zip(names, [_as_array(x) for x in inputs])))
            why = compare_outputs(outputs, [_as_array(e) for e in expected], case.rtol, case.atol)
            if why:
                return "failed", why
    except Exception as err:
        return "crashed", _one_line(err)
    return "passed", ""


def run_case(case: Case, with_ort: bool) -> Result:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_aot(case)
        if with_ort:
            result.ort_status, result.ort_reason = run_ort(case)
    result.expected = expected_reason(case.name) or ""
    return result


def _one_line(err: BaseException) -> str:
    text = str(err).strip().replace("\n", " | ")
    return text[:300]


def _last_frame(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(err).__name__}: {_one_line(err)}{where}"


# -- workers ------------------------------------------------------------------------
_CASES: list[Case] = []  # set before forking; workers index into it


def _worker(conn: multiprocessing.connection.Connection, with_ort: bool) -> None:
    while True:
        index = conn.recv()
        if index is None:
            return
        conn.send(asdict(run_case(_CASES[index], with_ort)))


def run_all(cases: list[Case], jobs: int, with_ort: bool, timeout_s: float,
            progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Every case in a worker process; a dead or hung worker marks its case crashed."""
    global _CASES
    _CASES = cases
    ctx = multiprocessing.get_context("fork")
    pending = list(range(len(cases)))[::-1]
    results: dict[int, Result] = {}
    workers: list[dict[str, Any]] = []

    def spawn() -> dict[str, Any]:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child, with_ort), daemon=True)
        proc.start()
        child.close()
        return {"proc": proc, "conn": parent, "case": None, "since": 0.0}

    def feed(w: dict[str, Any]) -> None:
        if pending:
            w["case"] = pending.pop()
            w["since"] = time.monotonic()
            w["conn"].send(w["case"])
        else:
            w["case"] = None

    def record(index: int, result: Result) -> None:
        results[index] = result
        if progress:
            progress(result)

    for _ in range(max(1, min(jobs, len(cases)))):
        w = spawn()
        workers.append(w)
        feed(w)
    while any(w["case"] is not None for w in workers):
        busy = [w for w in workers if w["case"] is not None]
        ready = multiprocessing.connection.wait([w["conn"] for w in busy] + [w["proc"].sentinel for w in busy], timeout=1.0)
        for w in busy:
            index = w["case"]
            died = w["proc"].sentinel in ready or not w["proc"].is_alive()
            if w["conn"] in ready:
                try:
                    record(index, Result(**w["conn"].recv()))
                    feed(w)
                    continue
                except (EOFError, OSError):
                    died = True
            hung = time.monotonic() - w["since"] > timeout_s
            if not (died or hung):
                continue
            case = cases[index]
            why = f"worker died (exit code {w['proc'].exitcode})" if died else f"timeout after {timeout_s:.0f} s"
            record(index, Result(case.name, case.suite, "crashed", why, expected=expected_reason(case.name) or ""))
            w["proc"].kill()
            w["proc"].join()
            w.update(spawn())
            feed(w)
    for w in workers:
        if w["proc"].is_alive():
            w["conn"].send(None)
            w["proc"].join(5)
    return [results[i] for i in range(len(cases))]


# -- reporting ----------------------------------------------------------------------
STATUSES = ("passed", "failed", "rejected", "crashed")


def totals(results: Iterable[Result], key: str = "status") -> Counter:
    return Counter(getattr(r, key) for r in results)


def unexpected(results: Sequence[Result]) -> list[str]:
    """Why the run disagrees with the expected-failure table (empty when it agrees)."""
    problems = []
    for r in results:
        if r.status == "crashed":
            problems.append(f"{r.name}: crashed ({r.reason})")
        elif r.status != "passed" and not r.expected:
            problems.append(f"{r.name}: {r.status} ({r.reason})")
        elif r.status == "passed" and r.expected:
            problems.append(f"{r.name}: passes but is listed as an expected failure ({r.expected})")
    return problems


def write_table(results: Sequence[Result], path: Path) -> None:
    with open(path, "w") as f:
        f.write("suite\tname\tstatus\treason\tcompile_s\tort_status\tort_reason\texpected\tfrozen\n")
        for r in results:
            frozen = ",".join(r.extra.get("frozen", []))
            cells = [r.suite, r.name, r.status, r.reason, f"{r.compile_s:.3f}", r.ort_status, r.ort_reason, r.expected, frozen]
            f.write("\t".join(c.replace("\t", " ") for c in cells) + "\n")


def _summary_line(label: str, counts: Counter, total: int) -> str:
    parts = ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)
    return f"{label:<22} {parts}  (of {total})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", "--filter", action="append", default=[], help="run cases whose name contains this (repeatable)")
    parser.add_argument("--suite", action="append", choices=SUITES, help="suites to run (repeatable; default all)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    parser.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case before it counts as crashed")
    parser.add_argument("--table", type=Path, help="write the per-case table (TSV) here")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case as it finishes")
    args = parser.parse_args(argv)

    cases = load_cases(args.suite or SUITES, args.filter)
    if not cases:
        print("no case matches", file=sys.stderr)
        return 2

    def progress(r: Result) -> None:
        if args.verbose or r.status == "crashed":
            print(f"{r.status:<8} {r.suite:<17} {r.name}  {r.reason}", flush=True)

    start = time.perf_counter()
    results = run_all(cases, args.jobs, not args.no_ort, args.timeout, progress)
    wall = time.perf_counter() - start
    if args.table:
        write_table(results, args.table)

    print("\nnot passing, by reason:")
    reasons = Counter((r.status, _reason_key(r.reason)) for r in results if r.status != "passed")
    for (status, reason), n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:5d}  {status:<8} {reason}")
    problems = unexpected(results)
    if not args.filter and set(args.suite or SUITES) == set(SUITES):  # every case ran: a key naming none is stale
        problems += [f"{key}: listed as an expected failure but names no case" for key in unmatched(r.name for r in results)]
    print(f"\ndisagreements with expected_failures.py: {len(problems)}")
    for p in problems:
        print(f"  {p}")
    compile_total = sum(r.compile_s for r in results)
    print(f"\ncompile time: {compile_total:.1f} s in total over {len(results)} cases "
          f"(max {max(r.compile_s for r in results):.1f} s); wall {wall:.1f} s with {args.jobs} worker(s)")
    frozen = [r for r in results if r.status == "passed" and r.extra.get("frozen")]
    print(f"{len(frozen)} of the passing cases compiled with parameter inputs (axes, pads, shapes, scales) frozen to their values")
    for suite in SUITES:
        mine = [r for r in results if r.suite == suite]
        if mine:
            print(_summary_line(f"aot {suite}", totals(mine), len(mine)))
            if not args.no_ort:
                print(_summary_line(f"onnxruntime {suite}", totals(mine, "ort_status"), len(mine)))
    return 1 if problems else 0


def _reason_key(reason: str) -> str:
    """A reason without node names and numbers, so that like failures group together."""
    text = re.sub(r"node '[^']*'", "node", reason)
    text = re.sub(r"'[^']*'", "'.'", text)
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:160]


if __name__ == "__main__":
    sys.exit(main())
