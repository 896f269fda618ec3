"""The GPU pooling bodies (aot/codegen/nvptx/pool.py): windowed pooling one thread per output,
global pooling a warp (or a block) per row; emulated against onnxruntime, each kernel checked
to have the body meant for it, and assembled by ptxas for sm_80 and sm_90 without spills."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from gpu_util import assert_bodies_without_spills, emulated_matches_onnxruntime
from onnx_util import make_model

WINDOW, GLOBAL = "window_pool", "global_pool"


def pool_model(op, x_shape, act=None, **attrs):
    nodes = [helper.make_node(op, ["x"], ["p"], **attrs)]
    nodes.append(helper.make_node(act or "Identity", ["p"], ["y"]))
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def check(model, x_shape, bodies, *, rtol=1e-5, atol=1e-5):
    r = np.random.default_rng(2)
    x = r.standard_normal(x_shape).astype(np.float32)
    plan = emulated_matches_onnxruntime(model, {"x": x}, rtol=rtol, atol=atol)
    assert_bodies_without_spills(plan, bodies)
    return plan


def test_max_pool_3x3_stride2_pad1():
    check(pool_model("MaxPool", (2, 5, 13, 12), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
          (2, 5, 13, 12), [WINDOW])


@pytest.mark.parametrize("include_pad", [0, 1])
def test_average_pool_count_include_pad(include_pad):
    check(pool_model("AveragePool", (1, 4, 9, 10), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                     count_include_pad=include_pad), (1, 4, 9, 10), [WINDOW])


def test_average_pool_ceil_mode_and_relu_epilogue():
    check(pool_model("AveragePool", (2, 3, 7, 7), act="Relu", kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
          (2, 3, 7, 7), [WINDOW])


def test_max_pool_1d_and_large_window_loops():
    check(pool_model("MaxPool", (2, 3, 40), kernel_shape=[5], strides=[3], pads=[2, 2]), (2, 3, 40), [WINDOW])
    # 9x9 = 81 taps: the window rows loop instead of unrolling
    check(pool_model("MaxPool", (1, 2, 12, 12), kernel_shape=[9, 9], dilations=[1, 1], pads=[4, 4, 4, 4]),
          (1, 2, 12, 12), [WINDOW])


def test_global_average_pool_warp_per_row():
    check(pool_model("GlobalAveragePool", (2, 11, 7, 7)), (2, 11, 7, 7), [GLOBAL])


def test_global_average_pool_block_per_row():
    check(pool_model("GlobalAveragePool", (1, 3, 48, 50)), (1, 3, 48, 50), [GLOBAL], rtol=1e-5)


def test_global_max_pool():
    check(pool_model("GlobalMaxPool", (2, 6, 5, 9), act="Sigmoid"), (2, 6, 5, 9), [GLOBAL])
