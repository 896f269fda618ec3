"""Reductions: reduce over axes, and reduce_window (pooling)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ops.registry import register

REDUCE_KINDS = ("sum", "max", "min", "prod")


def reduce_identity(kind: str, dtype: DType) -> float | int | bool:
    """The value a reduction starts from (and pads windows with)."""
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if dtype.is_float:
        return float("-inf") if kind == "max" else float("inf")
    if dtype is DType.BOOL:
        return kind == "min"
    info = np.iinfo(dtype.to_numpy())
    return int(info.min) if kind == "max" else int(info.max)


def _accumulate_dtype(x: np.ndarray) -> np.dtype:
    return np.dtype(np.float64) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x.dtype


def _reduce_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (x,) = ins
    kind, axes = attrs.get("kind"), attrs.get("axes")
    if kind not in REDUCE_KINDS:
        raise IRError(f"reduce kind must be one of {REDUCE_KINDS}, got {kind!r}")
    if not isinstance(axes, tuple) or list(axes) != sorted(set(axes)) or any(not 0 <= a < x.rank for a in axes):
        raise IRError(f"reduce axes {axes!r} must be increasing dims of {x}")
    return x.with_shape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def _reduce_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x = ins[0]
    x = x.astype(_accumulate_dtype(x))
    kind, axes = attrs["kind"], attrs["axes"]
    if kind == "sum":
        return np.sum(x, axis=axes)
    if kind == "prod":
        return np.prod(x, axis=axes)
    init = reduce_identity(kind, out.dtype)
    fn = np.max if kind == "max" else np.min
    return fn(x, axis=axes, initial=init)


def _window_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """Sliding-window reduction; padded positions hold the reduction's identity."""
    (x,) = ins
    kind = attrs.get("kind")
    window, strides, padding = attrs.get("window"), attrs.get("strides"), attrs.get("padding")
    if kind not in ("sum", "max", "min"):
        raise IRError(f"reduce_window kind must be sum, max or min, got {kind!r}")
    if not (isinstance(window, tuple) and isinstance(strides, tuple) and isinstance(padding, tuple)):
        raise IRError("reduce_window needs window, strides and padding attributes")
    if not len(window) == len(strides) == len(padding) == x.rank:
        raise IRError(f"reduce_window on {x}: window/strides/padding must have rank {x.rank}")
    shape = []
    for d, (w, s, (lo, hi)) in enumerate(zip(window, strides, padding)):
        padded = x.shape[d] + lo + hi
        if w < 1 or s < 1 or lo < 0 or hi < 0 or padded < w:
            raise IRError(f"reduce_window on {x}: dim {d} window {w}, stride {s}, padding ({lo}, {hi}) does not fit")
        shape.append((padded - w) // s + 1)
    return x.with_shape(tuple(shape))


def _window_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x = ins[0]
    kind = attrs["kind"]
    init = reduce_identity(kind, out.dtype)
    x = x.astype(_accumulate_dtype(x))
    padded = np.pad(x, attrs["padding"], constant_values=init)
    views = np.lib.stride_tricks.sliding_window_view(padded, attrs["window"])
    views = views[tuple(slice(None, None, s) for s in attrs["strides"])]
    views = views[tuple(slice(0, n) for n in out.shape)]
    axes = tuple(range(out.rank, 2 * out.rank))
    return {"sum": np.sum, "max": np.max, "min": np.min}[kind](views, axis=axes)


register("reduce", _reduce_infer, _reduce_ref, 1)
register("reduce_window", _window_infer, _window_ref, 1)
