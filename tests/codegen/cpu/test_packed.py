"""Packed dot/conv kernels (codegen/cpu/packed_dot.py, packed_conv.py) vs the reference interpreter.

Each graph goes through the default pipeline (layout pass included), is
compiled for the host, and run whole and split into thread-sized pieces
(last piece first: work items must be independent). Each test also checks
which body emitter took the kernel, so a silent fallback to the elemental
path fails.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
import pytest

from llvmlite import ir

from aot.codegen.cpu import CpuTarget, emit_cpu, optimize
from aot.codegen.cpu.bodies import body_emitter
from aot.codegen.cpu.link import link_shared
from aot.codegen.loops import const_i64
from aot.codegen.math import F32
from aot.codegen.cpu.packed_conv import CONV_EMITTER
from aot.codegen.cpu.packed_dot import DOT_EMITTER
from aot.codegen.cpu.vector import masked_load, registers_per_vector, store_vector
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Value
from aot.ir.ops import Packing
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from bodies_util import (HOST, TOL, aligned, bias_relu, check, compile_and_run, conv2d, dense, emitters, feeds_for,
                         load_shared, seeded_constant)
from targets_util import cpus_to_check, host_runs


# -- dot ---------------------------------------------------------------------------
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 5, 7), (7, 13, 33), (13, 1, 50), (6, 64, 32), (17, 31, 100)])
def test_dot_bias_relu_odd_sizes(m, k, n):
    make = dense(m, k, n)
    plan = check(make, feeds_for(make), pieces=3)
    assert emitters(plan) == [DOT_EMITTER]


@pytest.mark.parametrize("epilogue", ["none", "residual_tanh", "two_consumers"])
def test_dot_epilogues(epilogue):
    make = dense(9, 20, 37, epilogue)
    plan = check(make, feeds_for(make), pieces=2)
    assert DOT_EMITTER in emitters(plan)


def test_dot_lhs_rank3_and_contracting_first_dim():
    make = dense(6, 10, 18, lhs_shape=(2, 3, 10))
    assert emitters(check(make, feeds_for(make))) == [DOT_EMITTER]
    make = dense(5, 12, 20, lhs_shape=(12, 5), contract=0)  # x^T @ W: lhs read through the elemental emitter
    assert emitters(check(make, feeds_for(make))) == [DOT_EMITTER]


def test_dot_size_zero_rows_falls_back_and_runs():
    make = dense(0, 8, 20)
    got, plan = compile_and_run(make(), feeds_for(make))
    assert got[0].shape == (0, 20)
    assert DOT_EMITTER not in emitters(plan)


def test_dot_nan_and_inf_propagate():
    make = dense(3, 4, 5, "none")
    feeds = feeds_for(make)
    feeds["x"][0, 1] = np.nan
    feeds["x"][1, 2] = np.inf
    got, _ = compile_and_run(make(), feeds)
    expected = interpret(make(), feeds)[0]
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    np.testing.assert_allclose(got[0][2], expected[2], **TOL)


@pytest.mark.parametrize("make", [dense(3, 4, 20, "bias_relu"),
                                  conv2d((1, 4, 5, 7), 20, (3, 3), "bias_relu", padding=((1, 1), (1, 1)))],
                         ids=["dot", "conv"])
def test_a_relu_epilogue_keeps_nan(make):
    # ReLU is a max against the constant 0, on x86 a compare and select in the vector
    # epilogue (math.bounded_minmax): NaN must still come through it
    feeds = feeds_for(make)
    feeds["x"].reshape(-1)[5] = np.nan
    got, _ = compile_and_run(make(), feeds)
    expected = interpret(make(), feeds)[0]
    assert np.isnan(expected).any()
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(expected))
    keep = ~np.isnan(expected)
    np.testing.assert_allclose(got[0][keep], expected[keep], rtol=1e-4, atol=1e-4)


# -- conv --------------------------------------------------------------------------
@pytest.mark.parametrize("x_shape,o,kernel,groups,strides,padding,dilation", [
    ((1, 1, 28, 28), 20, (5, 5), 1, (1, 1), ((2, 2), (2, 2)), (1, 1)),  # lenet conv1, widened (6 outputs: depthwise.py)
    ((1, 6, 14, 14), 16, (5, 5), 1, (1, 1), ((0, 0), (0, 0)), (1, 1)),  # lenet conv2
    ((2, 3, 9, 11), 20, (3, 2), 1, (2, 1), ((1, 2), (0, 1)), (1, 2)),
    ((1, 4, 9, 30), 32, (3, 3), 2, (1, 2), ((1, 1), (1, 1)), (2, 1)),
    ((1, 3, 5, 5), 17, (1, 1), 1, (1, 1), ((1, 0), (0, 1)), (1, 1)),  # padded 1x1 (unpadded ones: conv1x1.py)
    ((1, 2, 3, 3), 17, (3, 3), 1, (1, 1), ((2, 2), (2, 2)), (1, 1)),  # every row and column touches padding
    ((1, 8, 6, 20), 64, (3, 3), 2, (1, 1), ((1, 1), (1, 1)), (1, 1)),  # 16 lanes: paired blocks inside each group
    ((1, 3, 7, 9), 48, (3, 3), 1, (1, 1), ((1, 1), (1, 1)), (1, 1)),  # 16 lanes: 3 blocks, one per item
])
def test_conv_bias_relu(x_shape, o, kernel, groups, strides, padding, dilation):
    make = conv2d(x_shape, o, kernel, "bias_relu", groups, strides, padding, dilation)
    plan = check(make, feeds_for(make), pieces=3)
    # a stem (few channels, a large padded window: lenet's conv1) reads an explicitly padded
    # input (rewrite/layout.py), a kernel of its own on the elemental path
    stem = x_shape[1] <= 4 and kernel[0] * kernel[1] >= 25 and padding != ((0, 0), (0, 0))
    assert emitters(plan) == [None, CONV_EMITTER] if stem else [CONV_EMITTER]


@pytest.mark.parametrize("epilogue", ["none", "residual_tanh", "two_consumers"])
def test_conv_epilogues(epilogue):
    make = conv2d((2, 3, 7, 13), 21, (3, 3), epilogue, padding=((1, 1), (1, 1)))
    plan = check(make, feeds_for(make), pieces=2)
    assert CONV_EMITTER in emitters(plan)


def residual_block(x_shape: tuple[int, ...], o: int, stride: int, down_kernel: int = 1, down_padding: int = 0,
                   relu_before_join: bool = False) -> Callable[[], Graph]:
    """relu(conv3x3(h) + b2 + conv(x, Wd) + bd) with h = conv3x3 stride s of x: a ResNet downsample block."""
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, x_shape))
        b = Builder(g)
        c = x_shape[1]
        pad = ((1, 1), (1, 1))
        h = b.op("conv", [x, seeded_constant(b, (o, c, 3, 3), 5)], strides=(stride, stride), padding=pad, dilation=(1, 1), groups=1)
        h = bias_relu(b, h, 1, 6)
        main = b.op("conv", [h, seeded_constant(b, (o, o, 3, 3), 7)], strides=(1, 1), padding=pad, dilation=(1, 1), groups=1)
        main = b.op("add", [main, b.op("broadcast", [seeded_constant(b, (o,), 8)], dims=(1,), shape=main.type.shape)])
        dp = ((down_padding, down_padding),) * 2
        down = b.op("conv", [x, seeded_constant(b, (o, c, down_kernel, down_kernel), 9)], strides=(stride, stride), padding=dp,
                    dilation=(1, 1), groups=1)
        down = b.op("add", [down, b.op("broadcast", [seeded_constant(b, (o,), 10)], dims=(1,), shape=down.type.shape)])
        if relu_before_join:
            zero = b.op("broadcast", [b.constant(np.float32(0))], dims=(), shape=down.type.shape)
            down = b.op("max", [down, zero])
        zero = b.op("broadcast", [b.constant(np.float32(0))], dims=(), shape=main.type.shape)
        g.add_output(b.op("max", [b.op("add", [main, down]), zero]), "y")
        return g
    return make


@pytest.mark.parametrize("x_shape,o,stride,down_kernel,down_padding", [
    ((1, 8, 14, 14), 16, 2, 1, 0),  # ResNet downsample: 1x1 stride 2
    ((2, 5, 9, 11), 21, 2, 1, 0),  # odd sizes, output channels padded to the lanes (unpack slice)
    ((1, 4, 8, 30), 16, 1, 3, 1),  # a padded 3x3 partner: its columns are bounds-checked
])
def test_downsample_conv_accumulates_into_the_residual_conv(x_shape, o, stride, down_kernel, down_padding):
    make = residual_block(x_shape, o, stride, down_kernel, down_padding)
    plan = check(make, feeds_for(make), pieces=3)
    # conv1 and conv2+downsample: the downsample conv has no kernel (or buffer) of its own
    assert emitters(plan) == [CONV_EMITTER, CONV_EMITTER]
    assert sum(1 for n in plan.kernels[1].nodes if n.op == "packed_conv") == 2


@pytest.mark.parametrize("cpu,per_item,runs,planes", [("haswell", 1, 2, False), ("skylake-avx512", 2, 1, True)])
def test_conv_pairs_channel_blocks_only_with_avx512(cpu, per_item, runs, planes):
    target = CpuTarget.from_name(cpu)
    make = residual_block((1, 8, 14, 14), 32, 2)
    plan = run_pipeline(make())
    # 2 blocks x 7 rows x runs of the 7 output columns: AVX2's 12 accumulator ymm hold 6 pixels
    # of 16 lanes (two runs), AVX-512's 24 zmm a pair of blocks x 8 pixels (one run). The
    # second conv's pair of blocks has 37 KB of weights (32 channels x 9 taps x 2 x 64 B),
    # more than L1: an item is its whole 7x7 plane (packed_conv._channel_chunking); one block's
    # 18 KB on AVX2 is not
    second = 2 // per_item if planes else 14 * runs // per_item
    assert [CONV_EMITTER.work_items(k, target) for k in plan.kernels] == [14 * runs // per_item, second]
    if not host_runs(target):
        pytest.skip(f"this host cannot run {cpu} code")
    feeds = feeds_for(make)
    got, _ = compile_and_run(make(), feeds, 2, target)
    # AVX2 sums a row's taps column by column (packed_conv._taps_unrolled): another f32 order
    # than the reference's over 32 x 9 products, a few units of 1e-5 apart
    for g, e in zip(got, interpret(make(), feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)


def test_downsample_conv_with_relu_before_the_join_keeps_its_kernel():
    make = residual_block((1, 8, 10, 10), 16, 2, relu_before_join=True)
    plan = check(make, feeds_for(make), pieces=2)
    assert emitters(plan) == [CONV_EMITTER] * 3


def test_depthwise_conv_is_not_packed():
    # depthwise convs take codegen/cpu/depthwise.py (test_depthwise_pool.py)
    make = conv2d((1, 8, 6, 6), 8, (3, 3), groups=8, padding=((1, 1), (1, 1)))
    plan = check(make, feeds_for(make))
    assert CONV_EMITTER not in emitters(plan)


# -- masked loads --------------------------------------------------------------------
def _masked_load_module(target: CpuTarget, lanes: int, constant: bool = False) -> ir.Module:
    """f<k>(src, dst, take) for k in 0..lanes: dst = masked_load(src, mask = take ? first k lanes : none, fill -1).

    The mask is select(take, constant prefix, zero), the shape of the pool's border masks
    (a row check and constant columns): LLVM can prove parts of it all-false but not the whole.
    With `constant` the mask is the prefix itself (take is ignored), as the pointwise conv's
    tail and the unrolled depthwise rows pass it: masked_load decides at compile time."""
    module = ir.Module(name="masked")
    module.triple = target.triple
    ptr = F32.as_pointer()
    for k in range(lanes + 1):
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ir.IntType(32)]), name=f"f{k}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        src, dst, take = fn.args
        taken = b.icmp_unsigned("!=", take, ir.Constant(ir.IntType(32), 0))

        def lane_mask(first: int, count: int, k: int = k, taken: ir.Value = taken) -> ir.Value:
            mask_type = ir.VectorType(ir.IntType(1), count)
            prefix = ir.Constant(mask_type, [first + lane < k for lane in range(count)])
            return prefix if constant else b.select(taken, prefix, ir.Constant(mask_type, [0] * count))
        store_vector(b, dst, const_i64(0), masked_load(b, target, src, const_i64(0), lanes, lane_mask, -1.0, "x"), "y")
        b.ret_void()
    return module


@pytest.mark.parametrize("constant", [False, True], ids=["runtime_mask", "constant_mask"])
@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_masked_load_reads_only_its_lanes_on_every_instruction_set(target, constant):
    # issue 9: LLVM's own split of a 16-lane masked load for AVX2 read the lanes of an all-false half.
    # A constant partial mask was taken for all-true (its elements are ir.Constant objects,
    # always truthy) and loaded unmasked: the fill was lost and lanes past the buffer read.
    lanes = 16
    machine = target.target_machine()
    module = _masked_load_module(target, lanes, constant)
    lib = load_shared(link_shared(machine.emit_object(optimize(module, machine)), target))
    src = np.arange(1, lanes + 1, dtype=np.float32)
    for k in range(lanes + 1):
        for take in (0, 1):
            dst = np.zeros(lanes, np.float32)
            getattr(lib, f"f{k}")(ctypes.c_void_p(src.ctypes.data), ctypes.c_void_p(dst.ctypes.data), ctypes.c_int32(take))
            expected = np.where(np.arange(lanes) < (k if take or constant else 0), src, np.float32(-1.0))
            np.testing.assert_array_equal(dst, expected, err_msg=f"prefix {k}, take {take}")


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
@pytest.mark.parametrize("x_shape,o,kernel,groups,strides,padding", [
    ((1, 16, 41), 16, (3,), 1, (2,), ((0, 0),)),     # wav2vec2's feature extractor conv
    ((1, 32, 30), 32, (9,), 2, (1,), ((4, 4),)),     # grouped, padded: a positional conv
    ((2, 3, 25), 20, (5,), 1, (3,), ((2, 1),)),      # padded output channels
])
def test_one_d_conv_runs_on_the_packed_conv_body(x_shape, o, kernel, groups, strides, padding, target):
    # issue 10: 1-d convs took the elemental path (wav2vec2 at 9x onnxruntime's time)
    make = conv2d(x_shape, o, kernel, "bias_relu", groups, strides, padding, (1,))
    plan = check(make, feeds_for(make), pieces=2, target=target)
    assert CONV_EMITTER in [body_emitter(k, target) for k in plan.kernels]


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
def test_grouped_conv_in_eight_lane_blocks_runs_on_the_packed_conv_body(target):
    # 8 outputs a group: on AVX-512 the blocks are half a register wide
    make = conv2d((1, 32, 40), 32, (17,), "bias_relu", 4, (1,), ((8, 8),), (1,))
    plan = check(make, feeds_for(make), pieces=2, target=target)
    assert CONV_EMITTER in [body_emitter(k, target) for k in plan.kernels]


@pytest.mark.parametrize("target", cpus_to_check(), ids=lambda t: t.cpu)
@pytest.mark.parametrize("m,k,n", [(13, 7, 37), (32, 16, 50), (6, 5, 48), (1, 3, 5)])
def test_plain_dot_stores_whole_vectors_and_the_real_lanes_of_the_last_block(m, k, n, target):
    # an LM head: the dot and its unpack chain alone store accumulators directly
    from aot.codegen.cpu.packed_dot import _dot_match, _stores_plainly

    make = dense(m, k, n, "none")
    plan = check(make, feeds_for(make), pieces=3, target=target)
    (kernel,) = plan.kernels
    match = _dot_match(kernel, target)
    assert match is not None and _stores_plainly(kernel, match.epilogue)


@pytest.mark.parametrize("rows,k,n,model_limit", [
    (13, 64, 4200, 1 << 19),  # a weight over L2 in a model whose weights overflow L3: from DRAM
    (13, 64, 4200, 16 << 20),  # the same weight in a model that stays in L3 between calls
    (40, 64, 1000, 16 << 20),  # from L3, with enough rows to hide the prefetches on AVX2
    (13, 64, 400, 0),  # a weight that stays in L2 (500 columns pack to 512: 128 KiB, prefetched on AVX2)
])
def test_a_weight_read_from_memory_on_every_call_is_prefetched_a_unit_ahead(rows, k, n, model_limit, monkeypatch):
    # the last unit prefetches past the weight's end: harmless, and the results stay right
    from aot.codegen.cpu import packed_dot

    monkeypatch.setattr(packed_dot, "PREFETCH_MIN_MODEL_WEIGHT_BYTES", model_limit)
    make = dense(rows, k, n, "none")
    plan = check(make, feeds_for(make), pieces=3)
    assert emitters(plan) == [DOT_EMITTER]
    streams = packed_dot._streams_weights(k * n * 4, rows, len(plan.weights), registers_per_vector(HOST, 16))
    llvm_ir = emit_cpu(plan, HOST).llvm_ir
    assert ("llvm.prefetch" in llvm_ir) == streams


@pytest.mark.parametrize("weight_bytes,rows,model_bytes,per_vector,streams", [
    (2 << 20, 1, 32 << 20, 1, True),  # from DRAM: prefetched even for one row (an LM head)
    (2 << 20, 1, 8 << 20, 1, False),  # from L3, one row: the prefetches would take load slots
    (1 << 20, 128, 12 << 20, 2, True),  # bert_mini's FFN weights, AVX2
    (1 << 20, 128, 12 << 20, 1, False),  # the same on AVX-512: the hardware prefetcher's
    (1 << 20, 8, 12 << 20, 2, True),  # 8 rows on AVX2: each weight vector is two FMAs per row
    (1 << 20, 4, 12 << 20, 2, False),  # 4 rows: too few FMAs per weight vector
    (64 << 10, 128, 12 << 20, 2, False),  # small enough to stay in L2
])
def test_weights_from_l3_are_prefetched_where_the_fmas_hide_it(weight_bytes, rows, model_bytes, per_vector, streams):
    from aot.codegen.cpu import packed_dot

    assert packed_dot._streams_weights(weight_bytes, rows, model_bytes, per_vector) == streams


# -- the layout is explicit: the bodies match packed ops, never shapes ---------------
def test_a_plain_dot_whose_weight_is_shaped_like_a_packed_one_is_not_taken_for_one():
    # [NB, K, L] contracted on dim 1 is what a packed weight looks like: once the body
    # recognised it by that shape; now only a packed_dot (ops/packed.py) is packed
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, (4, 8)))
        b = Builder(g)
        y = b.op("dot", [x, seeded_constant(b, (2, 8, 16), 1)], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(1,))
        g.add_output(b.op("reshape", [y], shape=(4, 32)), "y")
        return g
    plan = check(make, feeds_for(make))
    assert not any(n.op == "packed_dot" for k in plan.kernels for n in k.nodes)
    assert DOT_EMITTER not in emitters(plan)


def _reshaped(make_contraction: Callable[[Builder, Value], Value], x_shape: tuple[int, ...],
              shape: tuple[int, ...]) -> Callable[[], Graph]:
    """contraction(x), then a reshape with nothing between (the simplifier merged an unpack
    chain's reshape into such a reshape, and the body stored the packed layout)."""
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.F32, x_shape))
        b = Builder(g)
        g.add_output(b.op("reshape", [make_contraction(b, x)], shape=shape), "y")
        return g
    return make


def test_a_reshape_after_a_packed_dot_leaves_it_on_its_body_with_its_own_type():
    def dot(b: Builder, x: Value) -> Value:
        return b.op("dot", [x, seeded_constant(b, (24, 32), 1)], lhs_batch=(), rhs_batch=(), lhs_contract=(1,),
                    rhs_contract=(0,))
    make = _reshaped(dot, (6, 24), (6, 2, 16))
    plan = check(make, feeds_for(make), pieces=2)
    (kernel,) = [k for k in plan.kernels if DOT_EMITTER is body_emitter(k, HOST)]
    # the dot's own [6, 32], not the packed [6, 2, 16] (which the reshape asks for, by design)
    assert [n.op for n in kernel.nodes] == ["packed_dot"] and kernel.root.type.shape == (6, 32)


def test_a_flatten_after_a_packed_conv_leaves_it_on_its_body_with_its_own_type():
    def conv(b: Builder, x: Value) -> Value:
        return b.op("conv", [x, seeded_constant(b, (16, 3, 3, 3), 3)], strides=(1, 1), padding=((1, 1), (1, 1)),
                    dilation=(1, 1), groups=1)
    make = _reshaped(conv, (1, 3, 6, 6), (1, 16 * 36))
    plan = check(make, feeds_for(make), pieces=2)
    (kernel,) = [k for k in plan.kernels if CONV_EMITTER is body_emitter(k, HOST)]
    assert kernel.root.producer.op == "packed_conv" and kernel.root.type.shape == (1, 16, 6, 6)
    # no [N, OB, OH, OW, L] intermediate, and no transpose kernel to unpack one
    assert all(n.out.type.rank <= 4 and n.op != "transpose" for k in plan.kernels for n in k.nodes)


def _packed_graph(op: str, x_shape: tuple[int, ...], w: np.ndarray, packing: Packing, dtype: DType = DType.F32,
                  **attrs: object) -> Callable[[], Graph]:
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(dtype, x_shape))
        b = Builder(g)
        wp = b.constant(packing.pack(w).astype(dtype.to_numpy()))
        y = b.op(op, [x, wp], **attrs, **packing.attrs())
        g.add_output(b.op("tanh", [y]), "y")
        return g
    return make


@pytest.mark.parametrize("packing,dtype", [(Packing(8, reversed=True), DType.F32), (Packing(8), DType.F64)])
def test_a_packed_dot_the_gemm_body_declines_runs_elementally(packing, dtype):
    # lanes in reverse (the conv body's order) or f64: the packed layout is read element by element
    w = np.random.default_rng(4).standard_normal((13, 7)).astype(np.float32)  # [N, K]
    make = _packed_graph("packed_dot", (5, 7), w, packing, dtype, lhs_contract=(1,), columns=13)
    feeds = feeds_for(make)
    plan = run_pipeline(make(), PipelineOptions(passes=default_passes(HOST.vector_lanes)))
    assert emitters(plan) == [None]
    got = _run_any_dtype(make, feeds)
    np.testing.assert_allclose(got, interpret(make(), feeds)[0], **TOL)


@pytest.mark.parametrize("groups", [1, 2])
def test_a_packed_conv_in_plain_lane_order_runs_elementally(groups):
    w = np.random.default_rng(5).standard_normal((16, 4 // groups, 3, 3)).astype(np.float32)
    make = _packed_graph("packed_conv", (1, 4, 6, 7), w, Packing(4), strides=(1, 2), padding=((1, 1), (0, 1)),
                         dilation=(1, 1), groups=groups, channels=16)
    feeds = feeds_for(make)
    plan = check(make, feeds, pieces=2)
    assert CONV_EMITTER not in emitters(plan)


def _run_any_dtype(make: Callable[[], Graph], feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The one output of `make()` compiled for the host, inputs in the graph's own dtypes."""
    graph = make()
    plan = run_pipeline(graph, PipelineOptions(passes=default_passes(HOST.vector_lanes)))
    lib = load_shared(emit_cpu(plan, HOST).shared_object)
    ins = [np.ascontiguousarray(feeds[v.name], dtype=v.type.dtype.to_numpy()) for v in graph.inputs]
    (out,) = [np.zeros(v.type.shape, v.type.dtype.to_numpy()) for v in graph.outputs]
    arena, weights = aligned(plan.arena_bytes), aligned(len(plan.weights))
    weights[:len(plan.weights)] = np.frombuffer(plan.weights, np.uint8)
    lib.aot_model_entry((ctypes.c_void_p * len(ins))(*[a.ctypes.data for a in ins]),
                        (ctypes.c_void_p * 1)(out.ctypes.data), ctypes.c_void_p(arena.ctypes.data),
                        ctypes.c_void_p(weights.ctypes.data))
    return out
