"""Data movement: broadcast_in_dim, reshape, transpose, slice, concatenate, pad, iota, reverse,
plus the dynamic-shape ops of shape-polymorphic exports, whose shape operands fold to constants
once --shape fixes the inputs."""
from __future__ import annotations

import numpy as np

from aot.ir import Value
from aot.ir.types import TensorType
from aot.registry import registry

from .context import Ctx
from .syntax import Op

OPS, op = registry()  # op name -> lowering (cx, op, operands) -> results


@op("stablehlo.constant")
def _constant(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    value = o.attrs.get("value")
    if not isinstance(value, np.ndarray):
        raise cx.error("constant needs a dense value")
    cx.dtype(o.result_types[0].elem if o.result_types else "")
    return [cx.constant(value)]


def broadcast_in_dim(cx: Ctx, x: Value, shape: tuple[int, ...], dims: tuple[int, ...]) -> Value:
    """StableHLO dims may be in any order; ours must increase, so transpose the operand first."""
    if len(dims) != x.type.rank:
        raise cx.error(f"broadcast_dimensions {dims} do not match operand {x.type}")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = cx.transpose(x, order)
    dims = tuple(dims[i] for i in order)
    if x.type.shape == shape and dims == tuple(range(len(shape))):
        return x
    return cx.op("broadcast", [x], shape=shape, dims=dims)


def _broadcast_shape(cx: Ctx, x: Value, dims: tuple[int, ...]) -> tuple[int, ...]:
    """The result shape, '?' dims taken from the operand dim mapped onto them."""
    declared = cx.result_type()
    if declared.shape is None:
        raise cx.error("broadcast result must be a tensor")
    shape = list(declared.shape)
    for i, d in enumerate(dims):
        if shape[d] is None:
            shape[d] = x.type.shape[i]
    if any(d is None for d in shape):
        raise cx.unsupported(f"cannot resolve the dynamic dims of {declared}")
    return tuple(int(d) for d in shape)


@op("stablehlo.broadcast_in_dim")
def _broadcast(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    dims = cx.ints("broadcast_dimensions")
    return [broadcast_in_dim(cx, ins[0], _broadcast_shape(cx, ins[0], dims), dims)]


@op("stablehlo.dynamic_broadcast_in_dim")
def _dynamic_broadcast(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    shape = _shape_operand(cx, ins[1])
    return [broadcast_in_dim(cx, ins[0], shape, cx.ints("broadcast_dimensions"))]


def _shape_operand(cx: Ctx, v: Value) -> tuple[int, ...]:
    array = cx.const(v)
    if array is None:
        raise cx.unsupported("the shape operand does not fold to a constant; fix the input shapes (shapes=, or --shape on the command line)")
    return tuple(int(d) for d in array.reshape(-1))


@op("stablehlo.reshape")
def _reshape(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    (x,) = ins
    declared = cx.result_type()
    dims = list(declared.shape or ())
    unknown = [i for i, d in enumerate(dims) if d is None]
    if len(unknown) == 1:  # one '?' left: it is what the element count leaves over
        known = int(np.prod([d for d in dims if d is not None], dtype=np.int64))
        dims[unknown[0]] = x.type.size // known if known else 0
    elif unknown:
        raise cx.unsupported(f"cannot resolve the dynamic dims of {declared}")
    return [cx.reshape(x, dims)]


@op("stablehlo.dynamic_reshape")
def _dynamic_reshape(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [cx.reshape(ins[0], _shape_operand(cx, ins[1]))]


@op("stablehlo.get_dimension_size")
def _dimension_size(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    dim = cx.int_attr("dimension")
    return [cx.constant(np.array(ins[0].type.shape[dim], dtype=np.int32))]


@op("stablehlo.transpose")
def _transpose(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [cx.transpose(ins[0], cx.ints("permutation"))]


@op("stablehlo.reverse")
def _reverse(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    dims = tuple(sorted(set(cx.ints("dimensions"))))
    return [cx.op("reverse", ins, dims=dims) if dims else ins[0]]


@op("stablehlo.slice")
def _slice(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    start, limit, strides = cx.ints("start_indices"), cx.ints("limit_indices"), cx.ints("strides")
    return [cx.op("slice", ins, start=start, limit=limit, stride=strides)]


@op("stablehlo.real_dynamic_slice")
def _real_dynamic_slice(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    start, limit, strides = (_shape_operand(cx, v) for v in ins[1:4])
    return [cx.op("slice", ins[:1], start=start, limit=limit, stride=strides)]


@op("stablehlo.concatenate")
def _concatenate(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    axis = cx.int_attr("dimension")
    parts = [v for v in ins if v.type.shape[axis] > 0] or ins[:1]
    return [parts[0] if len(parts) == 1 else cx.op("concat", parts, axis=axis)]


@op("stablehlo.pad")
def _pad(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    """Edge padding; negative amounts crop (a slice). Interior padding is not supported."""
    x, value = ins
    low, high = cx.ints("edge_padding_low"), cx.ints("edge_padding_high")
    interior = cx.ints("interior_padding", (0,) * x.type.rank)
    if any(interior):
        raise cx.unsupported(f"interior padding {interior} is not supported")
    pad_value = cx.const(value)
    if pad_value is None:
        raise cx.unsupported("pad with a padding value that is not a constant")
    if any(d < 0 for d in low + high):
        start = tuple(max(0, -lo) for lo in low)
        limit = tuple(n - max(0, -hi) for n, hi in zip(x.type.shape, high))
        x = cx.op("slice", [x], start=start, limit=limit, stride=(1,) * x.type.rank)
        low, high = tuple(max(0, d) for d in low), tuple(max(0, d) for d in high)
    if not any(low + high):
        return [x]
    return [cx.op("pad", [x], low=low, high=high, value=pad_value.reshape(()).item())]


@op("stablehlo.iota")
def _iota(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    out = cx.static_result()
    return [cx.b.op("iota", [], shape=out.shape, dim=cx.int_attr("iota_dimension"), dtype=out.dtype)]


@op("stablehlo.dynamic_iota")
def _dynamic_iota(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    shape = _shape_operand(cx, ins[0])
    dtype = cx.dtype(cx.result_type().elem)
    return [cx.b.op("iota", [], shape=shape, dim=cx.int_attr("iota_dimension"), dtype=dtype)]


__all__ = ["OPS", "broadcast_in_dim", "TensorType"]
