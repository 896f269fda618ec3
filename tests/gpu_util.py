"""GPU kernel checks without a GPU: a model's plan, its kernels emulated on the host
(aot/codegen/nvptx/emulate.py) against onnxruntime, and its PTX through ptxas where installed."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort

from aot.codegen.nvptx import assemble, emit_gpu, NvptxTarget, ptxas_path
from aot.codegen.nvptx.emulate import emulate
from aot.importers.onnx import import_onnx
from aot.pipeline import run_pipeline

SMS = ("sm_80", "sm_90")


def gpu_plan(model):
    return run_pipeline(import_onnx(model))


def emulated_matches_onnxruntime(model, feeds: dict[str, np.ndarray], rtol=1e-5, atol=1e-5, plan=None):
    """Emulate the plan's GPU kernels on `feeds` and compare every output with onnxruntime's;
    returns the plan (for tests that look at its GPU kernels)."""
    plan = plan or gpu_plan(model)
    ours = emulate(plan, [feeds[name] for name in plan.graph.input_names])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, feeds)
    assert len(ours) == len(theirs)
    for name, mine, ref in zip(plan.graph.output_names, ours, theirs):
        assert mine.shape == ref.shape and mine.dtype == ref.dtype, (name, mine.shape, mine.dtype, ref.shape, ref.dtype)
        if ref.dtype.kind in "fc":
            np.testing.assert_allclose(mine, ref, rtol=rtol, atol=atol, err_msg=f"output {name}")
        else:
            np.testing.assert_array_equal(mine, ref, err_msg=f"output {name}")
    return plan


def assembles_for_every_sm(plan) -> dict:
    """ptxas's report per SM ({} where ptxas is not installed); fails on any rejected PTX."""
    if ptxas_path() is None:
        return {}
    reports = {}
    for sm in SMS:
        code = emit_gpu(plan, NvptxTarget(sm))
        reports[sm] = assemble(code.ptx, sm)
        assert sorted(reports[sm]) == sorted(k.symbol for k in code.kernels)
    return reports
