"""Sampling ONNX ops: GridSample (grid is a run-time input).

GridSample follows onnx's reference (onnx/reference/ops/op_grid_sample.py)
step by step, vectorised over every output location: denormalise each grid
coordinate, round it (nearest), bring it back inside the borders (border:
clamp, reflection: reflect), then split it into interpolation taps, each an
integer index per spatial dim and a weight (nearest 1 tap, linear 2, cubic 4
per dim). A tap outside the image reads 0 (zeros), the clamped pixel
(border) or the reflected pixel (reflection). Every tap combination is one
row gather from X viewed as [N * pixels, C], scaled by its weight and summed.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from aot.ir import DType, Value

from .context import Ctx, NodeArgs

OPS: dict[str, Callable[[Ctx, NodeArgs], list[Value]]] = {}

CUBIC_A = -0.75  # the coefficient onnx and onnxruntime use for GridSample's cubic mode
MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}
PADDING_MODES = ("zeros", "border", "reflection")


def op(*names: str):
    def register(fn):
        for name in names:
            OPS[name] = fn
        return fn

    return register


def _slice_last(ctx: Ctx, v: Value, index: int) -> Value:
    """v[..., index] with the last dim dropped."""
    shape = v.type.shape
    start = (0,) * (len(shape) - 1) + (index,)
    limit = shape[:-1] + (index + 1,)
    part = ctx.op("slice", [v], start=start, limit=limit, stride=(1,) * len(shape))
    return ctx.reshape(part, shape[:-1])


def _clamp(ctx: Ctx, x: Value, lo: float, hi: float) -> Value:
    return ctx.op("min", [ctx.op("max", [x, ctx.full(lo, x.type)]), ctx.full(hi, x.type)])


def _select_outside(ctx: Ctx, x: Value, lo: float, hi: float, inside: Value, outside: Value) -> Value:
    below = ctx.op("compare", [x, ctx.full(lo, x.type)], direction="lt")
    above = ctx.op("compare", [x, ctx.full(hi, x.type)], direction="gt")
    return ctx.op("select", [ctx.op("or", [below, above]), outside, inside])


def _reflect(ctx: Ctx, x: Value, lo: float, hi: float) -> Value:
    """Reflect x by the nearer border until it lies in [lo, hi] (the reference's _gs_reflect)."""
    span = hi - lo
    if span <= 0:
        return ctx.full(lo, x.type)

    def fold(dx: Value, near: float, far: float, sign: float) -> Value:
        # n = trunc(dx / span) reflections; r = dx - n*span; even n: near + sign*r, odd n: far - sign*r
        n = ctx.op("floor", [ctx.binary_scalar("mul", dx, 1.0 / span)])
        r = ctx.op("sub", [dx, ctx.binary_scalar("mul", n, span)])
        half = ctx.binary_scalar("mul", n, 0.5)
        odd = ctx.op("compare", [ctx.op("floor", [half]), half], direction="ne")
        even_value = ctx.binary_scalar("add", ctx.binary_scalar("mul", r, sign), near)
        odd_value = ctx.binary_scalar("add", ctx.binary_scalar("mul", r, -sign), far)
        return ctx.op("select", [odd, odd_value, even_value])

    below = fold(ctx.op("sub", [ctx.full(lo, x.type), x]), lo, hi, 1.0)
    above = fold(ctx.binary_scalar("sub", x, hi), hi, lo, -1.0)
    low = ctx.op("compare", [x, ctx.full(lo, x.type)], direction="lt")
    high = ctx.op("compare", [x, ctx.full(hi, x.type)], direction="gt")
    return ctx.op("select", [low, below, ctx.op("select", [high, above, x])])


def _cubic_weights(ctx: Ctx, t: Value) -> list[Value]:
    """Keys cubic convolution weights of taps -1, 0, 1, 2 for the fraction t in [0, 1)."""
    a = CUBIC_A

    def near(d: Value) -> Value:  # |d| <= 1: ((a + 2) d - (a + 3)) d^2 + 1
        inner = ctx.binary_scalar("sub", ctx.binary_scalar("mul", d, a + 2), a + 3)
        return ctx.binary_scalar("add", ctx.op("mul", [ctx.op("mul", [inner, d]), d]), 1.0)

    def far(d: Value) -> Value:  # 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a
        inner = ctx.binary_scalar("sub", ctx.binary_scalar("mul", d, a), 5 * a)
        inner = ctx.binary_scalar("add", ctx.op("mul", [inner, d]), 8 * a)
        return ctx.binary_scalar("sub", ctx.op("mul", [inner, d]), 4 * a)

    one_minus = ctx.op("sub", [ctx.full(1.0, t.type), t])
    return [far(ctx.binary_scalar("add", t, 1.0)), near(t), near(one_minus),
            far(ctx.op("sub", [ctx.full(2.0, t.type), t]))]


def _taps(ctx: Ctx, x: Value, length: int, mode: str, padding: str, lo: float, hi: float) -> list[tuple[Value, Value]]:
    """(index, weight) per tap of one spatial dim; index is float, already inside [0, length)
    for border/reflection, and weight is zeroed where zeros padding reads outside."""
    if mode == "nearest":
        taps = [(x, ctx.full(1.0, x.type))]
    else:
        base = ctx.op("floor", [x])
        t = ctx.op("sub", [x, base])
        if mode == "linear":
            offsets, weights = (0, 1), [ctx.op("sub", [ctx.full(1.0, t.type), t]), t]
        else:
            offsets, weights = (-1, 0, 1, 2), _cubic_weights(ctx, t)
        taps = [(ctx.binary_scalar("add", base, float(k)), w) for k, w in zip(offsets, weights)]
    result = []
    for index, weight in taps:
        if padding == "zeros":
            weight = _select_outside(ctx, index, 0.0, length - 1.0, weight, ctx.full(0.0, weight.type))
        elif padding == "reflection":
            index = _reflect(ctx, index, lo, hi)
        result.append((_clamp(ctx, index, 0.0, length - 1.0), weight))
    return result


@op("GridSample")
def _grid_sample(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, grid = a.inputs[0], a.inputs[1]
    mode_attr = a.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    padding = a.attr("padding_mode", "zeros")
    align = bool(a.attr("align_corners", 0))
    if mode_attr not in MODES:
        raise ctx.unsupported(f"mode '{mode_attr}'")
    if padding not in PADDING_MODES:
        raise ctx.unsupported(f"padding_mode '{padding}'")
    mode = MODES[mode_attr]
    if not x.type.dtype.is_float or not grid.type.dtype.is_float:
        raise ctx.unsupported(f"X {x.type} and grid {grid.type} must be float")
    rank = x.type.rank - 2
    n, c = x.type.shape[:2]
    spatial = x.type.shape[2:]
    if rank < 1 or grid.type.rank != rank + 2 or grid.type.shape[0] != n or grid.type.shape[-1] != rank:
        raise ctx.error(f"grid {grid.type} does not fit X {x.type}: expected [N, out..., {rank}]")
    out_spatial = grid.type.shape[1:-1]
    compute = DType.F64 if x.type.dtype is DType.F64 else DType.F32
    g = ctx.convert(grid, compute)
    pixels = int(np.prod(spatial))
    locations = int(np.prod(out_spatial))

    per_dim: list[list[tuple[Value, Value]]] = []
    for d, length in enumerate(spatial):
        coord = _slice_last(ctx, g, rank - 1 - d)  # the grid lists x (the last dim) first
        if align:
            pos = ctx.binary_scalar("mul", ctx.binary_scalar("add", coord, 1.0), (length - 1) / 2.0)
            lo, hi = 0.0, length - 1.0
        else:
            # ((g + 1) * L - 1) / 2
            pos = ctx.binary_scalar("mul", ctx.binary_scalar("add", ctx.binary_scalar("mul", coord, float(length)),
                                                             length - 1.0), 0.5)
            lo, hi = -0.5, length - 0.5
        if mode == "nearest":
            pos = ctx.op("round", [pos])  # half to even, as np.rint and nearbyint
        if padding == "border":
            pos = _select_outside(ctx, pos, lo, hi, pos, _clamp(ctx, pos, 0.0, length - 1.0))
        elif padding == "reflection":
            pos = _reflect(ctx, pos, lo, hi)
        per_dim.append(_taps(ctx, pos, length, mode, padding, lo, hi))

    # X as rows [N * pixels, C]; a tap's row = n * pixels + sum_d index_d * stride_d
    rows = ctx.reshape(ctx.transpose(ctx.reshape(x, (n, c, pixels)), (0, 2, 1)), (n * pixels, c))
    rows = ctx.convert(rows, compute)
    strides = [int(np.prod(spatial[d + 1:])) for d in range(rank)]
    loc_shape = (n,) + out_spatial
    batch_offset = ctx.op("iota", [], shape=loc_shape, dim=0, dtype=DType.I32)
    batch_offset = ctx.binary_scalar("mul", batch_offset, pixels)
    total = None
    for combo in itertools.product(*per_dim):
        row = batch_offset
        weight = None
        for d, (index, w) in enumerate(combo):
            term = ctx.convert(ctx.op("round", [index]), DType.I32)
            if strides[d] != 1:
                term = ctx.binary_scalar("mul", term, strides[d])
            row = ctx.op("add", [row, term])
            weight = w if weight is None else ctx.op("mul", [weight, w])
        indices = ctx.reshape(row, (n * locations, 1))
        picked = ctx.op("gather", [rows, indices], offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                        index_vector_dim=1, slice_sizes=(1, c))
        weight = ctx.broadcast_in_dims(ctx.reshape(weight, (n * locations,)), (n * locations, c), (0,))
        term = ctx.op("mul", [picked, weight])
        total = term if total is None else ctx.op("add", [total, term])
    y = ctx.reshape(total, (n,) + out_spatial + (c,))
    y = ctx.transpose(y, (0, rank + 1) + tuple(range(1, rank + 1)))
    return [ctx.convert(y, x.type.dtype)]
