"""The GPU matrix-multiply bodies (aot/codegen/nvptx/gemm.py): packed_dot (constant weight) and
plain dot (two run-time operands) kernels, with their fused epilogues, emulated on the host
against onnxruntime; the kernel got the expected body; ptxas assembles it for sm_80 and sm_90
with no spills and at most 128 registers a thread."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import NvptxTarget, emit_gpu, gemm
from gpu_util import assembles_for_every_sm, emulated_matches_onnxruntime
from onnx_util import make_model, vinfo

F = TensorProto.FLOAT
MAX_REGISTERS = 128
CONTRACTIONS = ("dot", "packed_dot")


def _weight(rng, name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)


def _matmul(rng, x_shape, w_shape, epilogue=()):
    """y = epilogue(x @ w) with w a constant; `epilogue` names: bias, relu, gelu, residual."""
    out_shape = (*x_shape[:-1], w_shape[-1])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["t0"])]
    inits = [_weight(rng, "w", w_shape)]
    inputs = [vinfo("x", F, x_shape)]
    last = "t0"
    for i, step in enumerate(epilogue, 1):
        out = f"t{i}"
        if step == "bias":
            inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[-1]).astype(np.float32), "bias"))
            nodes.append(helper.make_node("Add", [last, "bias"], [out]))
        elif step == "relu":
            nodes.append(helper.make_node("Relu", [last], [out]))
        elif step == "gelu":  # 0.5 x (1 + erf(x / sqrt 2)), as exporters write it before opset 20
            inits += [numpy_helper.from_array(np.array(v, np.float32), n)
                      for v, n in ((np.sqrt(2.0), "sqrt2"), (1.0, "one"), (0.5, "half"))]
            nodes += [helper.make_node("Div", [last, "sqrt2"], [f"{out}d"]), helper.make_node("Erf", [f"{out}d"], [f"{out}e"]),
                      helper.make_node("Add", [f"{out}e", "one"], [f"{out}a"]), helper.make_node("Mul", [last, f"{out}a"], [f"{out}m"]),
                      helper.make_node("Mul", [f"{out}m", "half"], [out])]
        elif step == "residual":
            inputs.append(vinfo("res", F, out_shape))
            nodes.append(helper.make_node("Add", [last, "res"], [out]))
        last = out
    nodes[-1].output[0] = "y"
    model = make_model(nodes, inputs, [vinfo("y", F, out_shape)], inits)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if "residual" in epilogue:
        feeds["res"] = rng.standard_normal(out_shape).astype(np.float32)
    return model, feeds


def _contraction_bodies(plan):
    """The GPU body of each kernel holding a contraction."""
    kernels = emit_gpu(plan, NvptxTarget("sm_90")).kernels
    return [gk.body for k, gk in zip(plan.kernels, kernels) if set(CONTRACTIONS) & set(k.ops)]


def _check_assembly(plan):
    for sm, report in assembles_for_every_sm(plan).items():
        for symbol, info in report.items():
            assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0, (sm, symbol, info)
            assert info.registers <= MAX_REGISTERS, (sm, symbol, info)


@pytest.mark.parametrize("x_shape, w_shape, body", [
    ((1, 768), (768, 3072), "gemv"),  # a decode step's MLP: split-K, each weight read once
    ((7, 33), (33, 65), "gemv"),  # tails everywhere: K, N and the packed lanes
    ((2, 5, 64), (64, 100), "gemv"),  # leading dims merge into M = 10
    ((2, 37, 64), (64, 100), "gemm"),  # M = 74 and N = 100: tails of the tiles
    ((130, 40), (40, 70), "gemm"),  # K not a multiple of BK
])
def test_matmul_with_constant_weight(rng, x_shape, w_shape, body):
    model, feeds = _matmul(rng, x_shape, w_shape)
    plan = emulated_matches_onnxruntime(model, feeds, rtol=1e-4, atol=1e-4)
    assert _contraction_bodies(plan) == [body]
    _check_assembly(plan)


@pytest.mark.parametrize("x_shape, w_shape, tile", [
    ((1536, 8), (8, 704), gemm.LARGE),  # 12 x 11 tiles of 128 x 64 fill 132 SMs
    ((768, 16), (16, 704), gemm.MEDIUM),  # 128-row tiles would leave half the SMs idle
    ((130, 40), (40, 70), gemm.SMALL),  # few tiles whatever their size: the most blocks
])
def test_tile_is_the_largest_that_fills_the_gpu(rng, x_shape, w_shape, tile):
    model, feeds = _matmul(rng, x_shape, w_shape, ("bias", "gelu"))
    plan = emulated_matches_onnxruntime(model, feeds, rtol=1e-4, atol=1e-4)
    (kernel,) = plan.kernels
    problem = gemm.Problem.of(kernel)
    assert problem is not None and gemm._tile_of(problem) == tile
    assert _contraction_bodies(plan) == ["gemm"]
    _check_assembly(plan)


@pytest.mark.parametrize("epilogue", [("bias", "relu"), ("bias", "gelu"), ("bias", "residual")])
@pytest.mark.parametrize("x_shape, body", [((3, 48), "gemv"), ((70, 48), "gemm")])
def test_fused_epilogue(rng, epilogue, x_shape, body):
    model, feeds = _matmul(rng, x_shape, (48, 40), epilogue)
    plan = emulated_matches_onnxruntime(model, feeds, rtol=1e-4, atol=1e-4)
    assert _contraction_bodies(plan) == [body]
    assert len(plan.kernels) == 1  # the epilogue is fused, not a kernel of its own
    _check_assembly(plan)


@pytest.mark.parametrize("rows, body", [(4, "gemv"), (20, "gemm")])
def test_gemm_trans_b_with_bias(rng, rows, body):
    b = numpy_helper.from_array(rng.standard_normal((40, 48)).astype(np.float32), "b")
    c = numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "c")
    model = make_model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
                       [vinfo("a", F, (rows, 48))], [vinfo("y", F, (rows, 40))], [b, c])
    plan = emulated_matches_onnxruntime(model, {"a": rng.standard_normal((rows, 48)).astype(np.float32)},
                                        rtol=1e-4, atol=1e-4)
    assert _contraction_bodies(plan) == [body]
    _check_assembly(plan)


@pytest.mark.parametrize("q_shape, k_shape, transposed, body", [
    ((2, 4, 16, 8), (2, 4, 8, 16), False, "gemv"),  # P.V-like, 16 rows a head
    ((2, 4, 16, 8), (2, 4, 16, 8), True, "gemv"),  # Q.K^T: rhs contiguous along K
    ((2, 4, 1, 32), (2, 4, 19, 32), True, "gemv"),  # one query against a 19-token cache
    ((2, 3, 24, 8), (2, 3, 8, 20), False, "gemm"),
    ((2, 3, 33, 8), (2, 3, 40, 8), True, "gemm"),
])
def test_batched_matmul_of_two_inputs(rng, q_shape, k_shape, transposed, body):
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])] if transposed else []
    nodes.append(helper.make_node("MatMul", ["q", "kt" if transposed else "k"], ["s"]))
    nodes.append(helper.make_node("Mul", ["s", "scale"], ["y"]))  # attention's 1/sqrt(d), fused
    out_shape = (*q_shape[:-1], k_shape[-2] if transposed else k_shape[-1])
    scale = numpy_helper.from_array(np.array(0.125, np.float32), "scale")
    model = make_model(nodes, [vinfo("q", F, q_shape), vinfo("k", F, k_shape)], [vinfo("y", F, out_shape)], [scale])
    feeds = {"q": rng.standard_normal(q_shape).astype(np.float32), "k": rng.standard_normal(k_shape).astype(np.float32)}
    plan = emulated_matches_onnxruntime(model, feeds, rtol=1e-4, atol=1e-4)
    assert _contraction_bodies(plan) == [body]
    _check_assembly(plan)


@pytest.mark.parametrize("rows, body", [(3, "gemv"), (40, "gemm")])
def test_several_contracting_dims(rng, rows, body):
    """y[m, n] = sum over (i, j) of x[i, m, j] w[i, j, n]: two contracting dims, one in front of M."""
    x = rng.standard_normal((3, rows, 5)).astype(np.float32)
    w = rng.standard_normal((3, 5, 17)).astype(np.float32)
    model = make_model([helper.make_node("Einsum", ["x", "w"], ["y"], equation="imj,ijn->mn")],
                       [vinfo("x", F, x.shape), vinfo("w", F, w.shape)], [vinfo("y", F, (rows, 17))])
    plan = emulated_matches_onnxruntime(model, {"x": x, "w": w}, rtol=1e-4, atol=1e-4)
    assert _contraction_bodies(plan) == [body]
    _check_assembly(plan)


def test_declines_half_precision(rng):
    """f16 contractions are not these bodies' (their accumulation is f32 by design): the tensor-core
    body (nvptx/mma.py) takes them."""
    w = numpy_helper.from_array(rng.standard_normal((24, 40)).astype(np.float16), "w")
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vinfo("x", TensorProto.FLOAT16, (20, 24))],
                       [vinfo("y", TensorProto.FLOAT16, (20, 40))], [w])
    plan = emulated_matches_onnxruntime(model, {"x": rng.standard_normal((20, 24)).astype(np.float16)},
                                        rtol=1e-2, atol=1e-2)
    assert _contraction_bodies(plan) == ["mma"]

