"""Indexing and sorting: gather, scatter, dynamic_slice, dynamic_update_slice, sort.

Dynamic slices whose starts fold to constants become static slices/concats
(what fori_loop/scan unrolling produces); other starts go through gather and
scatter, clamped as StableHLO specifies.
"""
from __future__ import annotations

import numpy as np

from aot.ir import DType, Value
from aot.registry import registry

from .context import Ctx
from .regions import comparator_descending, scatter_kind
from .syntax import Op

OPS, op = registry()  # op name -> lowering (cx, op, operands) -> results


def _dims(d: dict, key: str) -> tuple[int, ...]:
    return tuple(int(v) for v in d.get(key, ()))


@op("stablehlo.gather")
def _gather(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    dn = o.attrs.get("dimension_numbers")
    if not isinstance(dn, dict):
        raise cx.error("gather needs dimension_numbers")
    return [cx.op("gather", ins,
                  offset_dims=_dims(dn, "offset_dims"), collapsed_slice_dims=_dims(dn, "collapsed_slice_dims"),
                  start_index_map=_dims(dn, "start_index_map"), index_vector_dim=int(dn.get("index_vector_dim", 0)),
                  operand_batching_dims=_dims(dn, "operand_batching_dims"),
                  start_indices_batching_dims=_dims(dn, "start_indices_batching_dims"),
                  slice_sizes=cx.ints("slice_sizes"))]


@op("stablehlo.scatter")
def _scatter(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    if len(ins) != 3:
        raise cx.unsupported("scatter of several operands at once is not supported")
    dn = o.attrs.get("scatter_dimension_numbers")
    if not isinstance(dn, dict) or not o.regions:
        raise cx.error("scatter needs scatter_dimension_numbers and an update region")
    kind = scatter_kind(o.regions[0].blocks[0])
    if kind is None:
        raise cx.unsupported("scatter update region is not assign, add, multiply, maximum or minimum")
    return [cx.op("scatter", ins, kind=kind,
                  update_window_dims=_dims(dn, "update_window_dims"), inserted_window_dims=_dims(dn, "inserted_window_dims"),
                  scatter_dims_to_operand_dims=_dims(dn, "scatter_dims_to_operand_dims"),
                  index_vector_dim=int(dn.get("index_vector_dim", 0)),
                  input_batching_dims=_dims(dn, "input_batching_dims"),
                  scatter_indices_batching_dims=_dims(dn, "scatter_indices_batching_dims"))]


def _constant_starts(cx: Ctx, starts: list[Value], shape: tuple[int, ...], sizes: tuple[int, ...]) -> list[int] | None:
    """Start indices clamped to [0, dim - size] (the spec), or None when one is not a constant."""
    result = []
    for v, dim, size in zip(starts, shape, sizes):
        array = cx.const(v)
        if array is None:
            return None
        result.append(int(np.clip(int(array.reshape(())), 0, dim - size)))
    return result


def _index_vector(cx: Ctx, starts: list[Value], shape: tuple[int, ...], sizes: tuple[int, ...]) -> Value:
    """The scalar starts as one i32/i64 vector, each clamped to [0, dim - size]."""
    dtype = DType.I64 if any(v.type.dtype is DType.I64 for v in starts) else DType.I32
    parts = []
    for v, dim, size in zip(starts, shape, sizes):
        v = cx.convert(v, dtype)
        v = cx.op("max", [v, cx.full(0, v.type)])
        v = cx.op("min", [v, cx.full(dim - size, v.type)])
        parts.append(cx.reshape(v, (1,)))
    return parts[0] if len(parts) == 1 else cx.op("concat", parts, axis=0)


@op("stablehlo.dynamic_slice")
def _dynamic_slice(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    x, starts = ins[0], ins[1:]
    sizes = cx.ints("slice_sizes")
    rank = x.type.rank
    begin = _constant_starts(cx, starts, x.type.shape, sizes)
    if begin is not None:
        limit = tuple(b + s for b, s in zip(begin, sizes))
        return [cx.op("slice", [x], start=tuple(begin), limit=limit, stride=(1,) * rank)]
    index = _index_vector(cx, starts, x.type.shape, sizes)
    return [cx.op("gather", [x, index], offset_dims=tuple(range(rank)), collapsed_slice_dims=(),
                  start_index_map=tuple(range(rank)), index_vector_dim=0, slice_sizes=sizes)]


@op("stablehlo.dynamic_update_slice")
def _dynamic_update_slice(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    x, update, starts = ins[0], ins[1], ins[2:]
    sizes = update.type.shape
    begin = _constant_starts(cx, starts, x.type.shape, sizes)
    if begin is not None:
        return [_paste(cx, x, update, begin, 0)]
    index = _index_vector(cx, starts, x.type.shape, sizes)
    rank = x.type.rank
    return [cx.op("scatter", [x, index, update], kind="assign", update_window_dims=tuple(range(rank)),
                  inserted_window_dims=(), scatter_dims_to_operand_dims=tuple(range(rank)), index_vector_dim=0)]


def _paste(cx: Ctx, x: Value, update: Value, begin: list[int], dim: int) -> Value:
    """x with `update` written at `begin`, as slices and concats (dim by dim, outermost first)."""
    if dim == x.type.rank or x.type.shape == update.type.shape:
        return update
    shape = x.type.shape
    lo, hi = begin[dim], begin[dim] + update.type.shape[dim]

    def part(a: int, b: int) -> Value:
        start = tuple(a if d == dim else 0 for d in range(len(shape)))
        limit = tuple(b if d == dim else n for d, n in enumerate(shape))
        return cx.op("slice", [x], start=start, limit=limit, stride=(1,) * len(shape))

    middle = _paste(cx, part(lo, hi), update, [0 if d == dim else b for d, b in enumerate(begin)], dim + 1)
    pieces = ([part(0, lo)] if lo > 0 else []) + [middle] + ([part(hi, shape[dim])] if hi < shape[dim] else [])
    return pieces[0] if len(pieces) == 1 else cx.op("concat", pieces, axis=dim)


@op("stablehlo.sort")
def _sort(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    """jnp.sort (one operand) and jnp.argsort (values, iota): comparators keyed on operand 0."""
    dim = cx.int_attr("dimension", 0)
    if dim < 0:
        dim += ins[0].type.rank
    descending = comparator_descending(o.regions[0].blocks[0]) if o.regions else None
    if descending is None or len(ins) > 2:
        raise cx.unsupported("sort comparator is not a single-key less-than/greater-than (as jnp.sort/argsort emit)")
    x = ins[0]
    values = cx.op("sort", [x], dim=dim, descending=descending)
    if len(ins) == 1:
        return [values]
    other = ins[1]
    if not _is_iota(cx, other, dim):
        raise cx.unsupported("sort carrying a second operand other than an iota along the sort dim is not supported")
    dtype = other.type.dtype if other.type.dtype in (DType.I32, DType.I64) else DType.I64
    order = cx.op("argsort", [x], dim=dim, descending=descending, dtype=dtype)
    return [values, cx.convert(order, other.type.dtype)]


def _is_iota(cx: Ctx, v: Value, dim: int) -> bool:
    node = v.producer
    if node is not None and node.op == "iota":
        return node.attrs.get("dim") == dim
    array = cx.const(v)
    if array is None:
        return False
    shape = [1] * array.ndim
    shape[dim] = array.shape[dim]
    return bool(np.array_equal(array, np.broadcast_to(np.arange(array.shape[dim]).reshape(shape), array.shape)))
