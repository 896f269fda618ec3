"""The ONNX Attention op (opset 23+): scaled dot-product attention with masks, KV cache and GQA.

Follows onnx's reference (onnx/reference/ops/op_attention.py) step for step:
Q and K are each scaled by sqrt(scale); masks become an additive bias of 0
and -inf (causal, sliding window, padding by nonpad_kv_seqlen, boolean or
float attn_mask); a row whose bias is -inf everywhere gives zeros rather
than NaN; the softmax runs in softmax_precision when given.
"""
from __future__ import annotations

import math

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, op_registry
from .loader import to_dtype

OPS, _ = op_registry()


def _heads(ctx: Ctx, x: Value, heads: int) -> Value:
    """[B, S, H*D] -> [B, H, S, D]."""
    b, s, hidden = x.type.shape
    return ctx.transpose(ctx.reshape(x, (b, s, heads, hidden // heads)), (0, 2, 1, 3))


def _concat_seq(ctx: Ctx, past: Value | None, new: Value) -> Value:
    if past is None or past.type.shape[2] == 0:
        return new
    return ctx.op("concat", [past, new], axis=2)


def _neg_inf_where_not(ctx: Ctx, allowed: Value, dtype: DType) -> Value:
    """0 where allowed, -inf elsewhere."""
    t = allowed.type.with_dtype(dtype)
    return ctx.op("select", [allowed, ctx.full(0, t), ctx.full(float("-inf"), t)])


def _bias(ctx: Ctx, a: NodeArgs, big: tuple[int, ...], dtype: DType, past_len: int) -> Value | None:
    """The additive mask [B, H, Sq, Skv] (0 or -inf, or the float mask), None when nothing masks."""
    batch, _, sq, skv = big
    pieces: list[Value] = []
    mask = a.input(3)
    if mask is not None:
        short = skv - mask.type.shape[-1]
        if short > 0:
            # a mask for fewer keys than present: the missing keys are masked out
            fill = 0 if mask.type.dtype is DType.BOOL else float("-inf")
            low = (0,) * mask.type.rank
            mask = ctx.op("pad", [mask], low=low, high=low[:-1] + (short,), value=fill)
        if mask.type.dtype is DType.BOOL:
            mask = _neg_inf_where_not(ctx, mask, dtype)
        pieces.append(ctx.broadcast_to(mask, big))
    nonpad = a.input(6)
    rows = ctx.op("iota", [], shape=big, dim=2, dtype=DType.I64)
    cols = ctx.op("iota", [], shape=big, dim=3, dtype=DType.I64)
    if nonpad is not None:
        lengths = ctx.broadcast_in_dims(ctx.convert(nonpad, DType.I64), big, (0,))
        # position of query row i: lengths - Sq + i (the external cache's frontier)
        frontier = ctx.op("add", [rows, ctx.op("sub", [lengths, ctx.full(sq, lengths.type)])])
    else:
        frontier = ctx.op("add", [rows, ctx.full(past_len, rows.type)])
    if a.attr("is_causal", 0):
        pieces.append(_neg_inf_where_not(ctx, ctx.op("compare", [cols, frontier], direction="le"), dtype))
    left, right = int(a.attr("left_window_size", -1)), int(a.attr("right_window_size", -1))
    diff = ctx.op("sub", [frontier, cols])
    if left >= 0:
        pieces.append(_neg_inf_where_not(ctx, ctx.op("compare", [diff, ctx.full(left, diff.type)], direction="le"), dtype))
    if right >= 0:
        pieces.append(_neg_inf_where_not(ctx, ctx.op("compare", [diff, ctx.full(-right, diff.type)], direction="ge"), dtype))
    if nonpad is not None:
        lengths = ctx.broadcast_in_dims(ctx.convert(nonpad, DType.I64), big, (0,))
        pieces.append(_neg_inf_where_not(ctx, ctx.op("compare", [cols, lengths], direction="lt"), dtype))
    if not pieces:
        return None
    bias = pieces[0]
    for piece in pieces[1:]:
        bias = ctx.op("add", [bias, piece])
    return bias


def _repeat_heads(ctx: Ctx, x: Value, heads: int) -> Value:
    """[B, Hkv, S, D] -> [B, heads, S, D], each kv head serving heads / Hkv consecutive query heads."""
    b, hkv, s, d = x.type.shape
    if hkv == heads:
        return x
    if heads % hkv:
        raise ValueError(f"{heads} query heads do not divide into {hkv} kv heads")
    spread = ctx.broadcast_in_dims(x, (b, hkv, heads // hkv, s, d), (0, 1, 3, 4))
    return ctx.reshape(spread, (b, heads, s, d))


def _softmax_rows(ctx: Ctx, x: Value) -> Value:
    """Softmax over the last dim; a row of -inf gives 0 rather than NaN (the reference's guards)."""
    axis = x.type.rank - 1
    shape = x.type.shape
    peak = ctx.reduce(x, "max", (axis,))
    all_masked = ctx.op("compare", [peak, ctx.full(float("-inf"), peak.type)], direction="eq")
    peak = ctx.op("select", [all_masked, ctx.full(0, peak.type), peak])
    exps = ctx.op("exp", [ctx.op("sub", [x, ctx.unreduce(peak, shape, (axis,))])])
    total = ctx.reduce(exps, "sum", (axis,))
    empty = ctx.op("compare", [total, ctx.full(0, total.type)], direction="eq")
    total = ctx.op("select", [empty, ctx.full(1, total.type), total])
    return ctx.op("div", [exps, ctx.unreduce(total, shape, (axis,))])


def _attention(ctx: Ctx, a: NodeArgs) -> list[Value]:
    q, k, v = a.inputs[:3]
    past_k, past_v = a.input(4), a.input(5)
    three_d = q.type.rank == 3
    if three_d:
        q_heads, kv_heads = a.attr("q_num_heads"), a.attr("kv_num_heads")
        if q_heads is None or kv_heads is None:
            raise ctx.error("3-D inputs need q_num_heads and kv_num_heads")
        q, k, v = _heads(ctx, q, int(q_heads)), _heads(ctx, k, int(kv_heads)), _heads(ctx, v, int(kv_heads))
    elif q.type.rank != 4:
        raise ctx.error(f"Q must be 3-D or 4-D, got {q.type}")
    dtype = q.type.dtype
    batch, heads, sq, head_size = q.type.shape
    scale = a.attr("scale")
    scale = 1.0 / math.sqrt(head_size) if scale is None else float(scale)
    root = math.sqrt(scale)
    present_k, present_v = _concat_seq(ctx, past_k, k), _concat_seq(ctx, past_v, v)
    skv = present_k.type.shape[2]
    big = (batch, heads, sq, skv)
    past_len = past_k.type.shape[2] if past_k is not None else 0
    bias = _bias(ctx, a, big, dtype, past_len)
    try:
        keys, values = _repeat_heads(ctx, present_k, heads), _repeat_heads(ctx, present_v, heads)
    except ValueError as err:
        raise ctx.error(str(err)) from None
    scores = ctx.op("dot", [ctx.binary_scalar("mul", q, root), ctx.binary_scalar("mul", keys, root)],
                    lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(3,))
    softcap = float(a.attr("softcap", 0.0))
    if softcap > 0:
        scores = ctx.binary_scalar("mul", ctx.op("tanh", [ctx.binary_scalar("div", scores, softcap)]), softcap)
    mode = int(a.attr("qk_matmul_output_mode", 0))
    qk_out = scores
    biased = scores if bias is None else ctx.op("add", [scores, bias])
    if mode == 2:
        qk_out = biased
    precision = a.attr("softmax_precision")
    wide = biased if precision is None else ctx.convert(biased, to_dtype(int(precision), "softmax_precision"))
    probs = _softmax_rows(ctx, wide)
    if bias is not None:
        masked_row = ctx.op("compare", [ctx.reduce(bias, "max", (3,)), ctx.full(float("-inf"), bias.type.with_shape(big[:3]))],
                            direction="eq")
        masked_row = ctx.broadcast_in_dims(masked_row, big, (0, 1, 2))
        probs = ctx.op("select", [masked_row, ctx.full(0, probs.type), probs])
    if mode == 3:
        qk_out = probs
    probs = ctx.convert(probs, dtype)
    out = ctx.op("dot", [probs, values], lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(2,))
    if three_d:
        out = ctx.transpose(out, (0, 2, 1, 3))
        out = ctx.reshape(out, (batch, sq, heads * out.type.shape[3]))
    return [out, present_k, present_v, ctx.convert(qk_out, dtype)]


OPS["Attention"] = _attention
