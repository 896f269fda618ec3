"""Compile a FuzzCase with aot, run it, and compare every output with onnxruntime.

onnxruntime runs with its graph optimizations off, so the reference is the
graph as written. A case fails when aot's compile raises (the generator only
writes ops aot lowers, so any error is a finding), when the run raises, or when
an output differs beyond |got - want| <= ATOL * max(1, max|want|) + RTOL * |want|.

A GPU case (FuzzCase.gpu) takes the plan of a GPU-only compile (the same pipeline,
default packing width), runs its GPU kernels emulated on the host (nvptx/emulate.py,
with the case's matmul precision) instead of the CPU artifact, and compares them with
the same tolerances; where tf32 put a dot on tensor cores (a kernel got the mma_tf32
body), with TF32_RTOL and TF32_ATOL instead. Its PTX for one SM, chosen by the seed,
also goes through ptxas where installed: a rejection is a "ptxas_error".
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass

import numpy as np

from aot.fuzz.generate import FuzzCase

RTOL = 1e-3
ATOL = 1e-4
# tf32 rounds each dot input to 11 significant bits: a product is off by up to 2^-10 of
# itself, and a sum of K of them by about 2^-11 sqrt(K) of its scale for random signs;
# later ops carry that on, so the bound is loose: it catches wrong elements, not ulps
TF32_RTOL = 1e-2
TF32_ATOL = 1e-2
GPU_SMS = ("sm_80", "sm_90")

# what a finding is; "reference_error" (onnxruntime rejects the graph) is a generator bug
FAILURES = ("compile_error", "ptxas_error", "run_error", "mismatch")


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


def compare(got: np.ndarray, want: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> str:
    """"" when `got` matches `want`, else what differs and where: aot verify's comparison
    with the absolute tolerance scaled to the output's magnitude."""
    from aot.verify import compare_arrays

    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, onnxruntime {want.dtype}"
    finite = np.abs(want[np.isfinite(want)]) if want.dtype.kind == "f" else np.abs(want)
    scale = max(1.0, float(finite.max(initial=0.0)))
    problem = compare_arrays(got, want, atol * scale, rtol)[2]
    return f"{problem} (scale {scale:.3g})" if problem else ""


def _compile_error(err: Exception) -> Outcome:
    from aot.errors import AotError

    if isinstance(err, AotError):
        return Outcome("compile_error", f"{type(err).__name__}: {err}")
    frames = "".join(traceback.format_exception(err)[-3:])  # a crash in the compiler: its last frames
    return Outcome("compile_error", f"{type(err).__name__}: {err}\n{frames}")


def check_case(case: FuzzCase) -> Outcome:
    try:
        want = reference_outputs(case)
    except Exception as err:  # onnxruntime rejected the graph: the generator's fault, not aot's
        return Outcome("reference_error", f"{type(err).__name__}: {err}")
    result = _run_gpu(case) if case.gpu else _run_cpu(case)
    if isinstance(result, Outcome):
        return result
    got, rtol, atol = result
    names = [o.name for o in case.model.graph.output]
    for name, g, w in zip(names, got, want):
        problem = compare(g, w, rtol, atol)
        if problem:
            return Outcome("mismatch", f"output '{name}': {problem}")
    return Outcome("ok")


def _run_cpu(case: FuzzCase) -> Outcome | tuple[list[np.ndarray], float, float]:
    try:
        from aot.driver import compile_model

        artifact = compile_model(case.model, cpu=case.cpu).artifact
    except Exception as err:
        return _compile_error(err)
    try:
        from aot.runtime.session import Session

        return Session(artifact, threads=case.threads).run(None, case.feeds()), RTOL, ATOL
    except Exception as err:
        return Outcome("run_error", f"{type(err).__name__}: {err}")


def _run_gpu(case: FuzzCase) -> Outcome | tuple[list[np.ndarray], float, float]:
    """The case's outputs from the plan's GPU kernels, emulated; its PTX through ptxas."""
    try:
        from aot.codegen.nvptx import NvptxTarget, emit_gpu
        from aot.codegen.nvptx.emulate import EmulatedKernels
        from aot.driver import import_model
        from aot.pipeline import run_pipeline

        plan = run_pipeline(import_model(case.model)[0])
        kernels = EmulatedKernels(plan, case.gpu)
        target = NvptxTarget(GPU_SMS[case.seed % len(GPU_SMS)], case.gpu)
        ptx = emit_gpu(plan, target).ptx
    except Exception as err:
        return _compile_error(err)
    from aot.codegen.nvptx.ptxas import assemble, ptxas_path

    if ptxas_path() is not None:
        try:
            assemble(ptx, target.sm)
        except Exception as err:
            return Outcome("ptxas_error", f"{type(err).__name__}: {err}"[:4000])
    try:
        feeds = case.feeds()
        got = kernels.run([feeds[name] for name in plan.graph.input_names])
    except Exception as err:
        return Outcome("run_error", f"{type(err).__name__}: {err}")
    if any(k.body == "mma_tf32" for k in kernels.kernels):
        return got, TF32_RTOL, TF32_ATOL
    return got, RTOL, ATOL
