"""The column GPU body (aot/codegen/nvptx/columns.py): reductions over outer axes, emulated on the host
against onnxruntime, given the columns body, and through ptxas for sm_80 and sm_90 with no spills."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import NvptxTarget, emit_gpu
from aot.codegen.nvptx.columns import find, layout
from gpu_util import assembles_for_every_sm, emulated_matches_onnxruntime, gpu_plan
from onnx_util import make_model, vinfo

F, H, I8, I32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.INT32


def _reduce(op, shape, axes, keepdims, dtype=F):
    """ReduceX with axes as an input (opset 18)."""
    axes_init = numpy_helper.from_array(np.array(axes, np.int64), "axes")
    return make_model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], [vinfo("x", dtype, shape)],
                      [vinfo("y", dtype, None)], [axes_init], 18)


def _softmax(shape, axis):
    return make_model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [vinfo("x", F, shape)],
                      [vinfo("y", F, None)], [], 17)


def _mean_pooling(shape):
    """A sentence embedding: the mean over the sequence, divided by its L2 norm."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=0),
             helper.make_node("ReduceL2", ["m"], ["n"], axes=[-1], keepdims=1),
             helper.make_node("Div", ["m", "n"], ["y"])]
    return make_model(nodes, [vinfo("x", F, shape)], [vinfo("y", F, None)], [], 17)


def _two_reductions(shape):
    """mean + max over axis 0, both read per output element: one kernel, two reductions."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=0),
             helper.make_node("ReduceMax", ["x"], ["x_max"], axes=[0], keepdims=0),
             helper.make_node("Add", ["m", "x_max"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return make_model(nodes, [vinfo("x", F, shape)], [vinfo("y", F, None)], [], 17)


def _argmax(shape, axis):
    return make_model([helper.make_node("ArgMax", ["x"], ["y"], axis=axis, keepdims=0)], [vinfo("x", F, shape)],
                      [vinfo("y", TensorProto.INT64, None)])


def _normal(shape, dtype=np.float32):
    return lambda r: {"x": r.standard_normal(shape).astype(dtype)}


def _integers(shape, dtype, low=-1000, high=1000):
    return lambda r: {"x": r.integers(low, high, shape).astype(dtype)}


# name: (model, feeds, rtol, atol); the comment says the launch shape each case takes
CASES = {
    # 96 columns of 33: a thread a column, one block of 96 threads
    "mean_axis1": (lambda: _reduce("ReduceMean", (2, 33, 48), (1,), 0), _normal((2, 33, 48)), 1e-5, 1e-6),
    # 64 columns of 300: 8 columns x 16 slices a block, 8 blocks
    "sum_axis0_keep0": (lambda: _reduce("ReduceSum", (300, 64), (0,), 0), _normal((300, 64)), 1e-5, 1e-4),
    "sum_axis0_keep1": (lambda: _reduce("ReduceSum", (300, 64), (0,), 1), _normal((300, 64)), 1e-5, 1e-4),
    # 61 columns: the last block's columns 61..63 do not exist
    "sum_axis0_tail": (lambda: _reduce("ReduceSum", (300, 61), (0,), 0), _normal((300, 61)), 1e-5, 1e-4),
    # 5000 columns: 32 columns x 4 slices
    "sum_axis0_wide": (lambda: _reduce("ReduceSum", (64, 5000), (0,), 0), _normal((64, 5000)), 1e-5, 1e-4),
    # the max and the sum, each a kernel of its own (fusion splits softmax over axis 0)
    "softmax_axis0": (lambda: _softmax((17, 40), 0), _normal((17, 40)), 1e-5, 1e-6),
    "max_axes_0_2": (lambda: _reduce("ReduceMax", (5, 6, 7), (0, 2), 0), _normal((5, 6, 7)), 0, 0),
    "mean_pooling": (lambda: _mean_pooling((2, 33, 48)), _normal((2, 33, 48)), 1e-5, 1e-6),
    "mean_pooling_one_sentence": (lambda: _mean_pooling((1, 128, 96)), _normal((1, 128, 96)), 1e-5, 1e-6),
    # an NHWC statistic over N, H, W
    "nhwc_mean": (lambda: _reduce("ReduceMean", (2, 9, 9, 24), (0, 1, 2), 0), _normal((2, 9, 9, 24)), 1e-5, 1e-6),
    "l2_axis0": (lambda: _reduce("ReduceL2", (200, 33), (0,), 0), _normal((200, 33)), 1e-5, 1e-6),
    "two_reductions": (lambda: _two_reductions((150, 20)), _normal((150, 20)), 1e-5, 1e-6),
    "sum_int32_sliced": (lambda: _reduce("ReduceSum", (300, 64), (0,), 0, I32), _integers((300, 64), np.int32), 0, 0),
    "sum_int32_thread": (lambda: _reduce("ReduceSum", (3, 4, 50), (0,), 1, I32), _integers((3, 4, 50), np.int32), 0, 0),
    "sum_f16": (lambda: _reduce("ReduceSum", (100, 40), (0,), 0, H), _normal((100, 40), np.float16), 2e-3, 2e-2),
    # the max, then the first index holding it (an i64 min): two kernels, both ours
    "argmax_axis0": (lambda: _argmax((300, 40), 0), _normal((300, 40)), 0, 0),
    # i8 partials do not go through shared memory: a thread a column however long
    "max_int8": (lambda: _reduce("ReduceMax", (200, 33), (0,), 0, I8), _integers((200, 33), np.int8, -128, 128), 0, 0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_columns_body_matches_onnxruntime(name):
    model, feeds, rtol, atol = CASES[name]
    plan = emulated_matches_onnxruntime(model(), feeds(np.random.default_rng(0)), rtol=rtol, atol=atol)
    code = emit_gpu(plan, NvptxTarget("sm_90"))
    bodies = {kernel.name: k.body for k, kernel in zip(code.kernels, plan.kernels) if "reduce" in kernel.ops}
    if name == "max_axes_0_2":  # the innermost axis is reduced: the reduce body's groups, one element each
        assert set(bodies.values()) == {"reduce"}, bodies
    elif name.startswith("mean_pooling"):  # the mean is ours; the norm reduces rows
        assert sorted(bodies.values()) == ["columns", "reduce"], bodies
    else:
        assert bodies and set(bodies.values()) == {"columns"}, bodies
    for sm, report in assembles_for_every_sm(plan).items():
        for symbol, info in report.items():
            # an accumulator, a column index and the partials' addresses: nothing is spilled
            assert info.spill_store_bytes == 0 and info.stack_bytes == 0, (sm, symbol, info)


def _layout_of(model):
    (kernel,) = gpu_plan(model).kernels
    return layout(kernel)


def test_launch_shapes():
    """Few columns with long reductions get slices (8 columns a block while 32-wide blocks would be
    fewer than 132); many columns, or short reductions, a thread a column."""
    def shape_of(model):
        lay = _layout_of(model)
        return lay.columns, lay.slices, lay.blocks

    assert shape_of(_reduce("ReduceSum", (4096, 64), (0,), 0)) == (8, 64, 8)
    assert shape_of(_reduce("ReduceSum", (300, 64), (0,), 0)) == (8, 16, 8)
    assert shape_of(_reduce("ReduceSum", (64, 5000), (0,), 0)) == (32, 4, 157)
    assert shape_of(_reduce("ReduceMean", (2, 33, 48), (1,), 0)) == (96, 1, 1)
    assert shape_of(_reduce("ReduceSum", (8, 100_000), (0,), 0)) == (128, 1, 782)
    assert shape_of(_reduce("ReduceMax", (200, 33), (0,), 0, I8)) == (64, 1, 1)
    assert _layout_of(_reduce("ReduceSum", (4096, 64), (0,), 0)).reason == (
        "64 columns, 1 reduction(s) over up to 4096 elements: 64 threads a column, 8 columns a block "
        "(up to 64 elements a thread), 8 blocks")


def test_more_columns_than_a_grid_loop_over_blocks():
    """8,400,000 sums of 2: 65,625 blocks of 128 columns, more than one grid (65,535), so blocks loop."""
    model = _reduce("ReduceSum", (2, 8_400_000), (0,), 0)
    plan = emulated_matches_onnxruntime(model, _normal((2, 8_400_000))(np.random.default_rng(1)), rtol=1e-6, atol=1e-6)
    (kernel,) = emit_gpu(plan, NvptxTarget("sm_90")).kernels
    assert (kernel.body, kernel.block, kernel.blocks, kernel.grid) == ("columns", 128, 65_625, 65_535)


def test_declines_a_softmax_over_the_innermost_dim():
    """Its max and sum are one value per row: per element they would be redone; the reduce body keeps it."""
    plan = emulated_matches_onnxruntime(_softmax((17, 40), 1), _normal((17, 40))(np.random.default_rng(2)))
    (kernel,) = plan.kernels
    assert find(kernel) is None
    assert emit_gpu(plan, NvptxTarget("sm_90")).kernels[0].body == "reduce"


def test_declines_a_reduction_to_one_element():
    (kernel,) = gpu_plan(_reduce("ReduceSum", (64, 50), (0, 1), 0)).kernels
    assert find(kernel) is None
