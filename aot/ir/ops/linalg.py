"""dot (general contraction) and conv (N-d, grouped, strided, dilated, padded)."""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import TensorType
from aot.ir.ops.registry import register


def dot_free_dims(rank: int, batch: tuple[int, ...], contract: tuple[int, ...]) -> list[int]:
    return [d for d in range(rank) if d not in batch and d not in contract]


def _dot_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """out dims = batch dims, then lhs free dims, then rhs free dims (XLA dot_general)."""
    lhs, rhs = ins
    keys = ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract")
    lb, rb, lc, rc = (attrs.get(k) for k in keys)
    if not all(isinstance(v, tuple) for v in (lb, rb, lc, rc)) or len(lb) != len(rb) or len(lc) != len(rc):
        raise IRError(f"dot needs {', '.join(keys)} attributes of matching lengths")
    if lhs.dtype != rhs.dtype:
        raise IRError(f"dot operands differ in dtype: {lhs} and {rhs}")
    for l_dims, r_dims, what in ((lb, rb, "batch"), (lc, rc, "contracting")):
        for ld, rd in zip(l_dims, r_dims):
            if not (0 <= ld < lhs.rank and 0 <= rd < rhs.rank) or lhs.shape[ld] != rhs.shape[rd]:
                raise IRError(f"dot {what} dims {ld} of {lhs} and {rd} of {rhs} do not match")
    if len(set(lb + lc)) != len(lb + lc) or len(set(rb + rc)) != len(rb + rc):
        raise IRError("dot: a dim is listed twice")
    shape = [lhs.shape[d] for d in lb]
    shape += [lhs.shape[d] for d in dot_free_dims(lhs.rank, lb, lc)]
    shape += [rhs.shape[d] for d in dot_free_dims(rhs.rank, rb, rc)]
    return lhs.with_shape(tuple(shape))


def _dot_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    lhs, rhs = ins
    lb, rb, lc, rc = attrs["lhs_batch"], attrs["rhs_batch"], attrs["lhs_contract"], attrs["rhs_contract"]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lhs_sub = [""] * lhs.ndim
    rhs_sub = [""] * rhs.ndim
    for ld, rd in zip(lb + lc, rb + rc):
        lhs_sub[ld] = rhs_sub[rd] = next(letters)
    for d in range(lhs.ndim):
        lhs_sub[d] = lhs_sub[d] or next(letters)
    for d in range(rhs.ndim):
        rhs_sub[d] = rhs_sub[d] or next(letters)
    out_sub = [lhs_sub[d] for d in lb]
    out_sub += [lhs_sub[d] for d in dot_free_dims(lhs.ndim, lb, lc)]
    out_sub += [rhs_sub[d] for d in dot_free_dims(rhs.ndim, rb, rc)]
    spec = f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out_sub)}"
    wide = np.float64 if lhs.dtype.kind == "f" or lhs.dtype.name == "bfloat16" else lhs.dtype
    return np.einsum(spec, lhs.astype(wide), rhs.astype(wide))


def dilated_size(size: int, dilation: int) -> int:
    """Extent of `size` elements with dilation - 1 holes between neighbours."""
    return (size - 1) * dilation + 1 if size > 0 else 0


def conv_output_spatial(
    in_spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
    padding: Sequence[tuple[int, int]], dilation: Sequence[int], lhs_dilation: Sequence[int] | None = None,
) -> tuple[int, ...]:
    out = []
    lhs_dilation = lhs_dilation or (1,) * len(in_spatial)
    for size, k, s, (lo, hi), d, ld in zip(in_spatial, kernel, strides, padding, dilation, lhs_dilation):
        span = d * (k - 1) + 1
        out.append((dilated_size(size, ld) + lo + hi - span) // s + 1)
    return tuple(out)


def conv_lhs_dilation(attrs: dict[str, Any], spatial_dims: int) -> tuple[int, ...]:
    """The optional `lhs_dilation` (input dilation; transposed convolution), all 1 when absent."""
    value = attrs.get("lhs_dilation", (1,) * spatial_dims)
    if not isinstance(value, tuple) or len(value) != spatial_dims or not all(isinstance(v, int) and v >= 1 for v in value):
        raise IRError(f"conv lhs_dilation must be {spatial_dims} integers >= 1, got {value!r}")
    return value


def _conv_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """x [N, C, *S], w [O, C/groups, *K] -> [N, O, *S'] (NCHW / OIHW).

    Optional `lhs_dilation` spreads the input with zeros (d - 1 between
    neighbours) before padding: transposed convolution, as XLA's lhs_dilation.
    """
    x, w = ins
    nsp = x.rank - 2
    strides, padding, dilation, groups = (attrs.get(k) for k in ("strides", "padding", "dilation", "groups"))
    if x.rank < 3 or w.rank != x.rank or x.dtype != w.dtype:
        raise IRError(f"conv needs x [N,C,*S] and w [O,C/g,*K] of one dtype, got {x} and {w}")
    if not (isinstance(strides, tuple) and isinstance(padding, tuple) and isinstance(dilation, tuple)):
        raise IRError("conv needs strides, padding and dilation attributes")
    if not len(strides) == len(padding) == len(dilation) == nsp or not isinstance(groups, int) or groups < 1:
        raise IRError(f"conv on {x}: strides/padding/dilation need {nsp} entries and groups >= 1")
    if x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise IRError(f"conv: input channels {x.shape[1]} != {w.shape[1]} x groups {groups}, or {w.shape[0]} outputs not divisible")
    lhs_dilation = conv_lhs_dilation(attrs, nsp)
    spatial = conv_output_spatial(x.shape[2:], w.shape[2:], strides, padding, dilation, lhs_dilation)
    if min(strides + dilation) < 1 or any(lo < 0 or hi < 0 for lo, hi in padding) or min(spatial, default=1) < 1:
        raise IRError(f"conv on {x} with kernel {w.shape[2:]}: strides {strides}, padding {padding}, dilation {dilation} give no output")
    return x.with_shape((x.shape[0], w.shape[0]) + spatial)


def _conv_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x, w = ins
    wide = np.float64 if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else np.int64
    x, w = x.astype(wide), w.astype(wide)
    lhs_dilation = conv_lhs_dilation(attrs, x.ndim - 2)
    if any(d > 1 for d in lhs_dilation):
        spread = np.zeros(x.shape[:2] + tuple(dilated_size(n, d) for n, d in zip(x.shape[2:], lhs_dilation)), dtype=wide)
        spread[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
        x = spread
    groups = attrs["groups"]
    strides, dilation = attrs["strides"], attrs["dilation"]
    n, c = x.shape[:2]
    o = w.shape[0]
    xp = np.pad(x, [(0, 0), (0, 0)] + list(attrs["padding"]))
    xg = xp.reshape((n, groups, c // groups) + xp.shape[2:])
    wg = w.reshape((groups, o // groups) + w.shape[1:])
    result = np.zeros((n, groups, o // groups) + out.shape[2:], dtype=wide)
    for offsets in itertools.product(*(range(k) for k in w.shape[2:])):
        index = tuple(
            slice(off * d, off * d + (size - 1) * s + 1, s)
            for off, d, s, size in zip(offsets, dilation, strides, out.shape[2:])
        )
        patch = xg[(slice(None), slice(None), slice(None)) + index]  # n g c *S'
        kernel = wg[(slice(None), slice(None), slice(None)) + offsets]  # g o c
        result += np.einsum("ngc...,goc->ngo...", patch, kernel)
    return result.reshape(out.shape)


register("dot", _dot_infer, _dot_ref, 2)
register("conv", _conv_infer, _conv_ref, 2)
