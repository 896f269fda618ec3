"""Data-dependent indexing ONNX ops: Gather with run-time indices, GatherElements, GatherND,
ScatterElements, ScatterND, OneHot, Trilu, Hardmax, CumSum, EyeLike; TopK (sort primitives).

Run-time indices are lowered to one-hot masks: `iota == index` selects the
element, and a reduction over the indexed dim collects it. Every piece is an
elementwise op, broadcast or reduce, so it fuses into one kernel and needs no
gather/scatter primitive; the cost is O(indices x indexed dim) work, which is
what the indexed sizes of real models (vocabularies aside) afford. Selecting
with `select` rather than multiplying by the mask keeps inf/NaN elsewhere in
the operand out of the result.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aot.ir import DType, Value
from aot.ops.reduction import reduce_identity

from .context import Ctx, NodeArgs, norm_axis, op_registry
from .ops_shape import static_ints

OPS, op = op_registry()


# -- helpers ------------------------------------------------------------------------
def normalize_index(ctx: Ctx, idx: Value, dim: int | Value) -> Value:
    """Indices as i64 with negatives counted from the end (index + dim where index < 0)."""
    idx = ctx.convert(idx, DType.I64)
    size = ctx.full(dim, idx.type) if isinstance(dim, int) else dim
    negative = ctx.op("compare", [idx, ctx.full(0, idx.type)], direction="lt")
    return ctx.op("select", [negative, ctx.op("add", [idx, size]), idx])


def _collect(ctx: Ctx, values: Value, mask: Value, axis: int, kind: str) -> Value:
    """reduce(kind) over `axis` of the elements of `values` where `mask` holds."""
    dtype = values.type.dtype
    wide = dtype
    if dtype is DType.BOOL:
        values, wide = ctx.convert(values, DType.I8), DType.I8  # sum/max of i1 is not an IR reduction
    fill = ctx.full(reduce_identity(kind, wide), values.type)
    picked = ctx.op("select", [mask, values, fill])
    out = ctx.reduce(picked, kind, (axis,))
    return ctx.convert(out, dtype)


def take(ctx: Ctx, data: Value, lin: Value, batched: bool) -> Value:
    """data [A, D, B], lin [M] (or [A, M] when batched) in [0, D) -> out [A, M, B], out[a, m] = data[a, lin[m]]."""
    a, d, b = data.type.shape
    m = lin.type.shape[-1]
    big = (a, m, d, b)
    lin_b = ctx.broadcast_in_dims(lin, big, (0, 1) if batched else (1,))
    pos = ctx.op("iota", [], shape=big, dim=2, dtype=DType.I64)
    mask = ctx.op("compare", [lin_b, pos], direction="eq")
    values = ctx.broadcast_in_dims(data, big, (0, 2, 3))
    return _collect(ctx, values, mask, 2, "sum")


def gather_axis(ctx: Ctx, x: Value, indices: Value, axis: int) -> Value:
    """numpy.take(x, indices, axis) for run-time indices."""
    shape = x.type.shape
    outer, dim, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    lin = ctx.reshape(normalize_index(ctx, indices, dim), (indices.type.size,))
    out = take(ctx, ctx.reshape(x, (outer, dim, inner)), lin, batched=False)
    return ctx.reshape(out, shape[:axis] + indices.type.shape + shape[axis + 1:])


def _move_to_end(ctx: Ctx, x: Value, axis: int) -> Value:
    perm = [d for d in range(x.type.rank) if d != axis] + [axis]
    return ctx.transpose(x, perm)


def _crop(ctx: Ctx, x: Value, shape: Sequence[int], keep: int) -> Value:
    """x cut down to `shape` on every dim except `keep`."""
    limit = [x.type.shape[d] if d == keep else shape[d] for d in range(x.type.rank)]
    if tuple(limit) == x.type.shape:
        return x
    return ctx.op("slice", [x], start=(0,) * x.type.rank, limit=tuple(limit), stride=(1,) * x.type.rank)


def element_mask(ctx: Ctx, indices: Value, dim: int) -> Value:
    """mask [J..., D]: mask[j, p] = (normalised indices[j] == p)."""
    idx = normalize_index(ctx, indices, dim)
    rank = idx.type.rank
    big = idx.type.shape + (dim,)
    pos = ctx.op("iota", [], shape=big, dim=rank, dtype=DType.I64)
    return ctx.op("compare", [ctx.broadcast_in_dims(idx, big, tuple(range(rank))), pos], direction="eq")


# -- gathers ------------------------------------------------------------------------
@op("GatherElements")
def _gather_elements(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, indices = a.inputs
    rank = x.type.rank
    axis = norm_axis(ctx, a.attr("axis", 0), rank)
    dim = x.type.shape[axis]
    mask = element_mask(ctx, indices, dim)  # [J..., D]
    big = mask.type.shape
    # x restricted to J on the other dims, its indexed dim last: [J without axis..., D]
    moved = _move_to_end(ctx, _crop(ctx, x, indices.type.shape, axis), axis)
    values = ctx.broadcast_in_dims(moved, big, tuple(d for d in range(rank + 1) if d != axis))
    return [_collect(ctx, values, mask, rank, "sum")]


@op("GatherND")
def _gather_nd(ctx: Ctx, a: NodeArgs) -> list[Value]:
    data, indices = a.inputs
    nb = int(a.attr("batch_dims", 0))
    k = indices.type.shape[-1]
    batch = data.type.shape[:nb]
    indexed = data.type.shape[nb:nb + k]
    rest = data.type.shape[nb + k:]
    middle = indices.type.shape[nb:-1]
    if indices.type.shape[:nb] != batch:
        raise ctx.error(f"batch dims of {indices.type} and {data.type} differ")
    nbatch, m = math.prod(batch), math.prod(middle)
    idx = ctx.reshape(ctx.convert(indices, DType.I64), (nbatch, m, k))
    # linear index into the k indexed dims: sum of (component, normalised) * stride
    lin = None
    stride = 1
    for i in reversed(range(k)):
        comp = ctx.op("slice", [idx], start=(0, 0, i), limit=(nbatch, m, i + 1), stride=(1, 1, 1))
        comp = normalize_index(ctx, ctx.reshape(comp, (nbatch, m)), indexed[i])
        term = comp if stride == 1 else ctx.binary_scalar("mul", comp, stride)
        lin = term if lin is None else ctx.op("add", [lin, term])
        stride *= indexed[i]
    flat = ctx.reshape(data, (nbatch, math.prod(indexed), math.prod(rest)))
    out = take(ctx, flat, lin, batched=True)
    return [ctx.reshape(out, batch + middle + rest)]


# -- scatters -----------------------------------------------------------------------
_SCATTER_KINDS = {"none": "sum", "add": "sum", "mul": "prod", "max": "max", "min": "min"}


def _combine(ctx: Ctx, reduction: str, data: Value, hit: Value, update: Value) -> Value:
    """Where `hit`: the update replaces (none) or combines with the data; elsewhere the data stays."""
    if reduction == "none":
        combined = update
    else:
        combined = ctx.op({"add": "add", "mul": "mul", "max": "max", "min": "min"}[reduction], [data, update])
    return ctx.op("select", [hit, combined, data])


def _any(ctx: Ctx, mask: Value, axis: int) -> Value:
    counts = ctx.reduce(ctx.convert(mask, DType.I32), "max", (axis,))
    return ctx.op("compare", [counts, ctx.full(0, counts.type)], direction="gt")


def _reduction(ctx: Ctx, a: NodeArgs) -> str:
    reduction = a.attr("reduction", "none")
    if reduction not in _SCATTER_KINDS:
        raise ctx.unsupported(f"reduction '{reduction}'")
    return reduction


@op("ScatterElements", "Scatter")
def _scatter_elements(ctx: Ctx, a: NodeArgs) -> list[Value]:
    data, indices, updates = a.inputs
    rank = data.type.rank
    axis = norm_axis(ctx, a.attr("axis", 0), rank)
    reduction = _reduction(ctx, a)
    dim = data.type.shape[axis]
    mask = element_mask(ctx, indices, dim)  # [J..., D]
    big = mask.type.shape
    upd = ctx.broadcast_in_dims(updates, big, tuple(range(rank)))
    # reduce over the update's own `axis` dim: [J without axis..., D], then D back at `axis`
    summed = _collect(ctx, upd, mask, axis, _SCATTER_KINDS[reduction])
    hit = _any(ctx, mask, axis)
    back = [d for d in range(rank - 1)]
    back.insert(axis, rank - 1)
    summed, hit = ctx.transpose(summed, back), ctx.transpose(hit, back)
    # J may be smaller than the data on the other dims: pad the rest as "not hit"
    high = tuple(s - t for s, t in zip(data.type.shape, summed.type.shape))
    if any(high):
        zeros = (0,) * rank
        summed = ctx.op("pad", [summed], low=zeros, high=high, value=0)
        hit = ctx.op("pad", [hit], low=zeros, high=high, value=0)
    return [_combine(ctx, reduction, data, hit, summed)]


@op("ScatterND")
def _scatter_nd(ctx: Ctx, a: NodeArgs) -> list[Value]:
    data, indices, updates = a.inputs
    reduction = _reduction(ctx, a)
    k = indices.type.shape[-1]
    indexed, rest = data.type.shape[:k], data.type.shape[k:]
    p, r = math.prod(indexed), math.prod(rest)
    m = math.prod(indices.type.shape[:-1])
    idx = ctx.reshape(ctx.convert(indices, DType.I64), (m, k))
    lin = None
    stride = 1
    for i in reversed(range(k)):
        comp = ctx.reshape(ctx.op("slice", [idx], start=(0, i), limit=(m, i + 1), stride=(1, 1)), (m,))
        comp = normalize_index(ctx, comp, indexed[i])
        term = comp if stride == 1 else ctx.binary_scalar("mul", comp, stride)
        lin = term if lin is None else ctx.op("add", [lin, term])
        stride *= indexed[i]
    big = (m, p, r)
    pos = ctx.op("iota", [], shape=big, dim=1, dtype=DType.I64)
    mask = ctx.op("compare", [ctx.broadcast_in_dims(lin, big, (0,)), pos], direction="eq")
    upd = ctx.broadcast_in_dims(ctx.reshape(updates, (m, r)), big, (0, 2))
    summed = _collect(ctx, upd, mask, 0, _SCATTER_KINDS[reduction])  # [P, R]
    hit = _any(ctx, mask, 0)
    flat = ctx.reshape(data, (p, r))
    return [ctx.reshape(_combine(ctx, reduction, flat, hit, summed), data.type.shape)]


# -- generators and masks -----------------------------------------------------------
@op("OneHot")
def _one_hot(ctx: Ctx, a: NodeArgs) -> list[Value]:
    indices, depth_v, values = a.inputs
    depth_array = ctx.const(depth_v)
    if depth_array is None:
        raise ctx.unsupported("depth must be known at compile time")
    depth = int(depth_array.reshape(-1)[0])
    rank = indices.type.rank + 1
    axis = norm_axis(ctx, a.attr("axis", -1), rank)
    idx = indices
    if idx.type.dtype.is_float:
        idx = ctx.op("select", [ctx.op("compare", [idx, ctx.full(0, idx.type)], direction="lt"),
                                ctx.op("ceil", [idx]), ctx.op("floor", [idx])])
    idx = normalize_index(ctx, idx, depth)
    out_shape = indices.type.shape[:axis] + (depth,) + indices.type.shape[axis:]
    keep = tuple(d for d in range(rank) if d != axis)
    pos = ctx.op("iota", [], shape=out_shape, dim=axis, dtype=DType.I64)
    mask = ctx.op("compare", [ctx.broadcast_in_dims(idx, out_shape, keep), pos], direction="eq")
    off = ctx.reshape(ctx.op("slice", [values], start=(0,), limit=(1,), stride=(1,)), ())
    on = ctx.reshape(ctx.op("slice", [values], start=(1,), limit=(2,), stride=(1,)), ())
    return [ctx.op("select", [mask, ctx.broadcast_in_dims(on, out_shape, ()), ctx.broadcast_in_dims(off, out_shape, ())])]


@op("Trilu")
def _trilu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    k = 0
    if a.input(1) is not None:
        k = static_ints(ctx, a.input(1), "k")[0]
    shape = x.type.shape
    rank = x.type.rank
    row = ctx.op("iota", [], shape=shape, dim=rank - 2, dtype=DType.I64)
    col = ctx.op("iota", [], shape=shape, dim=rank - 1, dtype=DType.I64)
    diag = ctx.op("add", [row, ctx.full(k, row.type)])
    # upper keeps col - row >= k; lower keeps col - row <= k
    keep = ctx.op("compare", [col, diag], direction="ge" if a.attr("upper", 1) else "le")
    return [ctx.op("select", [keep, x, ctx.full(0, x.type)])]


@op("EyeLike")
def _eye_like(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    from .loader import to_dtype

    dtype = to_dtype(a.attr("dtype"), "EyeLike dtype") if a.attr("dtype") is not None else x.type.dtype
    k = int(a.attr("k", 0))
    rows, cols = x.type.shape
    eye = np.eye(rows, cols, k=k).astype(dtype.to_numpy())
    return [ctx.constant(eye)]


@op("Hardmax")
def _hardmax(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    shape, rank = x.type.shape, x.type.rank
    if ctx.opset < 13:
        # coerced to 2-D at `axis`: the hard max is over all dims from axis on
        axis = norm_axis(ctx, a.attr("axis", 1), rank)
        flat = ctx.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
        return [ctx.reshape(_hardmax_axis(ctx, flat, 1), shape)]
    return [_hardmax_axis(ctx, x, norm_axis(ctx, a.attr("axis", -1), rank))]


def _hardmax_axis(ctx: Ctx, x: Value, axis: int) -> Value:
    """1 at the first maximum along `axis`, 0 elsewhere."""
    shape = x.type.shape
    peak = ctx.unreduce(ctx.reduce(x, "max", (axis,)), shape, (axis,))
    pos = ctx.op("iota", [], shape=shape, dim=axis, dtype=DType.I64)
    first = ctx.op("select", [ctx.op("compare", [x, peak], direction="eq"), pos, ctx.full(shape[axis], pos.type)])
    first = ctx.unreduce(ctx.reduce(first, "min", (axis,)), shape, (axis,))
    hit = ctx.op("compare", [pos, first], direction="eq")
    return ctx.op("select", [hit, ctx.full(1, x.type), ctx.full(0, x.type)])


@op("CumSum", "CumProd")
def _cumulative(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Prefix sums (products) as a masked reduction: out[i] = sum over j of x[j] where j <= i (or the variants)."""
    x, axis_v = a.inputs
    rank = x.type.rank
    axis = norm_axis(ctx, static_ints(ctx, axis_v, "axis")[0], rank)
    exclusive, reverse = bool(a.attr("exclusive", 0)), bool(a.attr("reverse", 0))
    n = x.type.shape[axis]
    # big [x dims..., N]: big[..., i (at axis), ..., j] = x[..., j, ...]
    moved = _move_to_end(ctx, x, axis)
    big = x.type.shape + (n,)
    values = ctx.broadcast_in_dims(moved, big, tuple(d for d in range(rank + 1) if d != axis))
    i = ctx.op("iota", [], shape=big, dim=axis, dtype=DType.I64)
    j = ctx.op("iota", [], shape=big, dim=rank, dtype=DType.I64)
    direction = {(False, False): "le", (True, False): "lt", (False, True): "ge", (True, True): "gt"}[(exclusive, reverse)]
    mask = ctx.op("compare", [j, i], direction=direction)
    return [_collect(ctx, values, mask, rank, "sum" if a.node.op_type == "CumSum" else "prod")]


@op("TopK")
def _top_k(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """The k largest (smallest) along `axis`, sorted, with their i64 indices.

    A stable argsort keeps equal elements in index order, as ONNX requires of
    ties (lower index first), largest and smallest alike. sorted=0 leaves the
    order unspecified, so the sorted order serves too.
    """
    x = a.inputs[0]
    rank = x.type.rank
    axis = norm_axis(ctx, a.attr("axis", -1), rank)
    k = int(a.attr("k")) if ctx.opset < 10 else static_ints(ctx, a.inputs[1], "K")[0]
    dim = x.type.shape[axis]
    if not 0 <= k <= dim:
        raise ctx.error(f"K = {k} is outside [0, {dim}] for axis {axis} of {x.type}")
    descending = bool(a.attr("largest", 1))
    order = ctx.op("argsort", [x], dim=axis, descending=descending, dtype=DType.I64)
    values = ctx.op("sort", [x], dim=axis, descending=descending)
    limit = tuple(k if i == axis else n for i, n in enumerate(x.type.shape))
    keep = {"start": (0,) * rank, "limit": limit, "stride": (1,) * rank}
    return [ctx.op("slice", [values], **keep), ctx.op("slice", [order], **keep)]
