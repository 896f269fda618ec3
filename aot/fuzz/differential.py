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
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(case.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, case.feeds())


def compare(got: np.ndarray, want: np.ndarray) -> str:
    """"" when `got` matches `want`, else what differs and where."""
    if got.shape != want.shape:
        return f"shape {got.shape}, onnxruntime {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, onnxruntime {want.dtype}"
    if got.size == 0:
        return ""
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    nan_differs = np.isnan(got64) != np.isnan(want64)
    if nan_differs.any():
        at = tuple(int(i) for i in np.argwhere(nan_differs)[0])
        return f"NaN at {at}: got {got[at]}, onnxruntime {want[at]}"
    finite = np.isfinite(want64) & np.isfinite(got64)
    if (got64[~finite] != want64[~finite]).any():
        at = tuple(int(i) for i in np.argwhere(~finite & (got64 != want64))[0])
        return f"inf at {at}: got {got[at]}, onnxruntime {want[at]}"
    scale = max(1.0, float(np.abs(want64[finite]).max(initial=0.0)))
    error = np.where(finite, np.abs(got64 - want64), 0.0)
    bound = ATOL * scale + RTOL * np.abs(np.where(finite, want64, 0.0))
    if (error <= bound).all():
        return ""
    at = tuple(int(i) for i in np.unravel_index(int(np.argmax(error - bound)), error.shape))
    return f"max error {error.max():.3g} (scale {scale:.3g}) at {at}: got {got[at]}, onnxruntime {want[at]}"


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
        from aot.runtime import Session

        got = Session(artifact, threads=case.threads).run(None, case.feeds())
    except Exception as err:
        return Outcome("run_error", f"{type(err).__name__}: {err}")
    names = [o.name for o in case.model.graph.output]
    for name, g, w in zip(names, got, want):
        problem = compare(g, w)
        if problem:
            return Outcome("mismatch", f"output '{name}': {problem}")
    return Outcome("ok")
