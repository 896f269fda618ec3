"""Depthwise/narrow conv (codegen/cpu/depthwise.py) and pooling (pool.py) kernels vs the interpreter.

As test_packed.py: each graph goes through the default pipeline, is
compiled for the host and run split into pieces (last piece first), and each
test checks which body emitter took the kernel, so a silent fallback to the
elemental path fails; the decline tests check the fallback is still right.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from aot.codegen.cpu.packed_conv import CONV_EMITTER
from aot.codegen.cpu.depthwise import DEPTHWISE_EMITTER, LANES, Window, conv_window, plane_groups, plane_mode
from aot.codegen.cpu.pool import POOL_EMITTER
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Value
from bodies_util import check, compile_and_run, conv2d, emitters, feeds_for
from targets_util import cpus_to_check


# -- graphs ------------------------------------------------------------------------
def _scalar(b: Builder, value: float, shape: tuple[int, ...]) -> Value:
    return b.op("broadcast", [b.constant(np.float32(value))], dims=(), shape=shape)


def depthwise_relu6(x_shape: tuple[int, ...], kernel: tuple[int, int], strides=(1, 1), padding=((1, 1), (1, 1)),
                    dilation=(1, 1), multiplier: int = 1) -> Callable[[], Graph]:
    """conv(groups = C) + bias + ReLU6, as mobilenetv2 writes it."""
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, x_shape))
        b = Builder(g)
        rng = np.random.default_rng(3)
        c = x_shape[1]
        w = b.constant(rng.standard_normal((c * multiplier, 1) + kernel).astype(np.float32))
        y = b.op("conv", [x, w], strides=strides, padding=padding, dilation=dilation, groups=c)
        shape = y.type.shape
        bias = b.op("broadcast", [b.constant(rng.standard_normal(shape[1]).astype(np.float32))], dims=(1,), shape=shape)
        y = b.op("min", [b.op("max", [b.op("add", [y, bias]), _scalar(b, 0.0, shape)]), _scalar(b, 6.0, shape)])
        g.add_output(y, "y")
        return g
    return make


def pool(x_shape: tuple[int, ...], kind: str, window: tuple[int, int], strides=(1, 1), padding=((0, 0), (0, 0)),
         window_dilation=(1, 1), epilogue: str = "none", base_dilation=None) -> Callable[[], Graph]:
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, x_shape))
        b = Builder(g)
        lead = len(x_shape) - 2
        extra = {} if base_dilation is None else {"base_dilation": (1,) * lead + base_dilation}
        y = b.op("reduce_window", [x], kind=kind, window=(1,) * lead + window, strides=(1,) * lead + strides,
                 padding=((0, 0),) * lead + padding, window_dilation=(1,) * lead + window_dilation, **extra)
        if epilogue == "average":
            y = b.op("div", [y, _scalar(b, float(window[0] * window[1]), y.type.shape)])
        g.add_output(y, "y")
        return g
    return make


# -- depthwise conv ----------------------------------------------------------------
@pytest.mark.parametrize("x_shape,kernel,strides,padding,dilation", [
    ((1, 32, 112, 112), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),  # mobilenetv2 block 1
    ((1, 8, 29, 31), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),  # stride 2, odd sizes
    ((2, 5, 13, 7), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),  # rows narrower than the lanes
    ((1, 3, 11, 45), (5, 5), (1, 1), ((2, 2), (2, 2)), (1, 1)),
    ((1, 4, 17, 40), (3, 3), (2, 3), ((0, 2), (1, 2)), (2, 2)),  # stride 3 along width, dilation
    ((1, 3, 9, 38), (3, 2), (1, 2), ((2, 0), (0, 1)), (1, 3)),  # high padding only, ceil-mode like
    ((1, 2, 3, 3), (3, 3), (1, 1), ((2, 2), (2, 2)), (1, 1)),  # every row and column touches padding
    ((1, 7, 16, 16), (1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1)),  # exactly one block, no checks
])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_depthwise_bias_relu6(x_shape, kernel, strides, padding, dilation, target):
    make = depthwise_relu6(x_shape, kernel, strides, padding, dilation)
    plan = check(make, feeds_for(make), pieces=3, target=target)
    # windows of 25+ taps read an explicitly padded input (layout pass): a pad kernel first
    padded = kernel[0] * kernel[1] >= 25 and any(p != (0, 0) for p in padding)
    assert emitters(plan) == [None, DEPTHWISE_EMITTER] if padded else [DEPTHWISE_EMITTER]


# plane mode (stride 1, rows as wide as the input's, LANES to MAX_PLANE_VECTORS vectors per plane):
# a whole plane per work item, flattened, every offset and padding mask known at compile time
@pytest.mark.parametrize("x_shape,kernel,padding,dilation", [
    ((1, 6, 7, 7), (3, 3), ((1, 1), (1, 1)), (1, 1)),  # mobilenetv2's last blocks: 49 pixels, the last vector overlaps
    ((2, 3, 14, 14), (3, 3), ((1, 1), (1, 1)), (1, 1)),  # 196 pixels, rows narrower than the lanes
    ((1, 2, 4, 4), (3, 3), ((1, 1), (1, 1)), (1, 1)),  # exactly one vector: every tap crosses the plane's ends
    ((1, 3, 9, 9), (3, 3), ((2, 2), (2, 2)), (2, 2)),  # dilated
    ((1, 2, 11, 6), (5, 3), ((0, 4), (2, 0)), (1, 1)),  # high rows only, low columns only: out_h != H
    ((1, 2, 64, 64), (3, 3), ((1, 1), (1, 1)), (1, 1)),  # MAX_PLANE_VECTORS vectors
])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_depthwise_whole_planes(x_shape, kernel, padding, dilation, target):
    make = depthwise_relu6(x_shape, kernel, (1, 1), padding, dilation)
    conv = next(n for n in make().nodes if n.op == "conv")
    assert plane_mode(conv_window(conv))
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert emitters(plan) == [DEPTHWISE_EMITTER]
    n, c = x_shape[:2]
    assert DEPTHWISE_EMITTER.work_items(plan.kernels[0], target) == n * c  # one item per plane


# plane mode's group loop: lcm(width, LANES) pixels a group, the groups away from the top and
# bottom padding one loop over one copy of the code (a 56x56 plane was 196 unrolled vectors)
@pytest.mark.parametrize("size,kernel,pad,expected", [
    (56, 3, 1, (7, 1, 27)),  # mobilenetv2: 28 groups of 2 rows, the first and last unrolled
    (28, 3, 1, (7, 1, 6)),  # groups of 4 rows
    (64, 3, 1, (4, 2, 62)),  # a group is one row; row 1 (and 62) reads one pixel past the plane: masked
    (20, 5, 2, (5, 1, 4)),  # 5x5: two rows of padding fit in a 4-row group
    (14, 3, 1, (7, 0, 0)),  # 196 pixels, one group of 112: nothing to loop
    (7, 3, 1, (7, 0, 0)),  # less than one group
])
def test_plane_groups(size, kernel, pad, expected):
    w = Window(size, size, size, size, kernel, kernel, (1, 1), (1, 1), (pad, pad))
    assert plane_mode(w)
    for target in cpus_to_check():
        assert plane_groups(w, target) == expected


@pytest.mark.parametrize("x_shape", [(1, 2, 56, 56), (2, 3, 28, 28), (1, 2, 40, 20), (1, 2, 30, 24)])
@pytest.mark.parametrize("epilogue", ["bias_relu6", "residual_tanh", "two_consumers"])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_depthwise_plane_group_loops(x_shape, epilogue, target):
    # looped groups against the reference, with each kind of epilogue (vector: bias and
    # clip; a residual loaded as a vector and tanh lane by lane; a second output)
    if epilogue == "bias_relu6":
        make = depthwise_relu6(x_shape, (3, 3))
    else:
        make = conv2d(x_shape, x_shape[1], (3, 3), epilogue, groups=x_shape[1], padding=((1, 1), (1, 1)))
    w = conv_window(next(n for n in make().nodes if n.op == "conv"))
    per_group, first, end = plane_groups(w, target)
    assert plane_mode(w) and end - first >= 2
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert DEPTHWISE_EMITTER in emitters(plan)


@pytest.mark.parametrize("x_shape,strides,padding", [
    ((1, 2, 65, 64), (1, 1), ((1, 1), (1, 1))),  # more than MAX_PLANE_VECTORS vectors
    ((1, 2, 14, 14), (2, 2), ((1, 1), (1, 1))),  # stride 2
    ((1, 2, 14, 14), (1, 1), ((1, 1), (0, 0))),  # output rows narrower than the input's
    ((1, 2, 3, 5), (1, 1), ((1, 1), (1, 1))),  # a plane smaller than one vector
])
def test_depthwise_rows_where_planes_do_not_apply(x_shape, strides, padding):
    make = depthwise_relu6(x_shape, (3, 3), strides, padding)
    conv = next(n for n in make().nodes if n.op == "conv")
    assert not plane_mode(conv_window(conv))
    plan = check(make, feeds_for(make), pieces=3)
    assert emitters(plan) == [DEPTHWISE_EMITTER]


# rows of 2 to MAX_UNROLLED_BLOCKS blocks: inner rows run their blocks at compile-time columns
# (constant column masks), border rows the checked loop
@pytest.mark.parametrize("x_shape,strides,padding", [
    ((1, 3, 33, 128), (1, 1), ((1, 1), (1, 1))),  # MAX_UNROLLED_BLOCKS blocks
    ((1, 2, 33, 130), (1, 1), ((1, 1), (1, 1))),  # one more: looped
    ((1, 3, 9, 60), (2, 2), ((1, 1), (1, 1))),  # stride 2: 30 columns, the last block overlapping
    ((1, 2, 40, 37), (1, 1), ((0, 2), (3, 0))),  # one-sided padding
])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_depthwise_unrolled_row_blocks(x_shape, strides, padding, target):
    make = depthwise_relu6(x_shape, (3, 3), strides, padding)
    w = conv_window(next(n for n in make().nodes if n.op == "conv"))
    assert not plane_mode(w) and w.blocks > 1
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert emitters(plan) == [DEPTHWISE_EMITTER]


def test_depthwise_plane_nan_stays_in_its_windows():
    # a padding lane of a plane-mode tap reads the row before or after (then zeroed): a NaN
    # there must not leak into the neighbouring row's ends
    make = conv2d((1, 2, 7, 7), 2, (3, 3), "none", groups=2, padding=((1, 1), (1, 1)))
    feeds = feeds_for(make)
    feeds["x"][0, 0, 2, 6] = np.nan
    feeds["x"][0, 1, 4, 0] = -np.inf
    got, plan = compile_and_run(make(), feeds)
    expected = interpret(make(), feeds)[0]
    assert emitters(plan) == [DEPTHWISE_EMITTER]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    np.testing.assert_allclose(got[0], expected, rtol=2e-5, atol=2e-5)


def test_depthwise_channel_multiplier():
    make = depthwise_relu6((1, 3, 10, 21), (3, 3), multiplier=3)
    assert emitters(check(make, feeds_for(make), pieces=2)) == [DEPTHWISE_EMITTER]


@pytest.mark.parametrize("epilogue", ["none", "residual_tanh", "two_consumers"])
@pytest.mark.parametrize("width", [5, 33])
def test_depthwise_epilogues(epilogue, width):
    make = conv2d((2, 6, 9, width), 6, (3, 3), epilogue, groups=6, padding=((1, 1), (1, 1)))
    plan = check(make, feeds_for(make), pieces=2)
    assert DEPTHWISE_EMITTER in emitters(plan)


@pytest.mark.parametrize("epilogue", ["residual_tanh", "two_consumers"])
@pytest.mark.parametrize("width", [120, 200])  # rows (planes over MAX_PLANE_VECTORS): unrolled blocks, looped
def test_depthwise_row_epilogues(epilogue, width):
    make = conv2d((1, 3, 40, width), 3, (3, 3), epilogue, groups=3, padding=((1, 1), (1, 1)))
    assert not plane_mode(conv_window(next(n for n in make().nodes if n.op == "conv")))
    plan = check(make, feeds_for(make), pieces=2)
    assert DEPTHWISE_EMITTER in emitters(plan)


def test_ungrouped_conv_with_few_outputs():
    # lenet's first conv: 1 input channel, 6 outputs (6 of 16 lanes if packed): vectorized along pixels here
    # (its 5x5 window reads an explicitly padded input: the pad is a kernel of its own)
    make = conv2d((1, 1, 28, 28), 6, (5, 5), "bias_relu", groups=1, padding=((2, 2), (2, 2)))
    assert emitters(check(make, feeds_for(make), pieces=3)) == [None, DEPTHWISE_EMITTER]


def test_narrow_groups_of_two_channels():
    # 12 outputs in 4 groups of 3 over 2 input channels each: too narrow for the packed conv
    make = conv2d((1, 8, 11, 19), 12, (3, 3), groups=4, strides=(2, 1), padding=((1, 1), (0, 2)))
    assert emitters(check(make, feeds_for(make), pieces=3)) == [DEPTHWISE_EMITTER]


def test_depthwise_split_ranges_equal_the_full_run():
    make = depthwise_relu6((1, 4, 21, 37), (3, 3), strides=(2, 2))
    feeds = feeds_for(make)
    whole, _ = compile_and_run(make(), feeds, pieces=1)
    split, _ = compile_and_run(make(), feeds, pieces=7)
    np.testing.assert_array_equal(whole[0], split[0])


def test_depthwise_nan_and_inf_reach_only_their_windows():
    make = conv2d((1, 2, 6, 20), 2, (3, 3), "none", groups=2, padding=((1, 1), (1, 1)))
    feeds = feeds_for(make)
    feeds["x"][0, 0, 2, 3] = np.nan
    feeds["x"][0, 1, 5, 19] = np.inf
    got, plan = compile_and_run(make(), feeds)
    expected = interpret(make(), feeds)[0]
    assert emitters(plan) == [DEPTHWISE_EMITTER]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    np.testing.assert_allclose(got[0], expected, rtol=2e-5, atol=2e-5)


def test_does_not_take_convs_with_too_many_taps():
    make = conv2d((1, 4, 12, 12), 4, (9, 9), groups=4, padding=((4, 4), (4, 4)))  # 81 taps: elemental
    plan = check(make, feeds_for(make))
    assert emitters(plan) == [None]


def test_does_not_take_packed_convs():
    make = conv2d((1, 3, 9, 9), 16, (3, 3), padding=((1, 1), (1, 1)))
    assert emitters(check(make, feeds_for(make))) == [CONV_EMITTER]


def test_does_not_take_transposed_convs():
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, (1, 3, 5, 6)))
        b = Builder(g)
        w = b.constant(np.random.default_rng(1).standard_normal((3, 1, 3, 3)).astype(np.float32))
        g.add_output(b.op("conv", [x, w], strides=(1, 1), padding=((2, 2), (2, 2)), dilation=(1, 1), groups=3,
                          lhs_dilation=(2, 2)), "y")
        return g
    assert emitters(check(make, feeds_for(make))) == [None]


# -- pooling -----------------------------------------------------------------------
@pytest.mark.parametrize("x_shape,kind,window,strides,padding,window_dilation", [
    ((1, 64, 112, 112), "max", (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),  # resnet18 max pool
    ((1, 3, 17, 17), "max", (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),
    ((2, 3, 9, 40), "min", (2, 3), (1, 3), ((0, 1), (2, 2)), (1, 1)),
    ((1, 2, 23, 37), "sum", (3, 3), (2, 2), ((1, 2), (1, 2)), (2, 1)),  # ceil-mode like high padding, dilation
    ((1, 3, 7, 7), "max", (7, 7), (1, 1), ((0, 0), (0, 0)), (1, 1)),  # global: one output per plane
    ((1, 2, 70, 3), "sum", (70, 1), (1, 1), ((0, 0), (0, 0)), (1, 1)),  # taller than MAX_TAPS: looped rows
    ((2, 2, 2), "max", (2, 2), (1, 1), ((3, 3), (3, 3)), (1, 1)),  # windows wholly in the padding: -inf
    ((3, 5, 20), "max", (1, 3), (1, 2), ((0, 0), (1, 1)), (1, 1)),  # 1-d pooling on [N, C, W]
    # YOLOv5's SPP block (issue 9): windows as wide as the row, rows loop (over MAX_TAPS taps);
    # on AVX2 the last taps' masks have an all-false upper half
    ((1, 3, 13, 13), "max", (13, 13), (1, 1), ((6, 6), (6, 6)), (1, 1)),
    ((1, 2, 13, 13), "max", (9, 9), (1, 1), ((4, 4), (4, 4)), (1, 1)),
    ((1, 2, 9, 9), "max", (9, 9), (1, 1), ((4, 4), (4, 4)), (1, 1)),
])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_pool(x_shape, kind, window, strides, padding, window_dilation, target):
    make = pool(x_shape, kind, window, strides, padding, window_dilation)
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert emitters(plan) == [POOL_EMITTER]


def test_average_pool_epilogue():
    make = pool((1, 4, 15, 33), "sum", (3, 3), (2, 2), ((1, 1), (1, 1)), epilogue="average")
    assert emitters(check(make, feeds_for(make), pieces=2)) == [POOL_EMITTER]


def test_max_pool_propagates_nan():
    make = pool((1, 1, 6, 20), "max", (3, 3), (2, 2), ((1, 1), (1, 1)))
    feeds = feeds_for(make)
    feeds["x"][0, 0, 2, 4] = np.nan
    feeds["x"][0, 0, 5, 0] = -np.inf
    got, plan = compile_and_run(make(), feeds, pieces=2)
    expected = interpret(make(), feeds)[0]
    assert emitters(plan) == [POOL_EMITTER]
    np.testing.assert_array_equal(got[0], expected.astype(np.float32))  # NaN == NaN here


def test_pool_split_ranges_equal_the_full_run():
    make = pool((2, 3, 19, 2 * LANES + 5), "max", (3, 3), (2, 2), ((1, 1), (1, 1)))
    feeds = feeds_for(make)
    whole, _ = compile_and_run(make(), feeds, pieces=1)
    split, _ = compile_and_run(make(), feeds, pieces=5)
    np.testing.assert_array_equal(whole[0], split[0])


@pytest.mark.parametrize("make", [
    pool((1, 3, 8, 8), "max", (2, 2), base_dilation=(2, 2)),  # base dilation
    pool((1, 2, 0, 6), "max", (1, 2), padding=((1, 1), (0, 0))),  # size-0 input, every window in the padding
], ids=["base_dilation", "size_0_input"])
def test_pool_declines_and_falls_back(make):
    got, plan = compile_and_run(make(), feeds_for(make))
    assert emitters(plan) == [None]
    np.testing.assert_allclose(got[0], interpret(make(), feeds_for(make))[0], rtol=1e-6)


def test_pool_declines_windows_over_channels():
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, (1, 6, 5, 5)))
        y = Builder(g).op("reduce_window", [x], kind="max", window=(1, 3, 1, 1), strides=(1, 1, 1, 1),
                          padding=((0, 0), (1, 1), (0, 0), (0, 0)))
        g.add_output(y, "y")
        return g
    assert emitters(check(make, feeds_for(make))) == [None]
