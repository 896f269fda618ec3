"""The ONNX opset-23 RotaryEmbedding (RoPE) as slices, elementwise multiplies and concats.

Follows onnx's reference (onnx/reference/ops/op_rotary_embedding.py): the
first rotary_embedding_dim channels of each head are rotated, pairwise as
(x1, x2) -> (cos x1 - sin x2, sin x1 + cos x2), where the pairs are the two
halves of those channels or, interleaved, the even and odd ones; the other
channels pass through. cos/sin come per (batch, position) or, with
position_ids, as rows of a [max_position + 1, rotary_dim / 2] table picked by
a run-time gather (O(batch * seq) rows, whatever the table's length).

The lowering never transposes: a 4-D input [B, H, S, D] and a 3-D input
[B, S, H*D] (viewed as [B, S, H, D]) differ only in which axis the caches
broadcast along. Its sibling lowerings: RMSNormalization (ops_nn.py) and
Attention (ops_attention.py).
"""
from __future__ import annotations

from aot.ir import Value

from .context import Ctx, NodeArgs, op_registry, take_index
from .ops_index import gather_axis

OPS, op = op_registry()


def _heads_view(ctx: Ctx, a: NodeArgs, x: Value) -> tuple[Value, int]:
    """x as a rank-4 value with the head channels last, and the axis its sequence runs along."""
    if x.type.rank == 4:
        return x, 2
    if x.type.rank != 3:
        raise ctx.error(f"the input must be 3-D [batch, seq, hidden] or 4-D [batch, heads, seq, head_size], got {x.type}")
    heads = int(a.attr("num_heads", 0))
    batch, seq, hidden = x.type.shape
    if heads <= 0:
        raise ctx.error("a 3-D input needs the num_heads attribute (a positive number of heads)")
    if hidden % heads:
        raise ctx.error(f"hidden size {hidden} is not a multiple of num_heads={heads}")
    return ctx.reshape(x, (batch, seq, heads, hidden // heads)), 1


def _caches(ctx: Ctx, a: NodeArgs, half: int) -> tuple[Value, Value]:
    """cos and sin as [batch or 1, seq or 1, half]: gathered by position_ids when given."""
    cos, sin = a.inputs[1], a.inputs[2]
    positions = a.input(3)
    if positions is not None:
        if cos.type.rank != 2 or sin.type.rank != 2:
            raise ctx.error(f"with position_ids the caches must be 2-D [max_position + 1, rotary_dim / 2], got {cos.type}, {sin.type}")
        if positions.type.rank != 2:
            raise ctx.error(f"position_ids must be 2-D [batch, seq], got {positions.type}")
        cos, sin = gather_axis(ctx, cos, positions, 0), gather_axis(ctx, sin, positions, 0)
    elif cos.type.rank != 3 or sin.type.rank != 3:
        raise ctx.error(f"without position_ids the caches must be 3-D [batch, seq, rotary_dim / 2], got {cos.type}, {sin.type}")
    for name, cache in (("cos_cache", cos), ("sin_cache", sin)):
        if cache.type.shape[-1] != half:
            raise ctx.error(f"{name}'s last dim is {cache.type.shape[-1]}, not rotary_dim / 2 = {half}")
    return cos, sin


def _last(ctx: Ctx, x: Value, begin: int, end: int) -> Value:
    """x[..., begin:end]."""
    shape = x.type.shape
    if (begin, end) == (0, shape[-1]):
        return x
    rank = len(shape)
    return ctx.op("slice", [x], start=(0,) * (rank - 1) + (begin,), limit=shape[:-1] + (end,), stride=(1,) * rank)


@op("RotaryEmbedding")
def _rotary_embedding(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    grid, seq_axis = _heads_view(ctx, a, x)
    head_size = grid.type.shape[3]
    rotary = int(a.attr("rotary_embedding_dim", 0)) or head_size
    if rotary < 0 or rotary % 2 or rotary > head_size:
        raise ctx.error(f"rotary_embedding_dim={rotary} must be even and at most the head size {head_size}")
    half = rotary // 2
    cos, sin = _caches(ctx, a, half)
    rows = grid.type.shape[:3] + (half,)
    for name, cache in (("cos_cache", cos), ("sin_cache", sin)):
        leading = cache.type.shape[:2]
        wanted = (rows[0], rows[seq_axis])
        if any(have not in (1, want) for have, want in zip(leading, wanted)):
            what = "position_ids" if a.input(3) is not None else name
            raise ctx.error(f"{what} is {list(leading)} over [batch, seq], which does not broadcast to {list(wanted)}")
    cos = ctx.broadcast_in_dims(cos, rows, (0, seq_axis, 3))
    sin = ctx.broadcast_in_dims(sin, rows, (0, seq_axis, 3))

    turned = _last(ctx, grid, 0, rotary)
    interleaved = bool(a.attr("interleaved", 0))
    if interleaved:
        pairs = ctx.reshape(turned, rows + (2,))
        x1, x2 = take_index(ctx, pairs, 4, 0), take_index(ctx, pairs, 4, 1)
    else:
        x1, x2 = _last(ctx, turned, 0, half), _last(ctx, turned, half, rotary)
    real = ctx.op("sub", [ctx.op("mul", [cos, x1]), ctx.op("mul", [sin, x2])])
    imag = ctx.op("add", [ctx.op("mul", [sin, x1]), ctx.op("mul", [cos, x2])])
    if interleaved:
        pair = rows + (1,)
        woven = ctx.op("concat", [ctx.reshape(real, pair), ctx.reshape(imag, pair)], axis=4)
        turned = ctx.reshape(woven, rows[:3] + (rotary,))
    else:
        turned = ctx.op("concat", [real, imag], axis=3)
    if rotary < head_size:
        turned = ctx.op("concat", [turned, _last(ctx, grid, rotary, head_size)], axis=3)
    return [ctx.reshape(turned, x.type.shape)]
