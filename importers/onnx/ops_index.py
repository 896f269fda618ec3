"""Data-dependent indexing ONNX ops: Gather with run-time indices, GatherElements, GatherND,
ScatterElements, ScatterND, OneHot, Trilu, Hardmax, CumSum, EyeLike; TopK (sort primitives).

Gathers and scatters lower to the IR's gather and scatter primitives: O(output)
work (O(updates) for a scatter), whatever the size of the indexed dim, so a
token embedding over a 50k vocabulary costs a copy of the picked rows. Every
index is normalised (negatives count from the end) and checked at run time:
an out-of-range index fails the run with an error naming the node, and the
kernels themselves clamp (gather) or skip (scatter), so they never touch
memory outside a buffer.

The small masks (OneHot, Trilu, Hardmax, CumSum, the loss ops' class pick)
stay one-hot: `iota == index` and a reduction over the indexed dim fuse into
one kernel, and selecting with `select` rather than multiplying by the mask
keeps inf/NaN elsewhere in the operand out of the result.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aot.ir import DType, Value
from aot.ir.ops.reduction import reduce_identity

from .context import Ctx, NodeArgs, norm_axis, op_registry, static_ints
from .loader import to_dtype

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


def check_in_range(ctx: Ctx, idx: Value, size: Value | int, what: str) -> None:
    """Fail the run, naming the node, unless every (normalised) index lies in [0, size).

    The gather/scatter kernels clamp or skip out-of-range positions, so they
    never read or write outside a buffer; this check turns such an index into
    an error instead of a quietly wrong result. `size` is an int or a tensor
    broadcastable to `idx` (one bound per index component).
    """
    if idx.type.size == 0:
        return
    bound = ctx.full(size, idx.type) if isinstance(size, int) else size
    low = ctx.op("compare", [idx, ctx.full(0, idx.type)], direction="lt")
    high = ctx.op("compare", [idx, bound], direction="ge")
    bad = ctx.convert(ctx.op("or", [low, high]), DType.I8)
    worst = ctx.reduce(bad, "max", tuple(range(idx.type.rank)))
    ok = ctx.op("compare", [worst, ctx.full(0, worst.type)], direction="eq")
    message = f"node '{ctx.node_name}' ({ctx.node_op}): {what}"
    ctx.b.op("check", [ok], message=message)


def _component_bounds(ctx: Ctx, idx: Value, sizes: Sequence[int]) -> Value:
    """[.., K] index vectors -> the size of the dim each component indexes, broadcast to idx."""
    bounds = ctx.constant(np.array(sizes, dtype=np.int64))
    return ctx.broadcast_in_dims(bounds, idx.type.shape, (idx.type.rank - 1,))


def _normalize_vectors(ctx: Ctx, indices: Value, sizes: Sequence[int], what: str) -> Value:
    """Index vectors (last dim K) as i64, negatives counted from the end of their dim, checked in range."""
    idx = ctx.convert(indices, DType.I64)
    bounds = _component_bounds(ctx, idx, sizes)
    negative = ctx.op("compare", [idx, ctx.full(0, idx.type)], direction="lt")
    idx = ctx.op("select", [negative, ctx.op("add", [idx, bounds]), idx])
    check_in_range(ctx, idx, bounds, what)
    return idx


def gather_axis(ctx: Ctx, x: Value, indices: Value, axis: int) -> Value:
    """numpy.take(x, indices, axis) for run-time indices: one gather, O(output) work."""
    shape = x.type.shape
    dim = shape[axis]
    idx = normalize_index(ctx, indices, dim)
    check_in_range(ctx, idx, dim, f"an index is outside [-{dim}, {dim}) for axis {axis} of {x.type}")
    r = idx.type.rank
    offset_dims = tuple(range(axis)) + tuple(range(axis + r, x.type.rank - 1 + r))
    slice_sizes = tuple(1 if d == axis else n for d, n in enumerate(shape))
    return ctx.op("gather", [x, idx], offset_dims=offset_dims, collapsed_slice_dims=(axis,),
                  start_index_map=(axis,), index_vector_dim=r, slice_sizes=slice_sizes)


def _move_to_end(ctx: Ctx, x: Value, axis: int) -> Value:
    perm = [d for d in range(x.type.rank) if d != axis] + [axis]
    return ctx.transpose(x, perm)


def _crop(ctx: Ctx, x: Value, shape: Sequence[int], keep: int) -> Value:
    """x cut down to `shape` on every dim except `keep`."""
    limit = [x.type.shape[d] if d == keep else shape[d] for d in range(x.type.rank)]
    if any(limit[d] > x.type.shape[d] for d in range(x.type.rank)):
        raise ctx.error(f"indices {shape} exceed {x.type} on a dim other than axis {keep}")
    if tuple(limit) == x.type.shape:
        return x
    return ctx.op("slice", [x], start=(0,) * x.type.rank, limit=tuple(limit), stride=(1,) * x.type.rank)


# -- gathers ------------------------------------------------------------------------
@op("GatherElements")
def _gather_elements(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """out[i..., j (at axis), k...] = x[i..., indices[i..., j, k...], k...]: a gather whose
    other dims are batching dims (paired position for position with the indices')."""
    x, indices = a.inputs
    rank = x.type.rank
    axis = norm_axis(ctx, a.attr("axis", 0), rank)
    if indices.type.rank != rank:
        raise ctx.error(f"indices {indices.type} and data {x.type} differ in rank")
    dim = x.type.shape[axis]
    idx = normalize_index(ctx, indices, dim)
    check_in_range(ctx, idx, dim, f"an index is outside [-{dim}, {dim}) for axis {axis} of {x.type}")
    x = _crop(ctx, x, indices.type.shape, axis)
    others = tuple(d for d in range(rank) if d != axis)
    return [ctx.op("gather", [x, idx], offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                   index_vector_dim=rank, slice_sizes=(1,) * rank, operand_batching_dims=others,
                   start_indices_batching_dims=others)]


@op("GatherND")
def _gather_nd(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """out[b..., m...] = data[b..., indices[b..., m..., :], rest...]: the batch dims pair up, the
    K index components pick the next K dims, the rest is the window."""
    data, indices = a.inputs
    nb = int(a.attr("batch_dims", 0))
    k = indices.type.shape[-1]
    rank = data.type.rank
    if not 0 <= nb < indices.type.rank or nb + k > rank:
        raise ctx.error(f"batch_dims {nb} and index vectors of {k} do not fit data {data.type} and indices {indices.type}")
    if indices.type.shape[:nb] != data.type.shape[:nb]:
        raise ctx.error(f"batch dims of {indices.type} and {data.type} differ")
    indexed = data.type.shape[nb:nb + k]
    idx = _normalize_vectors(ctx, indices, indexed,
                             f"an index vector is outside the dims {tuple(indexed)} it indexes in {data.type}")
    batch = tuple(range(nb))
    picked = tuple(range(nb, nb + k))
    n_out_batch = indices.type.rank - 1
    window = data.type.shape[nb + k:]
    return [ctx.op("gather", [data, idx], offset_dims=tuple(range(n_out_batch, n_out_batch + len(window))),
                   collapsed_slice_dims=picked, start_index_map=picked, index_vector_dim=indices.type.rank - 1,
                   slice_sizes=(1,) * (nb + k) + tuple(window), operand_batching_dims=batch,
                   start_indices_batching_dims=batch)]


# -- scatters -----------------------------------------------------------------------
_SCATTER_KINDS = {"none": "assign", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _scatter_kind(ctx: Ctx, a: NodeArgs) -> str:
    reduction = a.attr("reduction", "none")
    if reduction not in _SCATTER_KINDS:
        raise ctx.unsupported(f"reduction '{reduction}'")
    return _SCATTER_KINDS[reduction]


@op("ScatterElements", "Scatter")
def _scatter_elements(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """out = data; out[i..., indices[i..., j, k...] (at axis), k...] = updates[i..., j, k...] (or combined),
    updates in index order: one scatter whose index vectors are the element's own position with
    the axis component replaced by the index."""
    data, indices, updates = a.inputs
    rank = data.type.rank
    axis = norm_axis(ctx, a.attr("axis", 0), rank)
    kind = _scatter_kind(ctx, a)
    if indices.type.shape != updates.type.shape or indices.type.rank != rank:
        raise ctx.error(f"indices {indices.type} and updates {updates.type} must have one shape, of data's rank {rank}")
    if any(n > data.type.shape[d] for d, n in enumerate(indices.type.shape) if d != axis):
        raise ctx.error(f"indices {indices.type} exceed data {data.type} on a dim other than axis {axis}")
    dim = data.type.shape[axis]
    idx = normalize_index(ctx, indices, dim)
    check_in_range(ctx, idx, dim, f"an index is outside [-{dim}, {dim}) for axis {axis} of {data.type}")
    shape = idx.type.shape
    components = [idx if d == axis else ctx.op("iota", [], shape=shape, dim=d, dtype=DType.I64) for d in range(rank)]
    vectors = ctx.op("concat", [ctx.reshape(c, shape + (1,)) for c in components], axis=rank)
    return [ctx.op("scatter", [data, vectors, updates], kind=kind, update_window_dims=(),
                   inserted_window_dims=tuple(range(rank)), scatter_dims_to_operand_dims=tuple(range(rank)),
                   index_vector_dim=rank)]


@op("ScatterND")
def _scatter_nd(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """out = data; out[indices[m..., :], rest...] = updates[m..., rest...] (or combined), in index order."""
    data, indices, updates = a.inputs
    kind = _scatter_kind(ctx, a)
    k = indices.type.shape[-1]
    if k > data.type.rank:
        raise ctx.error(f"index vectors of {k} exceed data {data.type}")
    indexed, rest = data.type.shape[:k], data.type.shape[k:]
    batch = indices.type.shape[:-1]
    if updates.type.shape != batch + rest:
        raise ctx.error(f"updates {updates.type} must be {batch + rest} for indices {indices.type} and data {data.type}")
    idx = _normalize_vectors(ctx, indices, indexed,
                             f"an index vector is outside the dims {tuple(indexed)} it indexes in {data.type}")
    return [ctx.op("scatter", [data, idx, updates], kind=kind,
                   update_window_dims=tuple(range(len(batch), len(batch) + len(rest))),
                   inserted_window_dims=tuple(range(k)), scatter_dims_to_operand_dims=tuple(range(k)),
                   index_vector_dim=indices.type.rank - 1)]


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
