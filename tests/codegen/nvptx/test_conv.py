"""The GPU conv bodies (aot/codegen/nvptx/conv.py): implicit GEMM for packed and wide-group convs,
the direct body for narrow groups; emulated against onnxruntime, each kernel checked to have
the body meant for it, and assembled by ptxas for sm_80 and sm_90 without spills."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import conv
from gpu_util import assert_bodies_without_spills, emulated_matches_onnxruntime
from onnx_util import make_model

GEMM, DIRECT = "implicit_gemm_conv", "direct_conv"


def conv_model(x_shape, w_shape, *, strides=None, pads=None, group=1, dilations=None, bias=True, act=None,
               residual=False, batch_norm=False, seed=0):
    """Conv(x, w[, b]) [+ BatchNormalization] [+ Add(r)] [+ activation] -> y."""
    r = np.random.default_rng(seed)
    w = (r.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(r.standard_normal(w_shape[0]).astype(np.float32), "b"))
        ins.append("b")
    nsp = len(w_shape) - 2
    attrs = {"group": group, "strides": strides or [1] * nsp, "pads": pads or [0] * 2 * nsp}
    if dilations:
        attrs["dilations"] = dilations
    nodes = [helper.make_node("Conv", ins, ["c"], **attrs)]
    last = "c"
    if batch_norm:
        o = w_shape[0]
        for name, value in (("gamma", r.uniform(0.5, 1.5, o)), ("beta", r.standard_normal(o)),
                            ("mean", r.standard_normal(o)), ("var", r.uniform(0.5, 2.0, o))):
            inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        nodes.append(helper.make_node("BatchNormalization", [last, "gamma", "beta", "mean", "var"], ["bn"]))
        last = "bn"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
        nodes.append(helper.make_node("Add", [last, "r"], ["s"]))
        last = "s"
    if act:
        nodes.append(helper.make_node(act, [last], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    model = make_model(nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return model


def check(model, x_shape, bodies, *, residual_shape=None, rtol=1e-4, atol=1e-4):
    """Emulated == onnxruntime; the conv kernels got `bodies` (in plan order); ptxas takes them
    for every SM with no spills."""
    r = np.random.default_rng(1)
    feeds = {"x": r.standard_normal(x_shape).astype(np.float32)}
    if residual_shape is not None:
        feeds["r"] = r.standard_normal(residual_shape).astype(np.float32)
    if residual_shape is not None:  # the residual's shape comes from the conv: give it to the model
        model.graph.input[1].CopyFrom(helper.make_tensor_value_info("r", TensorProto.FLOAT, residual_shape))
    plan = emulated_matches_onnxruntime(model, feeds, rtol=rtol, atol=atol)
    assert_bodies_without_spills(plan, bodies)
    return plan


def test_3x3_pad1_bias_relu():
    check(conv_model((2, 8, 10, 10), (16, 8, 3, 3), pads=[1] * 4, act="Relu"), (2, 8, 10, 10), [GEMM])


def test_7x7_stride2_pad3_stem():
    check(conv_model((1, 3, 24, 24), (16, 3, 7, 7), strides=[2, 2], pads=[3] * 4, batch_norm=True, act="Relu"),
          (1, 3, 24, 24), [GEMM])


def test_channels_not_a_multiple_of_tile_or_lanes():
    # O = 37 spans three 16-lane blocks (the last partial) and a BN = 64 tile; C = 5, K = 45 not a multiple of BK
    check(conv_model((1, 5, 9, 11), (37, 5, 3, 3), pads=[1, 0, 1, 2]), (1, 5, 9, 11), [GEMM])


def test_wide_channels_several_tiles():
    # 80 output channels: two column tiles of 64; 2 images of 13x7 pixels: a partial row tile
    check(conv_model((2, 20, 13, 7), (80, 20, 3, 3), pads=[1] * 4, dilations=[1, 2], act="Sigmoid"),
          (2, 20, 13, 7), [GEMM], rtol=1e-4)


def test_grouped_packed():
    # 2 groups of 32 outputs: packed (16 lanes divide 32), one column tile per group
    check(conv_model((1, 8, 8, 8), (64, 4, 3, 3), group=2, pads=[1] * 4), (1, 8, 8, 8), [GEMM])


def test_grouped_narrow_direct():
    # 2 groups of 8 outputs: left unpacked, too narrow for a GEMM tile
    check(conv_model((1, 8, 10, 10), (16, 4, 3, 3), group=2), (1, 8, 10, 10), [DIRECT])


def test_depthwise_3x3_stride2():
    check(conv_model((2, 12, 11, 11), (12, 1, 3, 3), group=12, strides=[2, 2], pads=[1] * 4, act="Relu"),
          (2, 12, 11, 11), [DIRECT])


def test_depthwise_7x7_reads_padded_input():
    # the layout pass pads the input of wide windows explicitly: the direct conv reads the pad's output
    plan = check(conv_model((1, 6, 9, 9), (6, 1, 7, 7), group=6, pads=[3] * 4), (1, 6, 9, 9), ["elementwise", DIRECT])
    assert "pad" in plan.kernels[0].ops


def test_pointwise_1x1():
    check(conv_model((2, 24, 5, 7), (40, 24, 1, 1), act="Relu"), (2, 24, 5, 7), [GEMM])


def test_pointwise_1x1_narrow_is_direct():
    check(conv_model((1, 8, 6, 6), (4, 8, 1, 1)), (1, 8, 6, 6), [DIRECT])


def test_residual_add():
    check(conv_model((1, 16, 8, 8), (16, 16, 3, 3), pads=[1] * 4, batch_norm=True, residual=True, act="Relu"),
          (1, 16, 8, 8), [GEMM], residual_shape=(1, 16, 8, 8))


def test_1d_conv():
    check(conv_model((2, 8, 30), (24, 8, 5), pads=[2, 2], strides=[2], act="Relu"), (2, 8, 30), [GEMM])


def test_1d_depthwise():
    check(conv_model((1, 8, 20), (8, 1, 3), group=8, pads=[1, 1]), (1, 8, 20), [DIRECT])


@pytest.mark.parametrize("bias", [False, True])
def test_no_bias_and_bias(bias):
    check(conv_model((1, 4, 6, 6), (16, 4, 3, 3), bias=bias), (1, 4, 6, 6), [GEMM])


def test_wide_tile_8x8(monkeypatch):
    # the 128 x 128 tile (8 x 8 a thread) is for large grids: allowed here at any size; O = 136
    # leaves a partial column tile and a partial 16-lane block, 156 pixels a partial row tile
    monkeypatch.setattr(conv, "WIDE_MIN_BLOCKS", 1)
    model = conv_model((1, 6, 12, 13), (136, 6, 3, 3), pads=[1] * 4, act="Relu")
    plan = check(model, (1, 6, 12, 13), [GEMM])
    assert conv.GemmTile.of(conv.ConvShape.of(plan.kernels[0].nodes[0])) == conv.GemmTile(128, 128, 8, 8)
