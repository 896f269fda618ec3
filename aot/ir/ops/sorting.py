"""Sorting along one dim: sort (values) and argsort (stable indices).

sort(x)    {dim, descending}            -> x's type, each row along `dim` sorted
argsort(x) {dim, descending, dtype}     -> dtype (i32 or i64) indices into the row

Order (one total order, shared by the reference and codegen):
- stable: equal keys keep their original order, ascending and descending
  alike (descending is not the reverse of ascending);
- NaN compares greater than every number: last ascending (like numpy),
  first descending; -0.0 and 0.0 are equal (so they keep their order);
- bool sorts False < True; unsigned ints compare unsigned.
sort is argsort followed by a gather of the row, so both agree exactly.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops.registry import register

ARGSORT_DTYPES = (DType.I32, DType.I64)


def _dim(x: TensorType, attrs: dict[str, Any], op: str) -> int:
    dim = attrs.get("dim")
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < x.rank:
        raise IRError(f"{op} needs dim in [0, {x.rank}) for {x}, got {dim!r}")
    if not isinstance(attrs.get("descending"), bool):
        raise IRError(f"{op} needs a bool attribute 'descending', got {attrs.get('descending')!r}")
    return dim


def _sort_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (x,) = ins
    _dim(x, attrs, "sort")
    return x


def _argsort_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (x,) = ins
    _dim(x, attrs, "argsort")
    dtype = attrs.get("dtype")
    if dtype not in ARGSORT_DTYPES:
        raise IRError(f"argsort dtype must be i32 or i64, got {dtype!r}")
    return x.with_dtype(dtype)


def stable_argsort(x: np.ndarray, dim: int, descending: bool) -> np.ndarray:
    """Stable indices in the order documented above (numpy's stable sort puts NaN last)."""
    if x.dtype.name == "bfloat16" or x.dtype.kind == "f" and x.dtype.itemsize < 4:
        x = x.astype(np.float32)  # exact; ml_dtypes' sort order need not match numpy's
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    # sort the reversed row ascending, then reverse: ties end up in original order, NaN first
    n = x.shape[dim]
    flipped = np.argsort(np.flip(x, axis=dim), axis=dim, kind="stable")
    return (n - 1) - np.flip(flipped, axis=dim)


def _sort_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x = ins[0]
    order = stable_argsort(x, attrs["dim"], attrs["descending"])
    return np.take_along_axis(x, order, axis=attrs["dim"])


def _argsort_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return stable_argsort(ins[0], attrs["dim"], attrs["descending"])


register("sort", _sort_infer, _sort_ref, 1)
register("argsort", _argsort_infer, _argsort_ref, 1)
