"""The row-cooperative GPU body (aot/codegen/nvptx/reduce.py, row_groups.py): kernels with fused
reductions emulated on the host against onnxruntime, given the reduce body, and through ptxas
for sm_80 and sm_90 with no spills."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import NvptxTarget, emit_gpu
from aot.codegen.nvptx.reduce import layout
from gpu_util import assembles_for_every_sm, emulated_matches_onnxruntime, gpu_plan
from onnx_util import make_model, vinfo

F, H, I32, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.INT64


def _one(op, shape, dtype=F, opset=17, inits=(), extra=(), **attrs):
    return make_model([helper.make_node(op, ["x", *extra], ["y"], **attrs)], [vinfo("x", dtype, shape)],
                      [vinfo("y", dtype, None)], list(inits), opset)


def _axes(*axes):
    return numpy_helper.from_array(np.array(axes, np.int64), "axes")


def _reduce(op, shape, axes, keepdims, dtype=F):
    """ReduceX with axes as an input (opset 18)."""
    return _one(op, shape, dtype, opset=18, inits=[_axes(*axes)], extra=["axes"], keepdims=keepdims)


def _layer_norm(shape):
    width = shape[-1]
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, width).astype(np.float32), "scale")
    bias = numpy_helper.from_array(np.linspace(-1, 1, width).astype(np.float32), "bias")
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1, epsilon=1e-5)
    return make_model([node], [vinfo("x", F, shape)], [vinfo("y", F, shape)], [scale, bias])


def _rms_norm(shape):
    """x / sqrt(mean(x * x) + eps) * w, as T5 writes it."""
    w = numpy_helper.from_array(np.linspace(0.5, 2, shape[-1]).astype(np.float32), "w")
    eps = numpy_helper.from_array(np.array(1e-6, np.float32), "eps")
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]), helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Div", ["x", "rms"], ["n"]), helper.make_node("Mul", ["n", "w"], ["y"])]
    return make_model(nodes, [vinfo("x", F, shape)], [vinfo("y", F, shape)], [w, eps])


def _norm_with_epilogue(shape):
    """LayerNorm, then Relu and a product with a second input: the epilogue runs on the row."""
    model = _layer_norm(shape)
    graph = model.graph
    graph.node[0].output[0] = "ln"
    graph.node.extend([helper.make_node("Relu", ["ln"], ["r"]), helper.make_node("Mul", ["r", "z"], ["y"])])
    graph.input.append(vinfo("z", F, shape))
    return make_model(list(graph.node), list(graph.input), [vinfo("y", F, shape)], list(graph.initializer))


def _argmax(shape):
    return make_model([helper.make_node("ArgMax", ["x"], ["y"], axis=-1, keepdims=0)], [vinfo("x", F, shape)],
                      [vinfo("y", I64, None)])


def _normal(shape, scale=3.0, dtype=np.float32):
    return lambda r: {"x": (scale * r.standard_normal(shape)).astype(dtype)}


# name: (model, feeds, rtol, atol)
CASES = {
    "softmax_7": (lambda: _one("Softmax", (5, 7), axis=-1), _normal((5, 7)), 1e-5, 1e-6),
    "softmax_32": (lambda: _one("Softmax", (3, 32), axis=-1), _normal((3, 32)), 1e-5, 1e-6),
    "softmax_1000": (lambda: _one("Softmax", (2, 3, 1000), axis=-1), _normal((2, 3, 1000)), 1e-5, 1e-7),
    "softmax_4097": (lambda: _one("Softmax", (3, 4097), axis=-1), _normal((3, 4097)), 1e-5, 1e-8),
    "softmax_row_of_1": (lambda: _one("Softmax", (5, 1), axis=-1), _normal((5, 1)), 0, 0),
    "softmax_f16": (lambda: _one("Softmax", (4, 300), H, axis=-1), _normal((4, 300), dtype=np.float16), 2e-3, 1e-4),
    "log_softmax": (lambda: _one("LogSoftmax", (6, 129), axis=-1), _normal((6, 129)), 1e-5, 1e-5),
    "layer_norm_768": (lambda: _layer_norm((4, 768)), _normal((4, 768)), 1e-4, 1e-4),
    "layer_norm_2x3x50": (lambda: _layer_norm((2, 3, 50)), _normal((2, 3, 50)), 1e-4, 1e-4),
    "rms_norm": (lambda: _rms_norm((3, 512)), _normal((3, 512)), 1e-5, 1e-5),
    "norm_epilogue": (lambda: _norm_with_epilogue((5, 96)),
                      lambda r: {"x": r.standard_normal((5, 96), np.float32), "z": r.standard_normal((5, 96), np.float32)},
                      1e-4, 1e-4),
    "reduce_sum_keep0": (lambda: _reduce("ReduceSum", (9, 100), (1,), 0), _normal((9, 100)), 1e-5, 1e-4),
    "reduce_sum_keep1": (lambda: _reduce("ReduceSum", (9, 100), (1,), 1), _normal((9, 100)), 1e-5, 1e-4),
    "reduce_max_keep0": (lambda: _reduce("ReduceMax", (2, 3, 4, 33), (3,), 0), _normal((2, 3, 4, 33)), 0, 0),
    "reduce_max_keep1": (lambda: _reduce("ReduceMax", (2, 3, 4, 33), (3,), 1), _normal((2, 3, 4, 33)), 0, 0),
    "reduce_mean_keep0": (lambda: _reduce("ReduceMean", (7, 2000), (1,), 0), _normal((7, 2000)), 1e-5, 1e-6),
    "reduce_mean_keep1": (lambda: _reduce("ReduceMean", (7, 2000), (1,), 1), _normal((7, 2000)), 1e-5, 1e-6),
    "reduce_mean_two_axes": (lambda: _reduce("ReduceMean", (4, 6, 10), (1, 2), 0), _normal((4, 6, 10)), 1e-5, 1e-6),
    "reduce_sum_to_scalar": (lambda: _reduce("ReduceSum", (64, 50), (0, 1), 0), _normal((64, 50)), 1e-5, 1e-3),
    "reduce_min_int32": (lambda: _reduce("ReduceMin", (5, 77), (1,), 0, I32),
                         lambda r: {"x": r.integers(-1000, 1000, (5, 77)).astype(np.int32)}, 0, 0),
    "reduce_sum_int64": (lambda: _reduce("ReduceSum", (5, 300), (1,), 1, I64),
                         lambda r: {"x": r.integers(-1000, 1000, (5, 300)).astype(np.int64)}, 0, 0),
    "reduce_prod": (lambda: _reduce("ReduceProd", (6, 40), (1,), 0), _normal((6, 40), scale=1.0), 1e-5, 1e-6),
    "argmax": (lambda: _argmax((6, 250)), _normal((6, 250)), 0, 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reduce_body_matches_onnxruntime(name):
    model, feeds, rtol, atol = CASES[name]
    plan = emulated_matches_onnxruntime(model(), feeds(np.random.default_rng(0)), rtol=rtol, atol=atol)
    code = emit_gpu(plan, NvptxTarget("sm_90"))
    reducing = [k.body for k, kernel in zip(code.kernels, plan.kernels) if "reduce" in kernel.ops]
    assert reducing and set(reducing) == {"reduce"}, [k.body for k in code.kernels]
    for sm, report in assembles_for_every_sm(plan).items():
        for symbol, info in report.items():
            # the group's accumulators are a few registers; nothing is spilled
            assert info.spill_store_bytes == 0 and info.stack_bytes == 0, (sm, symbol, info)


def test_more_groups_than_a_grid_loop_over_blocks():
    """300,000 sums of 2: 75,000 blocks of 4 groups, more than one grid (65,535), so blocks loop."""
    model = _reduce("ReduceSum", (300_000, 2), (1,), 0)
    plan = emulated_matches_onnxruntime(model, _normal((300_000, 2))(np.random.default_rng(1)), rtol=1e-6, atol=1e-6)
    (kernel,) = emit_gpu(plan, NvptxTarget("sm_90")).kernels
    assert (kernel.body, kernel.block, kernel.blocks, kernel.grid) == ("reduce", 128, 75_000, 65_535)


def test_block_shapes():
    """Threads per group follow the longest loop (4 elements a thread, up to 512); short rows
    share a block (at least 128 threads), long rows take a block each."""
    def shape_of(model):
        (kernel,) = gpu_plan(model).kernels
        lay = layout(kernel)
        return lay.threads, lay.groups, lay.blocks

    assert shape_of(_one("Softmax", (5, 7), axis=-1)) == (32, 4, 2)
    assert shape_of(_one("Softmax", (3, 1000), axis=-1)) == (256, 1, 3)
    assert shape_of(_one("Softmax", (3, 4097), axis=-1)) == (512, 1, 3)
    assert shape_of(_layer_norm((4, 768))) == (192, 1, 4)
    assert shape_of(_reduce("ReduceSum", (64, 50), (0, 1), 0)) == (512, 1, 1)
    (kernel,) = gpu_plan(_one("Softmax", (3, 4097), axis=-1)).kernels
    assert layout(kernel).reason == ("3 groups (a root row of 4097 each), 2 reduction(s) over up to 4097 elements: "
                                     "512 threads a group (up to 9 elements each), 1 group(s) a block")


def test_declines_reductions_over_outer_dims():
    """ReduceSum over axis 0 of [64, 16] would read at a stride of 16 floats: left to the columns body."""
    plan = emulated_matches_onnxruntime(_reduce("ReduceSum", (64, 16), (0,), 0), _normal((64, 16))(np.random.default_rng(2)))
    (kernel,) = plan.kernels
    assert layout(kernel) is None
    assert emit_gpu(plan, NvptxTarget("sm_90")).kernels[0].body == "columns"
