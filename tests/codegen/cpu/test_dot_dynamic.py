"""Dots of two run-time operands (codegen/cpu/dot_dynamic.py) vs the reference interpreter.

Graphs go through the default pipeline, are compiled for the host and run
whole and split into pieces (last piece first: items must be independent).
Each test checks which body emitter took the dot kernel, so a silent fallback
to the elemental path fails.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from aot.codegen.cpu.dot_dynamic import DYNAMIC_DOT_EMITTER
from aot.codegen.strided_view import StridedView
from aot.codegen.cpu.kernel import kernel_work_items
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.graph import Value
from aot.pipeline import run_pipeline
from bodies_util import HOST, check, emitters, feeds_for

F32 = DType.F32


def _dot(b: Builder, lhs: Value, rhs: Value, batch: int, lc: int, rc: int) -> Value:
    dims = tuple(range(batch))
    return b.op("dot", [lhs, rhs], lhs_batch=dims, rhs_batch=dims, lhs_contract=(lc,), rhs_contract=(rc,))


def batched(batch: tuple[int, ...], m: int, k: int, n: int, rhs_n_major: bool = False) -> Callable[[], Graph]:
    """x [*batch, m, k] @ y [*batch, k, n], or y given as [*batch, n, k] (contiguous along K)."""
    def make() -> Graph:
        g = Graph()
        nb = len(batch)
        x = g.add_input("x", TensorType(F32, batch + (m, k)))
        y = g.add_input("y", TensorType(F32, batch + ((n, k) if rhs_n_major else (k, n))))
        out = _dot(Builder(g), x, y, nb, nb + 1, nb + 1 if rhs_n_major else nb)
        g.add_output(out, "z")
        return g
    return make


def attention(seq: int, heads: int, head_dim: int, epilogue: str = "none") -> Callable[[], Graph]:
    """bert's self-attention core on a fused QKV value [1, seq, 3 * heads * head_dim]:
    scores = Q @ K^T (K read in place: contiguous along K), probs = softmax, out = probs @ V
    (V sliced out of the QKV value, split into heads, transposed)."""
    def make() -> Graph:
        g = Graph()
        width = heads * head_dim
        qkv = g.add_input("qkv", TensorType(F32, (1, seq, 3 * width)))
        b = Builder(g)

        def head_split(part: int, perm: tuple[int, ...]) -> Value:
            part_v = b.op("slice", [qkv], start=(0, 0, part * width), limit=(1, seq, (part + 1) * width), stride=(1, 1, 1))
            split = b.op("reshape", [part_v], shape=(1, seq, heads, head_dim))
            return b.op("transpose", [split], perm=perm)

        q = head_split(0, (0, 2, 1, 3))
        kt = head_split(1, (0, 2, 3, 1))
        v = head_split(2, (0, 2, 1, 3))
        scores = _dot(b, q, kt, 2, 3, 2)
        if epilogue == "scale_mask":
            shape = scores.type.shape
            scale = b.op("broadcast", [b.constant(np.float32(1 / np.sqrt(head_dim)))], dims=(), shape=shape)
            mask = g.add_input("mask", TensorType(F32, (seq, seq)))
            scores = b.op("add", [b.op("mul", [scores, scale]), b.op("broadcast", [mask], dims=(2, 3), shape=shape)])
        g.add_output(scores, "scores")
        out = _dot(b, scores, v, 2, 3, 2)
        if epilogue == "scale_mask":
            out = b.op("tanh", [out])
        g.add_output(out, "out")
        return g
    return make


def _attention_feeds(make: Callable[[], Graph]) -> dict[str, np.ndarray]:
    # scaled down: raw scores feed the second dot, and f32 rounding grows with their magnitude
    return {name: 0.3 * value for name, value in feeds_for(make).items()}


def _dynamic_kernels(make: Callable[[], Graph], pieces: int = 1, feeds: dict[str, np.ndarray] | None = None) -> int:
    plan = check(make, feeds if feeds is not None else feeds_for(make), pieces)
    return sum(e is DYNAMIC_DOT_EMITTER for e in emitters(plan))


# -- sizes and layouts ------------------------------------------------------------------
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 17, 33), (17, 64, 7), (33, 7, 130), (64, 130, 17), (130, 33, 64)])
@pytest.mark.parametrize("rhs_n_major", [False, True], ids=["rhs_kn", "rhs_nk"])
def test_odd_sizes_both_rhs_layouts(m, k, n, rhs_n_major):
    assert _dynamic_kernels(batched((3,), m, k, n, rhs_n_major), pieces=3) == 1


@pytest.mark.parametrize("batch", [(), (2, 3), (1, 5)])
def test_batch_dims(batch):
    assert _dynamic_kernels(batched(batch, 9, 20, 37)) == 1


@pytest.mark.parametrize("seq,heads,head_dim", [(1, 1, 16), (7, 2, 8), (17, 4, 16), (64, 4, 64), (130, 2, 33)])
def test_attention_operands_read_in_place(seq, heads, head_dim):
    # both dots take the fast body: Q@K^T (K packed per unit) and probs@V (V read in place)
    make = attention(seq, heads, head_dim)
    assert _dynamic_kernels(make, pieces=2, feeds=_attention_feeds(make)) == 2


def test_fused_epilogue_scale_mask_and_activation():
    make = attention(33, 2, 17, "scale_mask")
    plan = check(make, _attention_feeds(make), pieces=3)
    fast = [k for k, e in zip(plan.kernels, emitters(plan)) if e is DYNAMIC_DOT_EMITTER]
    assert len(fast) == 2
    assert any("tanh" in k.ops for k in fast)


@pytest.mark.parametrize("pieces", [2, 5, 1000])
def test_split_ranges_equal_the_full_run(pieces):
    # check() runs the pieces last first into NaN-filled outputs: every item must write its own tile only
    assert _dynamic_kernels(batched((2,), 150, 40, 70, rhs_n_major=True), pieces) == 1


def test_lhs_with_two_free_dims_contracting_first():
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(F32, (2, 11, 5, 3)))  # batch 2, contract dim 1, free (5, 3)
        y = g.add_input("y", TensorType(F32, (2, 11, 19)))
        g.add_output(Builder(g).op("dot", [x, y], lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(1,), rhs_contract=(1,)), "z")
        return g
    assert _dynamic_kernels(make) == 1


def test_broadcast_and_reversed_operands():
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(F32, (9, 12)))
        y = g.add_input("y", TensorType(F32, (12, 21)))
        b = Builder(g)
        xb = b.op("broadcast", [x], dims=(1, 2), shape=(3, 9, 12))  # one lhs for every batch
        yr = b.op("reverse", [b.op("broadcast", [y], dims=(1, 2), shape=(3, 12, 21))], dims=(1, 2))
        g.add_output(_dot(b, xb, yr, 1, 2, 1), "z")
        return g
    assert _dynamic_kernels(make, pieces=2) == 1


def test_size_zero_contraction_writes_zeros():
    assert _dynamic_kernels(batched((2,), 5, 0, 18)) == 1


@pytest.mark.parametrize("m,n", [(0, 18), (5, 0)])
def test_size_zero_output_has_no_work(m, n):
    make = batched((2,), m, 4, n)
    plan = check(make, feeds_for(make))
    assert emitters(plan) == [DYNAMIC_DOT_EMITTER]
    assert [kernel_work_items(k, HOST) for k in plan.kernels] == [0]


def test_nan_and_inf_propagate():
    make = batched((2,), 7, 9, 20)
    feeds = feeds_for(make)
    feeds["x"][0, 1, 2] = np.nan
    feeds["y"][1, 3, 4] = np.inf
    plan = check(make, feeds)
    assert DYNAMIC_DOT_EMITTER in emitters(plan)


# -- fallbacks ----------------------------------------------------------------------------
def test_does_not_take_padded_operand():
    # pad is not a strided view (its zeros are not in any buffer): the kernel stays elemental
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(F32, (2, 6, 8)))
        y = g.add_input("y", TensorType(F32, (2, 5, 10)))
        b = Builder(g)
        yp = b.op("pad", [y], low=(0, 3, 0), high=(0, 0, 0), value=0.0)
        g.add_output(_dot(b, x, yp, 1, 2, 1), "z")
        return g
    assert _dynamic_kernels(make) == 0


def test_does_not_take_integer_dot():
    def make() -> Graph:
        g = Graph()
        x = g.add_input("x", TensorType(DType.I32, (4, 5)))
        y = g.add_input("y", TensorType(DType.I32, (5, 6)))
        g.add_output(_dot(Builder(g), x, y, 0, 1, 0), "z")
        return g
    assert DYNAMIC_DOT_EMITTER not in emitters(run_pipeline(make()))


# -- views ----------------------------------------------------------------------------------
def test_reshape_view_merges_only_contiguous_dims():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (4, 6, 8)))
    b = Builder(g)
    t = b.op("transpose", [x], perm=(1, 0, 2))  # [6, 4, 8], strides (8, 48, 1)
    merged_ok = b.op("reshape", [x], shape=(24, 8))  # row-major 4 x 6 merge
    merged_bad = b.op("reshape", [t], shape=(24, 8))  # 6 (stride 8) x 4 (stride 48) do not
    split = b.op("reshape", [t], shape=(6, 2, 2, 8))  # splitting a strided dim keeps its stride inside
    fused = {id(v.producer) for v in (t, merged_ok, merged_bad, split)}
    params = {id(x)}
    assert StridedView.of(merged_ok, params, fused).strides == (8, 1)
    assert StridedView.of(merged_bad, params, fused) is None
    assert StridedView.of(split, params, fused).strides == (8, 96, 48, 1)


def test_does_not_take_rhs_panel_above_the_scratch_limit():
    # rhs [n, k] needs its K x W panel packed on the stack; K = 2100 x W is above MAX_SCRATCH_BYTES for a
    # panel of 16 columns or more (AVX-512's 32; AVX2's 16, where K = 1100 fit under it)
    make = batched((1,), 6, 2100, 32, rhs_n_major=True)
    assert _dynamic_kernels(make) == 0
    assert _dynamic_kernels(batched((1,), 6, 1100, 32)) == 1  # read in place: no panel, no limit
