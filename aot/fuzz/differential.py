"""Compile a FuzzCase with aot, run it, and compare every output with onnxruntime.

onnxruntime runs with its graph optimizations off, so the reference is the
graph as written. A case fails when aot's compile raises (the generator only
writes ops aot lowers, so any error is a finding), when the run raises, or when
an output differs beyond |got - want| <= ATOL * max(1, max|want|) + RTOL * |want|.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass

import numpy as np

from aot.fuzz.generate import FuzzCase

RTOL = 1e-3
ATOL = 1e-4

# what a finding is; "reference_error" (onnxruntime rejects the graph) is a generator bug
FAILURES = ("compile_error", "run_error", "mismatch")


@dataclass(frozen=True)
class Outcome:
    kind: str  # "ok", "reference_error", or one of FAILURES
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES


def reference_outputs(case: FuzzCase) -> list[np.ndarray]:
    from aot.verify import onnxruntime_outputs

    outputs = onnxruntime_outputs(case.model, case.feeds())
    if outputs is None:
        raise RuntimeError("onnxruntime is not installed: the fuzzer has no reference")
    return outputs


def compare(got: np.ndarray, want: np.ndarray) -> str:
    """"" when `got` matches `want`, else what differs and where: aot verify's comparison
    with the absolute tolerance scaled to the output's magnitude."""
    from aot.verify import compare_arrays

    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, onnxruntime {want.dtype}"
    finite = np.abs(want[np.isfinite(want)]) if want.dtype.kind == "f" else np.abs(want)
    scale = max(1.0, float(finite.max(initial=0.0)))
    problem = compare_arrays(got, want, ATOL * scale, RTOL)[2]
    return f"{problem} (scale {scale:.3g})" if problem else ""


def check_case(case: FuzzCase) -> Outcome:
    from aot.errors import AotError

    try:
        want = reference_outputs(case)
    except Exception as err:  # onnxruntime rejected the graph: the generator's fault, not aot's
        return Outcome("reference_error", f"{type(err).__name__}: {err}")
    try:
        from aot.driver import compile_model

        artifact = compile_model(case.model, cpu=case.cpu).artifact
    except AotError as err:
        return Outcome("compile_error", f"{type(err).__name__}: {err}")
    except Exception as err:  # a crash in the compiler: keep the traceback's last frames
        frames = "".join(traceback.format_exception(err)[-3:])
        return Outcome("compile_error", f"{type(err).__name__}: {err}\n{frames}")
    try:
        from aot.runtime.session import Session

        got = Session(artifact, threads=case.threads).run(None, case.feeds())
    except Exception as err:
        return Outcome("run_error", f"{type(err).__name__}: {err}")
    names = [o.name for o in case.model.graph.output]
    for name, g, w in zip(names, got, want):
        problem = compare(g, w)
        if problem:
            return Outcome("mismatch", f"output '{name}': {problem}")
    return Outcome("ok")
