"""The ONNX Attention op (opset 23+): scaled dot-product attention with masks, KV cache and GQA.

Follows onnx's reference (onnx/reference/ops/op_attention.py) step for step:
masks become an additive bias of 0 and -inf (causal, sliding window, padding
by nonpad_kv_seqlen, boolean or float attn_mask); a row whose bias is -inf
everywhere gives zeros rather than NaN; the softmax runs in
softmax_precision when given. Where it departs, for speed or for the spec:
- grouped-query attention is one dot per kv head over its group of query
  heads, never a repeated copy of the cache;
- float32/64 scores are scaled once after the dot (a multiply fused into
  the softmax, ~1 ulp from scaling Q and K by sqrt(scale) each); half
  types keep the reference's rounding, Q and K scaled in their own type;
- qk_matmul_output_mode 0 is the product before the softcap, as the spec's
  text, its function body and onnxruntime have it.
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
    if heads <= 0 or hidden % heads:
        raise ctx.error(f"hidden size {hidden} does not split into {heads} heads")
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


def _grouped_dot(ctx: Ctx, lhs: Value, rhs: Value, kv_heads: int, contract: int) -> Value:
    """lhs [B, H, S, X] against rhs [B, Hkv, ., .] per kv head -> [B, H, S, N].

    Query head h reads kv head h // (H / Hkv) (onnx's repeat of each kv head).
    The G = H / Hkv query heads of one kv head are contiguous, so [B, H, S, X]
    is [B, Hkv, G*S, X] by a reshape: one dot per kv head with G*S rows reads
    each cached key and value once, where repeating the kv heads would copy
    the cache G times and stream it G times (decode is bound by that stream).
    """
    b, heads, s, x = lhs.type.shape
    if heads % kv_heads:
        raise ctx.error(f"{heads} query heads do not divide into {kv_heads} kv heads")
    rows = ctx.reshape(lhs, (b, kv_heads, heads // kv_heads * s, x))
    out = ctx.op("dot", [rows, rhs], lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(contract,))
    return ctx.reshape(out, (b, heads, s, out.type.shape[3]))


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


def _output_mode(ctx: Ctx, a: NodeArgs) -> int:
    mode = int(a.attr("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise ctx.unsupported(f"qk_matmul_output_mode={mode} (the spec defines 0, 1, 2 and 3)")
    return mode


def _softmax_precision(ctx: Ctx, a: NodeArgs) -> DType | None:
    code = a.attr("softmax_precision")
    if code is None:
        return None
    precision = to_dtype(int(code), "softmax_precision")
    if precision not in (DType.F16, DType.BF16, DType.F32, DType.F64):
        raise ctx.unsupported(f"softmax_precision={int(code)} ({precision.value}) is not a floating-point type")
    return precision


def _check_inputs(ctx: Ctx, a: NodeArgs) -> None:
    """Refuse what the spec rules out rather than guess a meaning for it."""
    past_k, past_v, nonpad = a.input(4), a.input(5), a.input(6)
    if (past_k is None) != (past_v is None):
        raise ctx.error("past_key and past_value must be given together")
    if nonpad is not None and past_k is not None:
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key and past_value")
    q, k = a.inputs[0], a.inputs[1]
    if q.type.rank == 4:
        for name, given, actual in (("q_num_heads", a.attr("q_num_heads"), q.type.shape[1]),
                                    ("kv_num_heads", a.attr("kv_num_heads"), k.type.shape[1])):
            if given is not None and int(given) != actual:
                raise ctx.error(f"{name}={int(given)} contradicts the 4-D inputs' {actual} heads")


def _attention(ctx: Ctx, a: NodeArgs) -> list[Value]:
    _check_inputs(ctx, a)
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
    mode, precision = _output_mode(ctx, a), _softmax_precision(ctx, a)
    scale = a.attr("scale")
    scale = 1.0 / math.sqrt(head_size) if scale is None else float(scale)
    present_k, present_v = _concat_seq(ctx, past_k, k), _concat_seq(ctx, past_v, v)
    skv = present_k.type.shape[2]
    big = (batch, heads, sq, skv)
    past_len = past_k.type.shape[2] if past_k is not None else 0
    bias = _bias(ctx, a, big, dtype, past_len)
    kv_heads = present_k.type.shape[1]
    if dtype in (DType.F16, DType.BF16):
        # the reference's rounding: Q and K each scaled by sqrt(scale) in their own type
        root = math.sqrt(scale)
        scores = _grouped_dot(ctx, ctx.binary_scalar("mul", q, root), ctx.binary_scalar("mul", present_k, root), kv_heads, 3)
    else:
        # one multiply of the scores, fused into the softmax, instead of a pass over the whole cache
        scores = ctx.binary_scalar("mul", _grouped_dot(ctx, q, present_k, kv_heads, 3), scale)
    capped = scores
    softcap = float(a.attr("softcap", 0.0))
    if softcap > 0:
        capped = ctx.binary_scalar("mul", ctx.op("tanh", [ctx.binary_scalar("div", scores, softcap)]), softcap)
    biased = capped if bias is None else ctx.op("add", [capped, bias])
    wide = biased if precision is None else ctx.convert(biased, precision)
    probs = _softmax_rows(ctx, wide)
    if bias is not None:
        masked_row = ctx.op("compare", [ctx.reduce(bias, "max", (3,)), ctx.full(float("-inf"), bias.type.with_shape(big[:3]))],
                            direction="eq")
        masked_row = ctx.broadcast_in_dims(masked_row, big, (0, 1, 2))
        probs = ctx.op("select", [masked_row, ctx.full(0, probs.type), probs])
    # mode 0 is the scaled Q K^T before the softcap: the spec's text, its function body and
    # onnxruntime agree (onnx's reference evaluator returns the softcapped scores there)
    qk_out = (scores, capped, biased, probs)[mode]
    probs = ctx.convert(probs, dtype)
    out = _grouped_dot(ctx, probs, present_v, kv_heads, 2)
    if three_d:
        out = ctx.transpose(out, (0, 2, 1, 3))
        out = ctx.reshape(out, (batch, sq, heads * out.type.shape[3]))
    return [out, present_k, present_v, ctx.convert(qk_out, dtype)]


OPS["Attention"] = _attention
