"""Data-movement ops: constant, broadcast, reshape, transpose, slice, concat, pad, iota.

Each output element is one input element (or the pad value), so codegen
handles all of them as index maps and fuses them freely.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.arith import ceil_div
from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops.registry import register


def _ints(attrs: dict[str, Any], key: str, op: str) -> tuple[int, ...]:
    value = attrs.get(key)
    if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value):
        raise IRError(f"{op} needs an integer list attribute '{key}', got {value!r}")
    return value


def _constant_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    value = attrs.get("value")
    if not isinstance(value, np.ndarray):
        raise IRError("constant needs an array attribute 'value'")
    return TensorType(DType.from_numpy(value.dtype), tuple(int(d) for d in value.shape))


def _constant_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return attrs["value"]


def _broadcast_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """out = broadcast_in_dim: operand dim i becomes output dim dims[i] (size equal, or 1 to expand)."""
    (x,) = ins
    shape = _ints(attrs, "shape", "broadcast")
    dims = _ints(attrs, "dims", "broadcast")
    if len(dims) != x.rank or len(set(dims)) != len(dims) or list(dims) != sorted(dims):
        raise IRError(f"broadcast dims {dims} must be increasing, one per operand dim of {x}")
    for i, d in enumerate(dims):
        if not 0 <= d < len(shape) or x.shape[i] not in (1, shape[d]):
            raise IRError(f"broadcast: operand {x} dim {i} does not fit output dim {d} of {shape}")
    return TensorType(x.dtype, shape)


def _broadcast_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x = ins[0]
    expanded_shape = [1] * out.rank
    for i, d in enumerate(attrs["dims"]):
        expanded_shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded_shape), out.shape)


def _reshape_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (x,) = ins
    shape = _ints(attrs, "shape", "reshape")
    result = TensorType(x.dtype, shape)
    if result.size != x.size:
        raise IRError(f"reshape of {x} ({x.size} elements) to {list(shape)} ({result.size} elements)")
    return result


def _reshape_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return ins[0].reshape(out.shape)


def _transpose_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (x,) = ins
    perm = _ints(attrs, "perm", "transpose")
    if sorted(perm) != list(range(x.rank)):
        raise IRError(f"transpose perm {perm} is not a permutation of {x.rank} dims")
    return TensorType(x.dtype, tuple(x.shape[p] for p in perm))


def _transpose_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return np.transpose(ins[0], attrs["perm"])


def _slice_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """Static strided slice: start <= limit, stride >= 1 per dim (negative strides are lowered to reverse+slice)."""
    (x,) = ins
    start, limit, stride = (_ints(attrs, k, "slice") for k in ("start", "limit", "stride"))
    if not len(start) == len(limit) == len(stride) == x.rank:
        raise IRError(f"slice of {x} needs start/limit/stride of rank {x.rank}")
    shape = []
    for dim, (s, e, st) in enumerate(zip(start, limit, stride)):
        if st < 1 or not 0 <= s <= e <= x.shape[dim]:
            raise IRError(f"slice of {x}: dim {dim} has start {s}, limit {e}, stride {st}")
        shape.append(ceil_div(e - s, st))
    return TensorType(x.dtype, tuple(shape))


def _slice_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    index = tuple(slice(s, e, st) for s, e, st in zip(attrs["start"], attrs["limit"], attrs["stride"]))
    return ins[0][index]


def _concat_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    axis = attrs.get("axis")
    first = ins[0]
    if not isinstance(axis, int) or not 0 <= axis < first.rank:
        raise IRError(f"concat axis {axis!r} out of range for {first}")
    total = 0
    for t in ins:
        same = t.dtype == first.dtype and t.rank == first.rank
        if not same or any(t.shape[d] != first.shape[d] for d in range(first.rank) if d != axis):
            raise IRError(f"concat along {axis}: {t} does not match {first}")
        total += t.shape[axis]
    return first.with_shape(first.shape[:axis] + (total,) + first.shape[axis + 1:])


def _concat_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return np.concatenate(ins, axis=attrs["axis"])


def _pad_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """Constant padding: `low`/`high` elements of `value` before/after each dim (non-negative)."""
    (x,) = ins
    low, high = _ints(attrs, "low", "pad"), _ints(attrs, "high", "pad")
    if len(low) != x.rank or len(high) != x.rank or min(low + high, default=0) < 0:
        raise IRError(f"pad of {x} needs non-negative low/high of rank {x.rank}, got {low}, {high}")
    if not isinstance(attrs.get("value"), (int, float)):
        raise IRError("pad needs a numeric 'value' attribute")
    return x.with_shape(tuple(d + lo + hi for d, lo, hi in zip(x.shape, low, high)))


def _pad_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    widths = list(zip(attrs["low"], attrs["high"]))
    return np.pad(ins[0], widths, constant_values=np.array(attrs["value"]).astype(ins[0].dtype))


def _iota_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """out[i0, .., in] = i_dim; shape and dtype come from attributes."""
    shape = _ints(attrs, "shape", "iota")
    dim, dtype = attrs.get("dim"), attrs.get("dtype")
    if not isinstance(dim, int) or not 0 <= dim < len(shape) or not isinstance(dtype, DType):
        raise IRError(f"iota needs dim in [0, {len(shape)}) and a dtype, got {dim!r}, {dtype!r}")
    return TensorType(dtype, shape)


def _iota_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    shape = [1] * out.rank
    shape[attrs["dim"]] = out.shape[attrs["dim"]]
    return np.broadcast_to(np.arange(out.shape[attrs["dim"]]).reshape(shape), out.shape)


register("constant", _constant_infer, _constant_ref, 0)
register("iota", _iota_infer, _iota_ref, 0)
register("broadcast", _broadcast_infer, _broadcast_ref, 1)
register("reshape", _reshape_infer, _reshape_ref, 1)
register("transpose", _transpose_infer, _transpose_ref, 1)
register("slice", _slice_infer, _slice_ref, 1)
register("concat", _concat_infer, _concat_ref, None)
register("pad", _pad_infer, _pad_ref, 1)
