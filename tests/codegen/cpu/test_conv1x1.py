"""Pointwise conv kernel (codegen/cpu/conv1x1.py) vs the reference interpreter.

Compiled through the default pipeline (the layout pass leaves 1x1 convs
unpacked), run whole and split into pieces (last piece first), and checked
for which body emitter took each kernel so a silent fallback fails.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from aot.codegen.cpu.packed_conv import CONV_EMITTER
from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.conv1x1 import LANES, MAX_TAIL_FLOATS, POINTWISE_EMITTER, Pointwise
from aot.codegen.cpu.depthwise import DEPTHWISE_EMITTER
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Value
from bodies_util import TOL, check, compile_and_run, conv2d, emitters, feeds_for
from targets_util import cpus_to_check, host_runs


def _relu6(b: Builder, y: Value, seed: int) -> Value:
    shape = y.type.shape
    bias = np.random.default_rng(seed).standard_normal(shape[1]).astype(np.float32)
    y = b.op("add", [y, b.op("broadcast", [b.constant(bias)], dims=(1,), shape=shape)])
    low = b.op("broadcast", [b.constant(np.float32(0))], dims=(), shape=shape)
    high = b.op("broadcast", [b.constant(np.float32(6))], dims=(), shape=shape)
    return b.op("min", [b.op("max", [y, low]), high])


def pointwise(x_shape: tuple[int, ...], o: int, epilogue: str = "bias_relu6") -> Callable[[], Graph]:
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, x_shape))
        b = Builder(g)
        w = b.constant(np.random.default_rng(3).standard_normal((o, x_shape[1], 1, 1)).astype(np.float32))
        y = b.op("conv", [x, w], strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1)
        if epilogue == "bias_relu6":
            y = _relu6(b, y, 4)
        elif epilogue == "residual":
            r = g.add_input("r", y.type)
            y = b.op("add", [_relu6(b, y, 5), r])
        g.add_output(y, "y")
        return g
    return make


@pytest.mark.parametrize("c", [1, 3, 17])
@pytest.mark.parametrize("o", [1, 8, 33])
@pytest.mark.parametrize("hw", [(1, 1), (7, 7), (15, 13)])
def test_pointwise_bias_relu6_odd_sizes(c, o, hw):
    make = pointwise((1, c) + hw, o)
    plan = check(make, feeds_for(make), pieces=3)
    assert emitters(plan) == [POINTWISE_EMITTER]


@pytest.mark.parametrize("epilogue", ["none", "bias_relu6", "residual"])
@pytest.mark.parametrize("x_shape,o", [((2, 5, 9, 11), 13), ((2, 16, 12, 12), 24)])
def test_pointwise_epilogues_and_batches(epilogue, x_shape, o):
    make = pointwise(x_shape, o, epilogue)
    plan = check(make, feeds_for(make), pieces=2)
    assert emitters(plan) == [POINTWISE_EMITTER]


def test_dilation_of_a_1x1_conv_is_taken():
    make = conv2d((1, 8, 6, 6), 16, (1, 1), dilation=(2, 3))
    assert emitters(check(make, feeds_for(make), pieces=2)) == [POINTWISE_EMITTER]


def test_split_ranges_equal_the_full_run():
    make = pointwise((2, 7, 10, 10), 14, "residual")
    feeds = feeds_for(make)
    whole, plan = compile_and_run(make(), feeds)
    for pieces in (2, 5, 17):
        split, _ = compile_and_run(make(), feeds, pieces)
        np.testing.assert_array_equal(split[0], whole[0])
    assert emitters(plan) == [POINTWISE_EMITTER]


def test_nan_and_inf_stay_in_their_pixels():
    make = pointwise((1, 3, 5, 7), 9, "none")
    feeds = feeds_for(make)
    feeds["x"][0, 1, 2, 3] = np.nan
    feeds["x"][0, 2, 4, 6] = np.inf
    got, plan = compile_and_run(make(), feeds)
    expected = interpret(make(), feeds)[0]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[0][finite], expected[finite], **TOL)
    assert emitters(plan) == [POINTWISE_EMITTER]


@pytest.mark.parametrize("make,expected", [
    (conv2d((1, 8, 6, 6), 16, (1, 1), strides=(2, 2)), CONV_EMITTER),  # strided: packed
    (conv2d((1, 8, 6, 6), 16, (1, 1), padding=((1, 1), (1, 1))), CONV_EMITTER),  # padded: packed
    (conv2d((1, 3, 6, 6), 16, (3, 3)), CONV_EMITTER),  # 3x3: packed
    (conv2d((1, 8, 6, 6), 8, (1, 1), groups=4), DEPTHWISE_EMITTER),  # grouped: narrow groups
])
def test_declines_other_convs(make, expected):
    plan = check(make, feeds_for(make), pieces=2)
    assert POINTWISE_EMITTER not in emitters(plan)
    assert expected in emitters(plan)


def test_declines_a_run_time_weight():
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, (1, 4, 5, 5)))
        w = g.add_input("w", TensorType(DType.F32, (6, 4, 1, 1)))
        g.add_output(Builder(g).op("conv", [x, w], strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1), "y")
        return g
    plan = check(make, feeds_for(make))
    assert POINTWISE_EMITTER not in emitters(plan)


@pytest.mark.parametrize("cpu,vectors", [("haswell", 1), ("skylake-avx512", 4)])
def test_pointwise_tile_follows_the_target_registers(cpu, vectors):
    from aot.codegen.cpu import CpuTarget
    from aot.pipeline import run_pipeline

    target = CpuTarget.from_name(cpu)
    make = pointwise((1, 8, 16, 16), 12)  # 256 pixels: 16 vectors of 16, 2 rows of 6 channels
    plan = run_pipeline(make())
    assert [POINTWISE_EMITTER.work_items(k, target) for k in plan.kernels] == [16 // vectors * 2]
    if not host_runs(target):
        pytest.skip(f"this host cannot run {cpu} code")
    check(make, feeds_for(make), pieces=2, target=target)


# -- tail dots: the pixels past the last whole vector as dot products along the channels ----------
def _tiling(make: Callable[[], Graph], target: CpuTarget) -> Pointwise:
    from aot.codegen.cpu.conv1x1 import _epilogue, _pointwise
    from aot.pipeline import run_pipeline

    kernel = run_pipeline(make()).kernels[0]
    epilogue = _epilogue(kernel)
    assert epilogue is not None
    return _pointwise(kernel, epilogue, target)


@pytest.mark.parametrize("x_shape,o,tail", [
    ((1, 40, 7, 7), 20, 1),  # mobilenetv2's last maps: 3 vectors and a pixel; 40 channels: 2 steps and 8 more
    ((2, 16, 14, 14), 13, 4),  # 196 = 12 vectors and 4 pixels; two images
    ((1, 5, 3, 6), 7, 2),  # fewer channels than a step: the scalar remainder alone
])
@pytest.mark.parametrize("epilogue", ["none", "bias_relu6", "residual"])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_tail_pixels_as_dots(x_shape, o, tail, epilogue, target):
    make = pointwise(x_shape, o, epilogue)
    s = _tiling(make, target)
    assert s.tail == tail and s.tiled_pixels % LANES == 0
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert emitters(plan) == [POINTWISE_EMITTER]


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_tail_columns_copied_per_range_and_image(target):
    # ranges that start in the middle of an image's channel blocks, and cross into the next image
    make = pointwise((3, 24, 7, 7), 40, "residual")
    feeds = feeds_for(make)
    whole, _ = compile_and_run(make(), feeds, target=target)
    for pieces in (2, 7, 13):
        split, _ = compile_and_run(make(), feeds, pieces, target=target)
        np.testing.assert_array_equal(split[0], whole[0])


def test_no_tail_dots_where_they_do_not_pay():
    host = CpuTarget.host()
    assert _tiling(pointwise((1, 8, 16, 16), 12), host).tail == 0  # whole vectors
    assert _tiling(pointwise((1, 8, 3, 3), 12), host).tail == 0  # one partial vector: nothing to tile
    assert _tiling(pointwise((1, 8, 5, 5), 12), host).tail == 0  # 9 pixels past the vector: a vector
    wide = _tiling(pointwise((1, MAX_TAIL_FLOATS + 1, 7, 7), 2), host)
    assert wide.tail == 0  # its column would not fit the stack copy


def test_tail_dot_nan_and_inf_stay_in_their_pixels():
    make = pointwise((1, 20, 7, 7), 9, "none")
    feeds = feeds_for(make)
    feeds["x"][0, 3, 6, 6] = np.nan  # the tail pixel
    feeds["x"][0, 5, 6, 5] = np.inf  # the tiled pixel next to it
    got, plan = compile_and_run(make(), feeds)
    expected = interpret(make(), feeds)[0]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[0][finite], expected[finite], **TOL)
    assert emitters(plan) == [POINTWISE_EMITTER]


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_large_outputs_run_channel_block_major(target):
    # 8 -> 48 channels at 112x112: 2.4 MB out, over MAX_PIXEL_MAJOR_OUTPUT
    make = pointwise((1, 8, 112, 112), 48)
    assert _tiling(make, target).channel_major
    assert not _tiling(pointwise((1, 48, 112, 112), 8), target).channel_major  # output smaller than input
    assert not _tiling(pointwise((1, 8, 56, 56), 48), target).channel_major
    feeds = feeds_for(make)
    plan = check(make, feeds, pieces=3, target=target)
    assert emitters(plan) == [POINTWISE_EMITTER]
    whole, _ = compile_and_run(make(), feeds, target=target)
    split, _ = compile_and_run(make(), feeds, 7, target=target)
    np.testing.assert_array_equal(split[0], whole[0])


# -- the next channel block's weight rows, prefetched where the weight is large -------------------
def _body_text(make: Callable[[], Graph], target: CpuTarget) -> str:
    from aot.codegen.cpu.build import kernel_body
    from aot.pipeline import run_pipeline

    plan = run_pipeline(make())
    machine = target.target_machine()
    return "\n".join(text for i in range(len(plan.kernels)) for text in kernel_body(plan, target, i, machine).texts)


def test_large_weights_prefetch_the_next_blocks_rows():
    from aot.codegen.cpu.conv1x1 import PREFETCH_MIN_WEIGHT_BYTES

    target = CpuTarget.from_name("znver3")
    large = pointwise((1, 160, 7, 7), 960)  # mobilenetv2's: 614 KB
    small = pointwise((1, 16, 7, 7), 96)
    assert _tiling(large, target).prefetches_weights and 160 * 960 * 4 >= PREFETCH_MIN_WEIGHT_BYTES
    assert not _tiling(small, target).prefetches_weights
    assert "llvm.prefetch" in _body_text(large, target)
    assert "llvm.prefetch" not in _body_text(small, target)


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
@pytest.mark.parametrize("x_shape,o,epilogue", [
    ((1, 40, 7, 7), 20, "bias_relu6"),  # the tail dots' items too; the last block prefetches past the weight
    ((2, 9, 5, 6), 13, "residual"),  # two images, channel steps fewer than the tile's rows
    ((1, 8, 112, 112), 48, "none"),  # channel-block-major items
])
def test_weight_prefetching_convs_match_the_reference(monkeypatch, target, x_shape, o, epilogue):
    # prefetches change no result, but their addresses must be well formed
    from aot.codegen.cpu import conv1x1

    monkeypatch.setattr(conv1x1, "PREFETCH_MIN_WEIGHT_BYTES", 0)
    make = pointwise(x_shape, o, epilogue)
    assert _tiling(make, target).prefetches_weights
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert emitters(plan) == [POINTWISE_EMITTER]


# -- few output channels over a large input: all of them in one tile -----------------------------
def test_few_outputs_over_a_large_input_take_one_tile_on_avx512():
    from aot.codegen.cpu.conv1x1 import ALL_ROWS_MIN_INPUT_BYTES

    avx512, avx2 = CpuTarget.from_name("skylake-avx512"), CpuTarget.from_name("haswell")
    large = pointwise((1, 32, 112, 112), 16)  # mobilenetv2's 32 -> 16 conv: 1.6 MB in
    assert 32 * 112 * 112 * 4 > ALL_ROWS_MIN_INPUT_BYTES
    tile = _tiling(large, avx512)
    assert (tile.mr, tile.nv, tile.channel_blocks) == (16, 1, 1)
    assert _tiling(large, avx2).mr == 6  # a 16-lane vector is two AVX2 registers: 16 rows do not fit
    assert _tiling(pointwise((1, 32, 112, 112), 17), avx512).mr == 6  # more outputs than one tile holds
    assert _tiling(pointwise((1, 32, 16, 16), 16), avx512).mr == 6  # an input near the core


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
@pytest.mark.parametrize("epilogue", ["bias_relu6", "residual"])
def test_one_tile_of_all_outputs_matches_the_reference(target, epilogue):
    make = pointwise((1, 64, 33, 32), 13, epilogue)  # 270 KB in; 1056 pixels: 66 vectors, no tail
    assert (_tiling(make, target).mr == 13) == (target.register_lanes >= LANES)
    plan = check(make, feeds_for(make), pieces=3, target=target)
    assert emitters(plan) == [POINTWISE_EMITTER]
