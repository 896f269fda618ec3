"""How codegen/cpu/packed_conv.py stores and prefetches: the in-register transposed store on
AVX-512 (every run width, partial last channel blocks, epilogues reading other inputs), the
per-channel loop elsewhere, and the prefetch of the next channel blocks' weights, each run
against the reference interpreter on every CPU code path this host runs."""
from __future__ import annotations

import re

import numpy as np
import pytest

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu import packed_conv
from aot.codegen.cpu.build import kernel_body
from aot.codegen.cpu.packed_conv import CONV_EMITTER
from aot.codegen.cpu.vector import registers_per_vector
from aot.interpreter import interpret
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from aot.plan import ExecutionPlan
from bodies_util import compile_and_run, conv2d, emitters, feeds_for
from targets_util import cpus_to_check

# 3x3 convs over 32 input channels sum 288 products in another order than the reference
CONV_TOL = dict(rtol=1e-4, atol=1e-4)
OPAQUE = '"=v,0"'  # the constraint of packed_conv._opaque's empty inline asm on x86
SCRATCH = "alloca ["  # the per-channel store's scratch of pixels x lanes floats


def _plan(make, target: CpuTarget) -> ExecutionPlan:
    return run_pipeline(make(), PipelineOptions(passes=default_passes(target.vector_lanes)))


def _body_text(plan: ExecutionPlan, target: CpuTarget) -> str:
    machine = target.target_machine()
    return "\n".join(text for i in range(len(plan.kernels)) for text in kernel_body(plan, target, i, machine).texts)


def _check_on(make, target: CpuTarget, pieces: int = 3) -> None:
    feeds = feeds_for(make)
    got, plan = compile_and_run(make(), feeds, pieces, target)
    assert emitters(plan)[0] is CONV_EMITTER
    for g, e in zip(got, interpret(make(), feeds)):
        np.testing.assert_allclose(g, e, **CONV_TOL)


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("width", [1, 2, 3, 5, 7, 8, 9, 13, 28])
def test_every_run_width_stores_each_channel_row(target, width):
    # widths 1-9 give runs of 1..8 pixels (a power of two and not: the transpose pads to one),
    # 13 and 28 split into wide and narrow runs on AVX2 (6 + 7, 6 + 6 + 6 + 5 + 5)
    _check_on(conv2d((1, 32, 3, width), 32, (3, 3), "residual_tanh", padding=((1, 1), (1, 1))), target)


@pytest.mark.parametrize("ow", [1, 5, 6, 7, 13, 28, 56, 112])
@pytest.mark.parametrize("max_pixels", [6, 8])
def test_runs_split_a_row_evenly(ow, max_pixels):
    # as few runs as max_pixels allows, wide ones first, widths one apart: no short tail run
    # whose few accumulators cannot hide the FMA latency (56 on AVX2: 6 x 6 + 4 x 5, not 9 x 6 + 2)
    make = conv2d((1, 8, 3, ow), 16, (3, 3), "bias_relu", padding=((1, 1), (1, 1)))
    conv = next(n for n in _plan(make, CpuTarget.from_name("haswell")).kernels[0].nodes if n.op == "packed_conv")
    g = packed_conv.ConvGeometry.of_conv(conv, 1, max_pixels)
    assert g.runs == -(-ow // max_pixels)
    widths = [g.pixels if r < g.wide_runs else g.narrow for r in range(g.runs)]
    assert sum(widths) == ow and max(widths) <= max_pixels and max(widths) - min(widths) <= 1
    assert [g.run_start(r) for r in range(g.runs)] == [sum(widths[:r]) for r in range(g.runs)]


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("o", [20, 40, 7])
def test_a_partial_last_channel_block_keeps_the_channel_loop(target, o):
    # 20 and 40 channels: full 16-lane blocks and a partial one in the same kernel
    _check_on(conv2d((1, 8, 6, 10), o, (3, 3), "bias_relu", padding=((1, 1), (1, 1))), target)


def test_avx512_transposes_in_registers_and_both_loop_over_channels():
    make = conv2d((1, 16, 8, 8), 32, (3, 3), "bias_relu", padding=((1, 1), (1, 1)))
    avx512, avx2 = CpuTarget.from_name("skylake-avx512"), CpuTarget.from_name("haswell")
    # the transposed rows pass through an empty inline asm (packed_conv._opaque) to a stack
    # scratch of rows, and one loop over the channels runs the epilogue (its relu: one
    # max against 0 per block, not one per channel; on x86 a compare and select, math.bounded_minmax)
    text = _body_text(_plan(make, avx512), avx512)
    assert OPAQUE in text and SCRATCH in text
    assert 0 < text.count("fcmp oge <8 x float>") <= 2
    text = _body_text(_plan(make, avx2), avx2)
    assert OPAQUE not in text and SCRATCH in text


def test_a_partial_block_branches_between_both_stores():
    make = conv2d((1, 16, 8, 8), 20, (3, 3), padding=((1, 1), (1, 1)))
    target = CpuTarget.from_name("skylake-avx512")
    text = _body_text(_plan(make, target), target)
    assert OPAQUE in text and SCRATCH in text  # full block: transposed; the partial one: the loop


def test_big_weights_of_a_big_model_are_prefetched_and_small_ones_not(monkeypatch):
    make = conv2d((1, 32, 6, 6), 64, (3, 3), padding=((1, 1), (1, 1)))
    target = CpuTarget.from_name("skylake-avx512")
    assert "llvm.prefetch" not in _body_text(_plan(make, target), target)
    monkeypatch.setattr(packed_conv, "PREFETCH_MIN_WEIGHT_BYTES", 0)
    monkeypatch.setattr(packed_conv, "PREFETCH_MIN_MODEL_WEIGHT_BYTES", 0)
    assert "llvm.prefetch" in _body_text(_plan(make, target), target)


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("x_shape,o,strides,padding", [
    ((1, 32, 7, 7), 64, (1, 1), ((1, 1), (1, 1))),  # resnet18's last stage, narrowed
    ((1, 16, 9, 11), 48, (2, 2), ((1, 1), (1, 1))),  # strided: the first tap row inside the input moves
    ((1, 8, 5, 30), 32, (1, 1), ((2, 0), (1, 1))),   # two padding rows: items whose rows 0 and 1 are skipped
    ((2, 16, 6, 6), 32, (1, 1), ((0, 0), (0, 0))),   # batch 2: the last blocks of image 0 prefetch past them
])
def test_prefetching_convs_match_the_reference(monkeypatch, target, x_shape, o, strides, padding):
    # prefetches change no result, but their addresses and the branch around them must be well formed
    monkeypatch.setattr(packed_conv, "PREFETCH_MIN_WEIGHT_BYTES", 0)
    monkeypatch.setattr(packed_conv, "PREFETCH_MIN_MODEL_WEIGHT_BYTES", 0)
    _check_on(conv2d(x_shape, o, (3, 3), "bias_relu", strides=strides, padding=padding), target)


# -- band and whole-plane items (packed_conv._channel_chunking) ------------------------
@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("x_shape,o,kernel,strides,padding,epilogue", [
    # 3 blocks (no pairs) of 64 channels x 9 taps x 64 B = 36 KB of weights each: over L1
    ((1, 64, 7, 7), 48, (3, 3), (1, 1), ((1, 1), (1, 1)), "bias_relu"),
    # batch 2, uneven padding, 80 channels: the last chunk of channels is a short one
    ((2, 80, 5, 9), 32, (3, 3), (1, 1), ((1, 1), (0, 2)), "residual_tanh"),
    ((1, 72, 9, 9), 32, (3, 3), (2, 2), ((1, 1), (1, 1)), "bias_relu"),  # strided
    ((1, 192, 12), 32, (3,), (1,), ((1, 1),), "bias_relu"),  # 1-d: one row of 192 x 3 taps
])
def test_whole_plane_items_match_the_reference(target, x_shape, o, kernel, strides, padding, epilogue):
    dilation = (1,) * len(kernel)
    make = conv2d(x_shape, o, kernel, epilogue, strides=strides, padding=padding, dilation=dilation)
    # one item per image and block (or pair of blocks), not per run of output columns
    assert CONV_EMITTER.work_items(_plan(make, target).kernels[0], target) <= x_shape[0] * -(-o // 16)
    _check_on(make, target)


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("x_shape,o,strides,epilogue,band_major", [
    # 64 channels x 9 taps x 64 B per block: over L1; a 56-wide row's scratch leaves room for a
    # few rows, and 23 rows split into bands with a shorter last one
    ((1, 64, 23, 56), 32, (1, 1), "bias_relu", True),
    ((2, 72, 40, 112), 40, (2, 2), "residual_tanh", True),  # strided, batch 2, a partial channel block
    # 4 blocks of 128 channels: 295 KB of weights, over BAND_MAJOR_MAX_WEIGHT_BYTES: block by block
    ((1, 128, 10, 56), 64, (1, 1), "bias_relu", False),
])
def test_band_items_match_the_reference(target, x_shape, o, strides, epilogue, band_major):
    make = conv2d(x_shape, o, (3, 3), epilogue, strides=strides, padding=((1, 1), (1, 1)))
    kernel = _plan(make, target).kernels[0]
    match = packed_conv._conv_match(kernel, target)
    oh = -(-x_shape[2] // strides[0])
    if registers_per_vector(target, 16) == 1:  # AVX-512: items of one run (bands not yet measured there)
        assert match is not None and not match.chunk
        _check_on(make, target)
        return
    assert match is not None and match.chunk and 1 < match.bands() < oh
    assert match.band_major() == band_major
    assert (match.bands() - 1) * match.band < oh <= match.bands() * match.band  # no empty band
    assert CONV_EMITTER.work_items(kernel, target) == x_shape[0] * -(-o // 16) // match.per_item * match.bands()
    _check_on(make, target)


@pytest.mark.parametrize("cpu,x_shape", [
    ("haswell", (1, 64, 12, 56)),  # bands of a 56-wide map
    ("x86-64-v4", (1, 64, 7, 7)),  # whole planes (AVX-512 takes no bands of wider maps)
])
def test_band_items_take_the_static_border_runs(cpu, x_shape):
    # a band item's runs reading padding columns have them at compile time too, as a run item's:
    # no input element through a select (the checked variant's cost: resnet18's 7x7 convs
    # 12% and its 56- and 28-wide ones 4-9% slower on AVX2 than with static border runs)
    target = CpuTarget.from_name(cpu)
    make = conv2d(x_shape, 32, (3, 3), "bias_relu", padding=((1, 1), (1, 1)))
    plan = _plan(make, target)
    assert packed_conv._conv_match(plan.kernels[0], target).chunk
    text = _body_text(plan, target)
    assert [line for line in text.splitlines() if re.search(r" select\s+i1 .*float", line)] == []


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
def test_a_downsample_partner_accumulates_into_whole_plane_items(target):
    from test_packed import residual_block  # the ResNet downsample block of the packed conv tests

    make = residual_block((1, 64, 14, 14), 64, 2)
    plan = _plan(make, target)
    # conv2 (64 -> 64 on 7x7) with the 1x1 stride 2 downsample conv in its accumulators
    assert sum(1 for n in plan.kernels[1].nodes if n.op == "packed_conv") == 2
    assert CONV_EMITTER.work_items(plan.kernels[1], target) <= 4
    feeds = feeds_for(make)
    got, _ = compile_and_run(make(), feeds, 3, target)
    for g, e in zip(got, interpret(make(), feeds)):
        # outputs up to ~1400, each a sum of 576 products of the first conv's ~20: f32 sums
        # in another order differ by up to ~1e-3 either way (the run-per-item body as well)
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=2e-3)


# runs reading padding columns, by count: 1 (left only), 2, 3 (two on the left: a 7-wide window,
# pad 3, runs of 1-2 pixels), more than MAX_STATIC_BORDER_RUNS (the run-time checked variant)
@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("x_shape,kernel,strides,padding,dilation", [
    ((1, 16, 5, 30), (3, 3), (1, 1), ((1, 1), (1, 0)), (1, 1)),   # the left run only
    ((1, 16, 5, 56), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),   # resnet18's rows: the first run, the last narrow one
    ((1, 8, 9, 29), (7, 7), (2, 2), ((3, 3), (3, 3)), (1, 1)),    # a stem: stride 2, pad 3
    ((1, 8, 6, 13), (3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2)),    # dilated
    ((1, 8, 5, 3), (5, 5), (1, 1), ((2, 2), (4, 4)), (1, 1)),     # wider padding than the row: every run
    ((1, 8, 4, 20), (9, 9), (1, 1), ((4, 4), (8, 8)), (1, 1)),    # more border runs than MAX_STATIC_BORDER_RUNS
])
def test_border_runs_match_the_reference(target, x_shape, kernel, strides, padding, dilation):
    _check_on(conv2d(x_shape, 32, kernel, "bias_relu", strides=strides, padding=padding, dilation=dilation), target)


@pytest.mark.parametrize("cpu", ["haswell", "x86-64-v4"])
def test_border_runs_load_plainly_without_selects(monkeypatch, cpu):
    # a 54-wide row: runs of 6 (AVX2, tap columns a loop) or 8 pixels (AVX-512, tap columns
    # unrolled), the first and the last reading padding; their columns are compile-time, so
    # no input element goes through a select (the run-time checked variant selects each one)
    target = CpuTarget.from_name(cpu)
    make = conv2d((1, 16, 5, 54), 32, (3, 3), "bias_relu", padding=((1, 1), (1, 1)))
    def input_selects(text: str) -> list[str]:  # one per input element; not the relu's, on vectors
        return [line for line in text.splitlines() if re.search(r" select\s+i1 .*float", line)]

    assert input_selects(_body_text(_plan(make, target), target)) == []
    monkeypatch.setattr(packed_conv, "MAX_STATIC_BORDER_RUNS", 0)  # the checked variant
    assert input_selects(_body_text(_plan(make, target), target))


# -- a narrow input's next rows, prefetched (packed_conv._prefetch_next_rows) ----------------
def test_a_narrow_input_prefetches_the_next_rows_and_a_wide_one_not():
    target = CpuTarget.from_name("znver3")
    stem = conv2d((1, 3, 32, 32), 32, (3, 3), "bias_relu", strides=(2, 2), padding=((1, 1), (1, 1)))
    wide = conv2d((1, 32, 8, 8), 32, (3, 3), "bias_relu", padding=((1, 1), (1, 1)))
    assert "llvm.prefetch" in _body_text(_plan(stem, target), target)
    assert "llvm.prefetch" not in _body_text(_plan(wide, target), target)


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("x_shape,o,kernel,strides,padding", [
    ((1, 3, 23, 29), 32, (3, 3), (2, 2), ((1, 1), (1, 1))),  # mobilenetv2's stem, smaller
    ((2, 4, 9, 9), 16, (3, 3), (1, 1), ((1, 1), (1, 1))),  # two images: the last row of image 0 prefetches past it
    ((1, 1, 12, 40), 16, (3, 3), (3, 3), ((0, 0), (0, 0))),  # stride over the window: rows skipped
])
def test_row_prefetching_convs_match_the_reference(target, x_shape, o, kernel, strides, padding):
    _check_on(conv2d(x_shape, o, kernel, "bias_relu", strides=strides, padding=padding), target)
