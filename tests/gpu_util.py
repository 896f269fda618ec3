"""GPU kernel checks without a GPU: a model's plan, its kernels emulated on the host
(aot/codegen/nvptx/emulate.py) against onnxruntime, and its PTX through ptxas where installed;
and, for the GPU packaging tests, a small model whose GPU launches read model inputs, packed
weights and the arena and write an output, one with run-time checks, and the marker for
tests that need ptxas."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import NvptxTarget, assemble, emit_gpu
from aot.codegen.nvptx.emulate import emulate
from aot.codegen.nvptx.ptxas import ptxas_path
from aot.importers.onnx import import_onnx
from aot.pipeline import run_pipeline
from onnx_util import make_model, vinfo

SMS = ("sm_80", "sm_90")
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA toolkit) is not on PATH")


def dense_softmax_model():
    """y = softmax(relu(x @ w + b)) * x2: a dot kernel (weights, arena out) and a row kernel."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["h"]), helper.make_node("Softmax", ["h"], ["s"], axis=-1),
             helper.make_node("Mul", ["s", "x2"], ["y"])]
    f = TensorProto.FLOAT
    return make_model(nodes, [vinfo("x", f, (4, 8)), vinfo("x2", f, (4, 16))], [vinfo("y", f, (4, 16))], [w, b])


def gather_check_model():
    """y = relu(t[i] + t[j]) over a 10-row table: two Gathers, each with a run-time check that
    its index input is in [-10, 10) (ir/ops/checks.py), so the plan has two checks."""
    t = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4) - 20, "t")
    nodes = [helper.make_node("Gather", ["t", "i"], ["g"], name="first"),
             helper.make_node("Gather", ["t", "j"], ["h"], name="second"),
             helper.make_node("Add", ["g", "h"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    i64 = TensorProto.INT64
    return make_model(nodes, [vinfo("i", i64, (3,)), vinfo("j", i64, (3,))], [vinfo("y", TensorProto.FLOAT, (3, 4))],
                      [t])


def feeds(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((4, 8)).astype(np.float32), "x2": rng.standard_normal((4, 16)).astype(np.float32)}


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
    """ptxas's report per SM of the plan's kernels ({} where ptxas is not installed); fails on
    any rejected PTX. The checks kernel, where the plan has checks, assembles too (its report
    is left out: tests/codegen/nvptx/test_gpu_checks.py looks at it)."""
    if ptxas_path() is None:
        return {}
    reports = {}
    for sm in SMS:
        code = emit_gpu(plan, NvptxTarget(sm))
        reports[sm] = assemble(code.ptx, sm)
        launches = [*code.kernels, *([code.checks] if code.checks else [])]
        assert sorted(reports[sm]) == sorted({k.symbol for k in launches})  # repeated code: one function
        reports[sm].pop(code.checks.symbol if code.checks else "", None)
    return reports


def assert_bodies_without_spills(plan, bodies: list[str]):
    """The plan's GPU kernels got `bodies`, in order, and ptxas spills none of them on any SM."""
    kernels = emit_gpu(plan, NvptxTarget("sm_90")).kernels
    assert [k.body for k in kernels] == bodies
    for sm, report in assembles_for_every_sm(plan).items():
        for kernel in kernels:
            info = report[kernel.symbol]
            assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0, (sm, kernel.body, info)


def repeated_layers(layers: int = 3):
    """`layers` MatMul + Relu + Softmax blocks of one shape, each with its own weight."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((32, 32)).astype(np.float32), f"w{i}") for i in range(layers)]
    nodes, x = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]), helper.make_node("Relu", [f"h{i}"], [f"r{i}"]),
                  helper.make_node("Softmax", [f"r{i}"], [f"s{i}"])]
        x = f"s{i}"
    return make_model(nodes, [vinfo("x", TensorProto.FLOAT, (8, 32))], [vinfo(x, TensorProto.FLOAT, (8, 32))], inits)
