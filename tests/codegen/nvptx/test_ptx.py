"""NVPTX code generation (aot/codegen/nvptx): small ONNX models through the pipeline give PTX
that ptxas assembles for sm_80 and sm_90 with no error, one ptx_kernel per plan kernel; kernels
without a GPU body yet are refused by name."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import NvptxTarget, assemble, emit_gpu, emit_ptx, ptxas_path
from aot.codegen.nvptx.ptxas import parse_report
from aot.errors import ArgumentError, CodegenError
from aot.importers.onnx import import_onnx
from aot.pipeline import run_pipeline
from gpu_util import repeated_layers
from onnx_util import make_model, vinfo

F = TensorProto.FLOAT
SMS = ("sm_80", "sm_90")


def _softmax_layernorm():
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, 32).astype(np.float32), "scale")
    bias = numpy_helper.from_array(np.linspace(-1, 1, 32).astype(np.float32), "bias")
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=-1),
             helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["ln"], axis=-1, epsilon=1e-5)]
    return make_model(nodes, [vinfo("x", F, (8, 32))], [vinfo("s", F, (8, 32)), vinfo("ln", F, (8, 32))],
                      [scale, bias])


def _broadcast_chain():
    nodes = [helper.make_node("Add", ["x", "b"], ["t0"]), helper.make_node("Mul", ["t0", "c"], ["t1"]),
             helper.make_node("Relu", ["t1"], ["t2"]), helper.make_node("Sub", ["t2", "x"], ["y"])]
    return make_model(nodes, [vinfo("x", F, (4, 5, 6)), vinfo("b", F, (1, 5, 1)), vinfo("c", F, (6,))],
                      [vinfo("y", F, (4, 5, 6))])


def _data_movement():
    starts, ends, axes = (numpy_helper.from_array(np.array(v, np.int64), n)
                          for v, n in (([1], "starts"), ([5], "ends"), ([2], "axes")))
    shape = numpy_helper.from_array(np.array([3, 32], np.int64), "shape")
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["s"]),
             helper.make_node("Concat", ["s", "s"], ["c"], axis=2),
             helper.make_node("Reshape", ["c", "shape"], ["y"])]
    return make_model(nodes, [vinfo("x", F, (3, 6, 4))], [vinfo("y", F, (3, 32))], [starts, ends, axes, shape])


def _int_and_bool():
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mod", ["s", "b"], ["r"]),
             helper.make_node("Greater", ["r", "a"], ["g"]), helper.make_node("Not", ["g"], ["n"]),
             helper.make_node("Where", ["n", "a", "r"], ["w"]), helper.make_node("Cast", ["w"], ["y"], to=TensorProto.INT64)]
    return make_model(nodes, [vinfo("a", TensorProto.INT32, (7, 9)), vinfo("b", TensorProto.INT32, (9,))],
                      [vinfo("y", TensorProto.INT64, (7, 9)), vinfo("n", TensorProto.BOOL, (7, 9))])


def _math_library():
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Tanh", ["x"], ["t"]),
             helper.make_node("Erf", ["x"], ["f"]), helper.make_node("Sum", ["e", "t", "f"], ["y"]),
             helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0), helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Sin", ["h"], ["sh"])]
    return make_model(nodes, [vinfo("x", F, (16, 10))], [vinfo("y", F, (16, 10)), vinfo("m", F, None),
                                                          vinfo("sh", TensorProto.FLOAT16, (16, 10))])


MODELS = {"broadcast_chain": _broadcast_chain, "softmax_layernorm": _softmax_layernorm,
          "data_movement": _data_movement, "int_and_bool": _int_and_bool, "math_library": _math_library}


def _plan(model):
    return run_pipeline(import_onnx(model))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_ptx_kernel_per_plan_kernel(name):
    plan = _plan(MODELS[name]())
    code = emit_gpu(plan, NvptxTarget("sm_90"))
    assert [k.symbol for k in code.kernels] == [f"aot_kernel_{i}" for i in range(len(plan.kernels))]
    for kernel in code.kernels:
        assert f".entry {kernel.symbol}(" in code.ptx
        kernel_plan = plan.kernels[int(kernel.symbol.rsplit("_", 1)[1])]
        # one parameter per buffer the kernel touches, each where the plan put it
        assert [a.value for a in kernel.args] == list(dict.fromkeys([p.name for p in kernel_plan.params] + [kernel_plan.root.name]))
        for arg in kernel.args:
            where = plan.slices[arg.value]
            assert (arg.kind, arg.index, arg.offset) == (where.kind, where.index, where.offset)
        assert 1 <= kernel.grid <= kernel.blocks and kernel.block % 32 == 0
    assert ".target sm_90" in code.ptx and ".version 7.8" in code.ptx
    # only a block over 256 threads needs a register cap to fit an SM
    for kernel in code.kernels:
        entry = code.ptx.split(f".entry {kernel.symbol}(", 1)[1].split("{", 1)[0]
        assert (".maxnreg" in entry) == (kernel.block > 256)
    assert "call" not in code.ptx.split(".entry", 1)[1]  # math inlined: no libm, no device calls


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("sm", SMS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_ptxas_assembles(name, sm):
    plan = _plan(MODELS[name]())
    info = assemble(emit_ptx(plan, sm), sm)
    assert sorted(info) == sorted(f"aot_kernel_{i}" for i in range(len(plan.kernels)))
    assert all(k.registers > 0 for k in info.values())


def test_kernel_without_gpu_body_is_refused(monkeypatch):
    from aot.codegen.nvptx import bodies

    monkeypatch.setattr(bodies, "BODIES", ())
    plan = _plan(_broadcast_chain())
    with pytest.raises(CodegenError, match=r"kernel \S+ \(root op sub\): no GPU body for sub yet"):
        emit_ptx(plan, "sm_80")


def test_unknown_sm_is_an_argument_error():
    with pytest.raises(ArgumentError, match="sm_75"):
        NvptxTarget("sm_75")


def test_ptxas_report_parsing():
    report = ("ptxas info    : Compiling entry function 'aot_kernel_0' for 'sm_90'\n"
              "ptxas info    : Function properties for aot_kernel_0\n"
              "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
              "ptxas info    : Used 40 registers, used 0 barriers, 384 bytes cmem[0]\n"
              "ptxas info    : Compiling entry function 'aot_kernel_1' for 'sm_90'\n"
              "ptxas info    : Function properties for aot_kernel_1\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "ptxas info    : Used 12 registers, used 0 barriers, 376 bytes cmem[0]\n")
    info = parse_report(report)
    assert (info["aot_kernel_0"].registers, info["aot_kernel_0"].spill_store_bytes) == (40, 4)
    assert (info["aot_kernel_1"].registers, info["aot_kernel_1"].stack_bytes) == (12, 0)


def test_kernels_with_the_same_code_share_one_function():
    plan = _plan(repeated_layers())
    code = emit_gpu(plan, NvptxTarget("sm_90"))
    symbols = [k.symbol for k in code.kernels]
    assert len(symbols) == len(plan.kernels) == 6
    assert symbols[0::2] == [symbols[0]] * 3 and symbols[1::2] == [symbols[1]] * 3
    assert code.ptx.count(".entry ") == 2
    # each launch keeps its own buffers: the layers' weights differ
    assert len({k.args[1].offset for k in code.kernels[0::2]}) == 3


def test_code_key_ignores_names_not_code():
    from llvmlite import ir

    from aot.codegen.nvptx.kernel import code_key

    def kernel(module, name, value_name, constant):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.FloatType().as_pointer()]), name=name)
        fn.args[0].name = value_name
        b = ir.IRBuilder(fn.append_basic_block(f"{value_name}.entry"))
        b.store(b.fadd(b.load(fn.args[0], name=value_name), ir.Constant(ir.FloatType(), constant)), fn.args[0])
        b.ret_void()
        return fn

    module = ir.Module()
    a, b, c = kernel(module, "aot_kernel_1", "x", 1.0), kernel(module, "aot_kernel_10", "y.z", 1.0), kernel(module, "k", "x", 2.0)
    assert code_key(a) == code_key(b) != code_key(c)


def test_a_block_over_256_threads_caps_its_registers():
    # 512 threads at over 128 registers each would fail every launch
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [vinfo("x", F, (4, 4097))],
                       [vinfo("y", F, (4, 4097))])
    code = emit_gpu(_plan(model), NvptxTarget("sm_90"))
    assert [k.block for k in code.kernels] == [512]
    assert ".maxnreg 128\n" in code.ptx.split(".entry aot_kernel_0(", 1)[1].split("{", 1)[0]
    if ptxas_path() is not None:
        assert assemble(code.ptx, "sm_90")["aot_kernel_0"].registers <= 128


def test_register_cap_fits_the_block_in_an_sm():
    from aot.codegen.nvptx.kernel import register_cap

    assert [register_cap(b) for b in (257, 384, 512, 1024)] == [248, 168, 128, 64]
    assert all(register_cap(b) * b <= 65536 and register_cap(b) % 8 == 0 for b in range(257, 1025))
