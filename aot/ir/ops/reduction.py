"""Reductions: reduce over axes, and reduce_window (pooling)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops.linalg import dilated_size
from aot.ir.ops.registry import register

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


def window_dilations(attrs: dict[str, Any], rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(base_dilation, window_dilation): optional, all 1 when absent."""
    result = []
    for key in ("base_dilation", "window_dilation"):
        value = attrs.get(key, (1,) * rank)
        if not isinstance(value, tuple) or len(value) != rank or not all(isinstance(v, int) and v >= 1 for v in value):
            raise IRError(f"reduce_window {key} must be {rank} integers >= 1, got {value!r}")
        result.append(value)
    return result[0], result[1]


def _window_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """Sliding-window reduction; padded positions hold the reduction's identity.

    Optional `base_dilation` spreads the input (holes hold the identity too)
    and `window_dilation` spreads the window, as StableHLO reduce_window.
    """
    (x,) = ins
    kind = attrs.get("kind")
    window, strides, padding = attrs.get("window"), attrs.get("strides"), attrs.get("padding")
    if kind not in ("sum", "max", "min"):
        raise IRError(f"reduce_window kind must be sum, max or min, got {kind!r}")
    if not (isinstance(window, tuple) and isinstance(strides, tuple) and isinstance(padding, tuple)):
        raise IRError("reduce_window needs window, strides and padding attributes")
    if not len(window) == len(strides) == len(padding) == x.rank:
        raise IRError(f"reduce_window on {x}: window/strides/padding must have rank {x.rank}")
    base_dilation, window_dilation = window_dilations(attrs, x.rank)
    shape = []
    for d, (w, s, (lo, hi)) in enumerate(zip(window, strides, padding)):
        padded = dilated_size(x.shape[d], base_dilation[d]) + lo + hi
        span = dilated_size(w, window_dilation[d])
        if w < 1 or s < 1 or lo < 0 or hi < 0 or padded < span:
            raise IRError(f"reduce_window on {x}: dim {d} window {w}, stride {s}, padding ({lo}, {hi}) does not fit")
        shape.append((padded - span) // s + 1)
    return x.with_shape(tuple(shape))


def _window_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x = ins[0]
    kind = attrs["kind"]
    init = reduce_identity(kind, out.dtype)
    x = x.astype(_accumulate_dtype(x))
    base_dilation, window_dilation = window_dilations(attrs, x.ndim)
    if any(d > 1 for d in base_dilation):
        spread = np.full(tuple(dilated_size(n, d) for n, d in zip(x.shape, base_dilation)), init, dtype=x.dtype)
        spread[tuple(slice(None, None, d) for d in base_dilation)] = x
        x = spread
    padded = np.pad(x, attrs["padding"], constant_values=init)
    spans = tuple(dilated_size(w, d) for w, d in zip(attrs["window"], window_dilation))
    views = np.lib.stride_tricks.sliding_window_view(padded, spans)
    views = views[tuple(slice(None, None, s) for s in attrs["strides"])]
    views = views[(Ellipsis,) + tuple(slice(None, None, d) for d in window_dilation)]
    views = views[tuple(slice(0, n) for n in out.shape)]
    axes = tuple(range(out.rank, 2 * out.rank))
    return {"sum": np.sum, "max": np.max, "min": np.min}[kind](views, axis=axes)


register("reduce", _reduce_infer, _reduce_ref, 1)
register("reduce_window", _window_infer, _window_ref, 1)
