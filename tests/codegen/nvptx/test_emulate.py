"""The GPU kernels' logic on the host (aot/codegen/nvptx/emulate.py): blocks and threads as
loops, against onnxruntime; and the Simt constructs (phases, sync, shared memory, warp
shuffles) on a hand-built kernel, emulated and through ptxas."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

from aot.codegen.loops import const_i64
from aot.codegen.math import F32
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import run_o3
from aot.codegen.nvptx import NvptxTarget, assemble, ptxas_path
from aot.codegen.nvptx.simt import GpuSimt, HostSimt
from aot.errors import CodegenError
from gpu_util import emulated_matches_onnxruntime
from test_ptx import MODELS

FEEDS = {
    "broadcast_chain": lambda r: {"x": r.standard_normal((4, 5, 6), np.float32), "b": r.standard_normal((1, 5, 1), np.float32),
                                  "c": r.standard_normal((6,), np.float32)},
    "softmax_layernorm": lambda r: {"x": 3 * r.standard_normal((8, 32), np.float32)},
    "data_movement": lambda r: {"x": r.standard_normal((3, 6, 4), np.float32)},
    "int_and_bool": lambda r: {"a": r.integers(-9, 9, (7, 9)).astype(np.int32), "b": r.integers(1, 9, (9,)).astype(np.int32)},
    "math_library": lambda r: {"x": r.standard_normal((16, 10), np.float32)},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_emulated_kernels_match_onnxruntime(name):
    feeds = FEEDS[name](np.random.default_rng(0))
    emulated_matches_onnxruntime(MODELS[name](), feeds, rtol=2e-3 if name == "math_library" else 1e-5, atol=1e-5)


def _block_sum_kernel(module: ir.Module, realization: str) -> ir.Function:
    """out[block] = sum over the block's 128 threads of in[block * 128 + t] * (t + 1): each warp
    reduces by shuffles, lane 0 of each warp writes shared[warp], thread 0 sums those."""
    ptr = F32.as_pointer()
    extra = [ir.IntType(64)] * 2 if realization == "host" else []
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr] + extra), name=f"block_sum_{realization}")
    if realization == "gpu":
        fn.calling_convention = "ptx_kernel"
    source, out = fn.args[:2]
    setup = ir.IRBuilder(fn.append_basic_block("entry"))
    start = fn.append_basic_block("body")
    b = ir.IRBuilder(start)
    simt = (GpuSimt if realization == "gpu" else HostSimt)(fn, setup, b, 128)
    acc, other = simt.thread_var(F32, "acc"), simt.thread_var(F32, "other")
    partial = simt.shared(F32, 4, "partial")
    with simt.blocks(3) as block:
        with simt.threads() as tid:
            x = b.load(b.gep(source, [b.add(b.mul(block, const_i64(128)), tid)]))
            b.store(b.fmul(x, b.uitofp(b.add(tid, const_i64(1)), F32)), acc.at(b, tid))
        for delta in (16, 8, 4, 2, 1):
            simt.shuffle_down(acc, other, delta)
            with simt.threads() as tid:
                b.store(b.fadd(b.load(acc.at(b, tid)), b.load(other.at(b, tid))), acc.at(b, tid))
        with simt.threads() as tid:
            with b.if_then(b.icmp_unsigned("==", b.urem(tid, const_i64(32)), const_i64(0))):
                b.store(b.load(acc.at(b, tid)), b.gep(partial, [b.udiv(tid, const_i64(32))]))
        simt.sync()
        with simt.threads() as tid:
            with b.if_then(b.icmp_unsigned("==", tid, const_i64(0))):
                total = b.load(partial)
                for w in range(1, 4):
                    total = b.fadd(total, b.load(b.gep(partial, [const_i64(w)])))
                b.store(total, b.gep(out, [block]))
        simt.sync()
    b.ret_void()
    setup.branch(start)
    assert simt.shared_bytes == 16 and simt.block_count == 3
    return fn


def test_simt_shuffles_shared_memory_and_sync_emulated():
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = CpuTarget.host()
    module = ir.Module("simt")
    module.triple = target.triple
    _block_sum_kernel(module, "host")
    machine = target.target_machine()
    engine = llvm.create_mcjit_compiler(run_o3(module, machine, vectorize=True, back_end="test"), machine)
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        engine.get_function_address("block_sum_host"))
    source = np.random.default_rng(1).standard_normal(3 * 128).astype(np.float32)
    out = np.zeros(3, np.float32)
    run(source.ctypes.data, out.ctypes.data, 0, 3)
    expect = (source.reshape(3, 128).astype(np.float64) * np.arange(1, 129)).sum(axis=1)
    np.testing.assert_allclose(out, expect, rtol=1e-5)


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("sm", ("sm_80", "sm_90"))
def test_simt_constructs_assemble(sm):
    target = NvptxTarget(sm)
    module = ir.Module("simt")
    module.triple = target.triple
    _block_sum_kernel(module, "gpu")
    machine = target.target_machine()
    ptx = machine.emit_assembly(run_o3(module, machine, vectorize=False, back_end="test"))
    assert "shfl.sync.down" in ptx and "bar.sync" in ptx and ".shared" in ptx
    assert "block_sum_gpu" in assemble(ptx, sm)


def test_simt_misuse_is_refused():
    module = ir.Module("simt")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(64)] * 2), name="k")
    setup = ir.IRBuilder(fn.append_basic_block("entry"))
    simt = HostSimt(fn, setup, ir.IRBuilder(fn.append_basic_block("body")), 64)
    with pytest.raises(CodegenError, match="barrier in divergent code"):
        with simt.threads():
            simt.sync()
    with pytest.raises(CodegenError, match="multiple of 32"):
        HostSimt(fn, setup, ir.IRBuilder(fn.append_basic_block("other")), 48)


def test_empty_output_gets_a_launch_that_writes_nothing():
    from onnx import TensorProto, helper

    from onnx_util import make_model, vinfo

    f = TensorProto.FLOAT
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("ReduceSum", ["a"], ["s"], keepdims=1)],
                       [vinfo("a", f, (0, 4)), vinfo("b", f, (4,))], [vinfo("y", f, (0, 4)), vinfo("s", f, (1, 1))])
    plan = emulated_matches_onnxruntime(model, {"a": np.zeros((0, 4), np.float32), "b": np.ones(4, np.float32)})
    from aot.codegen.nvptx import emit_gpu

    assert all(k.grid == k.blocks == 1 for k in emit_gpu(plan, NvptxTarget("sm_90")).kernels if k.name.endswith("add"))
