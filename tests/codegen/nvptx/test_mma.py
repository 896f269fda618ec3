"""Tensor-core matrix multiplies (aot/codegen/nvptx/simt.py Simt.mma, aot/codegen/nvptx/mma.py).

The Simt primitive alone: a hand-built two-warp kernel that loads each lane's fragments by the
fragment layouts, runs one mma per warp and stores D, emulated against numpy for f16, bf16 and
tf32, and through ptxas; the layouts themselves against the PTX ISA's formulas. Then the mma
GEMM body on models, emulated against onnxruntime: f16/bf16 MatMuls with epilogues and batch
dims, and f32 MatMuls compiled with --gpu-matmul-precision tf32 (the default fp32 keeps the
SIMT bodies)."""
from __future__ import annotations

import ctypes
from pathlib import Path

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from llvmlite import ir
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.loops import const_i64
from aot.codegen.math import F32
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import run_o3
from aot.codegen.nvptx import NvptxTarget, assemble, emit_gpu, ptxas_path
from aot.codegen.nvptx.emulate import emulate
from aot.codegen.nvptx.simt import MMA_BF16, MMA_F16, MMA_TF32, WARP, GpuSimt, HostSimt, MmaShape, affine
from aot.errors import CodegenError
from gpu_util import SMS, emulated_matches_onnxruntime, gpu_plan
from onnx_util import make_model, vinfo

I32 = ir.IntType(32)
SHAPES = {"f16": MMA_F16, "bf16": MMA_BF16, "tf32": MMA_TF32}
WARPS = 2


# == the fragment layouts ====================================================================
@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_fragment_layouts_cover_each_matrix_once_and_are_affine(kind):
    shape = SHAPES[kind]
    for at, registers, rows, cols in ((shape.a_at, shape.a_registers, shape.m, shape.k),
                                      (shape.b_at, shape.b_registers, shape.k, shape.n),
                                      (shape.c_at, shape.c_registers, shape.m, shape.n)):
        elements = registers * (shape.per_register if at != shape.c_at else 1)
        seen = []
        for lane in range(WARP):
            group, thread = lane >> 2, lane % 4
            for i in range(elements):
                row, col = at(group, thread, i)
                (r0, rg, rt), (c0, cg, ct) = affine(at, i)
                assert (row, col) == (r0 + rg * group + rt * thread, c0 + cg * group + ct * thread)
                seen.append((row, col))
        assert sorted(seen) == [(r, c) for r in range(rows) for c in range(cols)]


def test_fragment_layouts_are_the_ptx_isa_formulas():
    """Spelled as the ISA spells them (Figures 72 and 79 and their B and C/D figures)."""
    for lane in range(WARP):
        g, t = lane >> 2, lane % 4
        for i in range(8):  # m16n8k16 A: a0..a7
            row = g if i < 2 or 4 <= i < 6 else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            assert MMA_F16.a_at(g, t, i) == MMA_BF16.a_at(g, t, i) == (row, col)
        for i in range(4):  # m16n8k16 B: b0..b3
            assert MMA_F16.b_at(g, t, i) == (t * 2 + (i & 1) + (8 if i >= 2 else 0), g)
        for i in range(4):  # m16n8k8 .tf32 A: a0..a3
            assert MMA_TF32.a_at(g, t, i) == (g if i in (0, 2) else g + 8, t if i < 2 else t + 4)
        for i in range(2):  # m16n8k8 .tf32 B: b0, b1
            assert MMA_TF32.b_at(g, t, i) == (t if i == 0 else t + 4, g)
        for shape in SHAPES.values():  # C/D: c0..c3
            for i in range(4):
                assert shape.c_at(g, t, i) == (g if i < 2 else g + 8, t * 2 + (i & 1))


# == the primitive alone: one mma per warp ==========================================================
def _position(b, at, i, group, thread):
    return [b.add(const_i64(k), b.add(b.mul(group, const_i64(gc)), b.mul(thread, const_i64(tc))))
            for k, gc, tc in affine(at, i)]


def _mma_kernel(module: ir.Module, shape: MmaShape, realization: str) -> ir.Function:
    """Warp w: d[w] = a[w] @ b[w] + c[w], a [16, k] and b [k, 8] as 16-bit (f16/bf16) or 32-bit
    (tf32) elements row-major, c and d f32 [16, 8]; each lane loads its fragments by the layouts."""
    elem = ir.IntType(16 if shape.per_register == 2 else 32)
    extra = [ir.IntType(64)] * 2 if realization == "host" else []
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [elem.as_pointer()] * 2 + [F32.as_pointer()] * 2 + extra),
                     name=f"mma_{shape.kind}_{realization}")
    if realization == "gpu":
        fn.calling_convention = "ptx_kernel"
    a_in, b_in, c_in, d_out = fn.args[:4]
    setup = ir.IRBuilder(fn.append_basic_block("entry"))
    start = fn.append_basic_block("body")
    b = ir.IRBuilder(start)
    simt = (GpuSimt if realization == "gpu" else HostSimt)(fn, setup, b, WARPS * WARP)
    a = [simt.thread_var(I32, f"a{i}") for i in range(shape.a_registers)]
    w = [simt.thread_var(I32, f"b{i}") for i in range(shape.b_registers)]
    acc = [simt.thread_var(F32, f"c{i}") for i in range(4)]

    def lane_of(tid):
        warp, lane = b.udiv(tid, const_i64(WARP)), b.urem(tid, const_i64(WARP))
        return warp, b.lshr(lane, const_i64(2)), b.and_(lane, const_i64(3))

    with simt.blocks(1):
        with simt.threads() as tid:
            warp, group, thread = lane_of(tid)
            for regs, at, source, rows, cols in ((a, shape.a_at, a_in, shape.m, shape.k), (w, shape.b_at, b_in, shape.k, shape.n)):
                for j, reg in enumerate(regs):
                    word = ir.Constant(I32, 0)
                    for h in range(shape.per_register):
                        row, col = _position(b, at, j * shape.per_register + h, group, thread)
                        at_ = b.add(b.mul(warp, const_i64(rows * cols)), b.add(b.mul(row, const_i64(cols)), col))
                        x = b.zext(b.load(b.gep(source, [at_])), I32) if elem.width == 16 else b.load(b.gep(source, [at_]))
                        word = b.or_(word, b.shl(x, ir.Constant(I32, 16 * h)))
                    b.store(word, reg.at(b, tid))
            for i, reg in enumerate(acc):
                row, col = _position(b, shape.c_at, i, group, thread)
                b.store(b.load(b.gep(c_in, [b.add(b.mul(warp, const_i64(128)), b.add(b.mul(row, const_i64(8)), col))])),
                        reg.at(b, tid))
        simt.mma(shape, a, w, acc, acc)
        with simt.threads() as tid:
            warp, group, thread = lane_of(tid)
            for i, reg in enumerate(acc):
                row, col = _position(b, shape.c_at, i, group, thread)
                b.store(b.load(reg.at(b, tid)),
                        b.gep(d_out, [b.add(b.mul(warp, const_i64(128)), b.add(b.mul(row, const_i64(8)), col))]))
    b.ret_void()
    setup.branch(start)
    return fn


def _narrow(kind, x):
    if kind == "f16":
        return x.astype(np.float16)
    if kind == "bf16":
        return x.astype(ml_dtypes.bfloat16)
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_simt_mma_emulated_against_numpy(kind):
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    shape = SHAPES[kind]
    target = CpuTarget.host()
    module = ir.Module("mma")
    module.triple = target.triple
    _mma_kernel(module, shape, "host")
    machine = target.target_machine()
    engine = llvm.create_mcjit_compiler(run_o3(module, machine, vectorize=True, back_end="test"), machine)
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address(f"mma_{kind}_host"))
    rng = np.random.default_rng(3)
    a = _narrow(kind, rng.standard_normal((WARPS, 16, shape.k)).astype(np.float32))
    w = _narrow(kind, rng.standard_normal((WARPS, shape.k, 8)).astype(np.float32))
    a[0, 3, 5] = w[1, 2, 7] = 0.0
    if kind == "f16":  # subnormals decode exactly
        a[1, 0, 0], w[0, 0, 0] = np.float16(6e-8), np.float16(-3e-5)
    c = rng.standard_normal((WARPS, 16, 8)).astype(np.float32)
    d = np.zeros_like(c)
    run(a.ctypes.data, w.ctypes.data, c.ctypes.data, d.ctypes.data, 0, 1)
    expect = np.einsum("wmk,wkn->wmn", a.astype(np.float64), w.astype(np.float64)) + c
    np.testing.assert_allclose(d, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("kind", sorted(SHAPES))
@pytest.mark.parametrize("sm", ("sm_80", "sm_90"))
def test_simt_mma_assembles(kind, sm):
    shape = SHAPES[kind]
    target = NvptxTarget(sm)
    module = ir.Module("mma")
    module.triple = target.triple
    _mma_kernel(module, shape, "gpu")
    machine = target.target_machine()
    ptx = machine.emit_assembly(run_o3(module, machine, vectorize=False, back_end="test"))
    assert f"mma.sync.aligned.m16n8k{shape.k}.row.col.f32.{kind}.{kind}.f32" in ptx
    info = assemble(ptx, sm)[f"mma_{kind}_gpu"]
    assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0


def test_simt_mma_misuse_is_refused():
    module = ir.Module("simt")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)] * 2), name="k")
    setup = ir.IRBuilder(fn.append_basic_block("entry"))
    simt = HostSimt(fn, setup, ir.IRBuilder(fn.append_basic_block("body")), 32)
    a = [simt.thread_var(I32, f"a{i}") for i in range(4)]
    c = [simt.thread_var(F32, f"c{i}") for i in range(4)]
    with pytest.raises(CodegenError, match="takes 4, 2, 4 and 4 registers"):
        simt.mma(MMA_F16, a, a[:1], c, c)
    with pytest.raises(CodegenError, match="inside a phase"):
        with simt.threads():
            simt.mma(MMA_F16, a, a[:2], c, c)


# == the mma bodies on models ==================================================================

H, F = TensorProto.FLOAT16, TensorProto.FLOAT
CONTRACTIONS = ("dot", "packed_dot")
MAX_REGISTERS = 128  # __launch_bounds__(256, 2)
STABLEHLO = Path(__file__).resolve().parents[2] / "data" / "stablehlo"


def _contraction_bodies(plan, precision="fp32"):
    kernels = emit_gpu(plan, NvptxTarget("sm_90", precision)).kernels
    return [gk.body for k, gk in zip(plan.kernels, kernels) if set(CONTRACTIONS) & set(k.ops)]


def _check_assembly(plan, precision="fp32"):
    """ptxas for sm_80 and sm_90: mma.sync in the PTX (of its kind), no spills; the registers and
    shared bytes of each kernel are returned for the report."""
    if ptxas_path() is None:
        return {}
    reports = {}
    for sm in SMS:
        code = emit_gpu(plan, NvptxTarget(sm, precision))
        assert "mma.sync.aligned.m16n8k" in code.ptx
        reports[sm] = assemble(code.ptx, sm)
        for symbol, info in reports[sm].items():
            assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0, (sm, symbol, info)
            assert info.registers <= MAX_REGISTERS, (sm, symbol, info)
    return reports


def _f16(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float16)


def test_f16_matmul_with_bias_and_relu(rng):
    """[33, 64] x [64, 40], a constant weight: M and N tails of every tile, the epilogue in f16."""
    w = numpy_helper.from_array(_f16(rng, (64, 40), 0.125), "w")
    bias = numpy_helper.from_array(_f16(rng, (40,)), "b")
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
                        helper.make_node("Relu", ["u"], ["y"])], [vinfo("x", H, (33, 64))], [vinfo("y", H, (33, 40))],
                       [w, bias])
    # the dot rounds to f16 before the bias (as onnxruntime's MatMul does): 1 ulp apart at most
    plan = emulated_matches_onnxruntime(model, {"x": _f16(rng, (33, 64))}, rtol=2e-3, atol=2e-3)
    assert _contraction_bodies(plan) == ["mma"]
    _check_assembly(plan)


def test_f16_attention_matmuls(rng):
    """scores = q k^T (k transposed: its k is the contiguous dim), then scores v: batch dims
    [2, 4], K = 16 and K = 33 (a tail of the 32-wide K step), N = 33 and 16."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("MatMul", ["s", "v"], ["y"])]
    shape = (2, 4, 33, 16)
    model = make_model(nodes, [vinfo(n, H, shape) for n in "qkv"], [vinfo("y", H, shape), vinfo("s", H, (2, 4, 33, 33))])
    feeds = {n: _f16(rng, shape, 0.5) for n in "qkv"}
    plan = emulated_matches_onnxruntime(model, feeds, rtol=4e-3, atol=4e-3)
    assert _contraction_bodies(plan) == ["mma", "mma"]
    _check_assembly(plan)


def test_f16_matmul_in_large_tiles(rng):
    """132 batches of [128, 32] x [32, 128]: one 128 x 128 tile each, 132 blocks (the LARGE tile)."""
    from aot.codegen.nvptx import mma
    from aot.codegen.nvptx.gemm import Problem

    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [vinfo("a", H, (132, 128, 32)), vinfo("b", H, (132, 32, 128))], [vinfo("y", H, (132, 128, 128))])
    plan = emulated_matches_onnxruntime(model, {"a": _f16(rng, (132, 128, 32), 0.5), "b": _f16(rng, (132, 32, 128), 0.5)},
                                        rtol=4e-3, atol=4e-3)
    assert _contraction_bodies(plan) == ["mma"]
    assert mma._tile_of(Problem.of(plan.kernels[0], mma._is_half_contraction)) == mma.LARGE
    _check_assembly(plan)


def test_bf16_stablehlo_dot():
    """tests/data/stablehlo/bf16.mlir: a bf16 dot_general [4, 16] x [16, 8] with a constant
    weight and a gelu after it; the dot on tensor cores (a 16-row tile), against the reference
    interpreter on the same graph (onnxruntime runs no bf16 MatMul)."""
    from aot.driver import import_model
    from aot.interpreter import interpret
    from aot.pipeline import run_pipeline

    graph, _, _ = import_model(str(STABLEHLO / "bf16.mlir"), None)
    x = np.random.default_rng(5).standard_normal((4, 16)).astype(ml_dtypes.bfloat16)
    expected = interpret(import_model(str(STABLEHLO / "bf16.mlir"), None)[0], {graph.input_names[0]: x})
    plan = run_pipeline(graph)
    (ours,) = emulate(plan, [x])
    np.testing.assert_allclose(ours.astype(np.float32), np.asarray(expected[0]).astype(np.float32), rtol=1e-2, atol=1e-2)
    assert _contraction_bodies(plan) == ["mma"]
    _check_assembly(plan)


# == f32 with --gpu-matmul-precision tf32 ========================================================
def _f32_matmul(rng, x_shape, w_shape, constant=True):
    w = (rng.standard_normal(w_shape) / np.sqrt(w_shape[0])).astype(np.float32)
    bias = numpy_helper.from_array(rng.standard_normal(w_shape[-1]).astype(np.float32), "b")
    inputs, inits, feeds = [vinfo("x", F, x_shape)], [bias], {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if constant:
        inits.append(numpy_helper.from_array(w, "w"))
    else:
        inputs.append(vinfo("w", F, w_shape))
        feeds["w"] = w
    out = (*x_shape[:-1], w_shape[-1])
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
                       inputs, [vinfo("y", F, out)], inits)
    return model, feeds


@pytest.mark.parametrize("x_shape, w_shape, constant", [
    ((33, 64), (64, 40), True),  # packed_dot: the packed weight read through its lanes
    ((2, 37, 50), (50, 70), False),  # a run-time weight, K = 50: tails of the 16-wide K step
    ((5, 64), (64, 24), True),  # few rows: the 16-row tile (fp32 would take gemv)
])
def test_f32_matmul_with_tf32(rng, x_shape, w_shape, constant):
    model, feeds = _f32_matmul(rng, x_shape, w_shape, constant)
    plan = gpu_plan(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (reference,) = session.run(None, feeds)
    (ours,) = emulate(plan, [feeds[n] for n in plan.graph.input_names], matmul_precision="tf32")
    # each input rounded to 11 significant bits: |error| of a product <= 2^-10 |x w|, summed over K
    k = x_shape[-1]
    bound = 2.0 ** -10 * (np.abs(feeds["x"]).reshape(-1, k) @ np.abs(feeds["w"] if not constant else
                                                                         _weight_of(model))).reshape(reference.shape)
    error = np.abs(ours - reference)
    assert (error <= bound + 1e-6).all(), float((error - bound).max())
    assert error.max() > 1e-5  # the inputs were rounded: tf32 is not f32
    assert set(_contraction_bodies(plan, "tf32")) == {"mma_tf32"}
    _check_assembly(plan, "tf32")
    # fp32, the default: the SIMT bodies, no tensor cores, f32 results
    emulated_matches_onnxruntime(model, feeds, rtol=1e-4, atol=1e-4, plan=plan)
    assert set(_contraction_bodies(plan)) <= {"gemm", "gemv"}
    assert "mma.sync" not in emit_gpu(plan, NvptxTarget("sm_90")).ptx
    assert "cvt.rna.tf32" in emit_gpu(plan, NvptxTarget("sm_90", "tf32")).ptx


def _weight_of(model):
    return next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "w")


def test_matmul_precision_is_checked():
    from aot.errors import ArgumentError

    with pytest.raises(ArgumentError, match="choose one of fp32, tf32"):
        NvptxTarget("sm_80", "fp16")
