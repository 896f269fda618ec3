"""Indexing ops: gather, scatter (XLA/StableHLO general forms) and reverse.

Attribute conventions follow the StableHLO spec names exactly, so importers
copy dimension numbers through unchanged:

gather(operand, indices)
    offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim,
    slice_sizes, operand_batching_dims = (), start_indices_batching_dims = ()
    Start indices are clamped to [0, operand_dim - slice_size] (spec), so a
    gather never reads out of bounds.

scatter(operand, indices, updates)
    update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
    index_vector_dim, input_batching_dims = (), scatter_indices_batching_dims = (),
    kind in SCATTER_KINDS (replaces the update region: assign, add, mul, max, min)
    Updates apply serially in row-major order of the update scatter index, so
    with duplicate indices `assign` keeps the last update and the others
    accumulate. An update window that does not fit entirely inside the operand
    is skipped as a whole (XLA's behaviour; the spec leaves it implementation-defined).

reverse(x) {dims}: out[i] = x[i with i_d -> size_d - 1 - i_d for d in dims].
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops.registry import register

SCATTER_KINDS = ("assign", "add", "mul", "max", "min")


def _ints(attrs: dict[str, Any], key: str, op: str, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    value = attrs.get(key, default)
    if not isinstance(value, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise IRError(f"{op} needs an integer list attribute '{key}', got {value!r}")
    return value


def _int(attrs: dict[str, Any], key: str, op: str) -> int:
    value = attrs.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise IRError(f"{op} needs an integer attribute '{key}', got {value!r}")
    return value


def _check_dims(dims: Sequence[int], rank: int, what: str, op: str, ordered: bool = False) -> None:
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        raise IRError(f"{op}: {what} {tuple(dims)} must be distinct dims in [0, {rank})")
    if ordered and list(dims) != sorted(dims):
        raise IRError(f"{op}: {what} {tuple(dims)} must be increasing")


def _index_dtype_ok(t: TensorType) -> bool:
    return t.dtype.is_int


def batch_position(dim: int, index_vector_dim: int) -> int:
    """Where indices dim `dim` sits among the batch dims (indices dims without index_vector_dim)."""
    return dim if dim < index_vector_dim else dim - 1


# == gather ===========================================================================
class GatherDims:
    """Validated gather attributes, with the derived maps codegen and the reference share."""

    def __init__(self, operand: TensorType, indices: TensorType, attrs: dict[str, Any]):
        op = "gather"
        self.offset_dims = _ints(attrs, "offset_dims", op)
        self.collapsed = _ints(attrs, "collapsed_slice_dims", op)
        self.start_index_map = _ints(attrs, "start_index_map", op)
        self.index_vector_dim = _int(attrs, "index_vector_dim", op)
        self.slice_sizes = _ints(attrs, "slice_sizes", op)
        self.operand_batching = _ints(attrs, "operand_batching_dims", op, ())
        self.indices_batching = _ints(attrs, "start_indices_batching_dims", op, ())
        if not _index_dtype_ok(indices):
            raise IRError(f"gather indices must be integers, got {indices}")
        if not 0 <= self.index_vector_dim <= indices.rank:
            raise IRError(f"gather: index_vector_dim {self.index_vector_dim} out of range for {indices}")
        vector = indices.shape[self.index_vector_dim] if self.index_vector_dim < indices.rank else 1
        if len(self.start_index_map) != vector:
            raise IRError(f"gather: start_index_map {self.start_index_map} needs {vector} entries (index vector of {indices})")
        if len(self.slice_sizes) != operand.rank:
            raise IRError(f"gather: slice_sizes {self.slice_sizes} needs one entry per dim of {operand}")
        _check_dims(self.collapsed, operand.rank, "collapsed_slice_dims", op, ordered=True)
        _check_dims(self.operand_batching, operand.rank, "operand_batching_dims", op, ordered=True)
        _check_dims(self.start_index_map, operand.rank, "start_index_map", op)
        _check_dims(self.indices_batching, indices.rank, "start_indices_batching_dims", op)
        if set(self.collapsed) & set(self.operand_batching):
            raise IRError("gather: a dim is both collapsed and batching")
        if set(self.start_index_map) & set(self.operand_batching):
            raise IRError("gather: a batching dim is also in start_index_map")
        if self.index_vector_dim in self.indices_batching or len(self.operand_batching) != len(self.indices_batching):
            raise IRError("gather: operand/start_indices batching dims must pair up and exclude index_vector_dim")
        for d, size in enumerate(self.slice_sizes):
            if not 0 <= size <= operand.shape[d]:
                raise IRError(f"gather: slice size {size} of dim {d} does not fit {operand}")
            if (d in self.collapsed or d in self.operand_batching) and size > 1:
                raise IRError(f"gather: collapsed or batching dim {d} needs slice size <= 1, got {size}")
        for od, idd in zip(self.operand_batching, self.indices_batching):
            if operand.shape[od] != indices.shape[idd]:
                raise IRError(f"gather: batching dims {od} of {operand} and {idd} of {indices} differ in size")
        self.batch_shape = tuple(s for d, s in enumerate(indices.shape) if d != self.index_vector_dim)
        # operand dims that appear in the result (in order), one per offset dim
        self.window_operand_dims = tuple(d for d in range(operand.rank) if d not in self.collapsed and d not in self.operand_batching)
        rank = len(self.batch_shape) + len(self.window_operand_dims)
        if len(self.offset_dims) != len(self.window_operand_dims):
            raise IRError(f"gather: offset_dims {self.offset_dims} needs {len(self.window_operand_dims)} entries")
        _check_dims(self.offset_dims, rank, "offset_dims", op, ordered=True)
        self.batch_dims = tuple(d for d in range(rank) if d not in self.offset_dims)
        shape = [0] * rank
        for d, b in zip(self.batch_dims, self.batch_shape):
            shape[d] = b
        for d, od in zip(self.offset_dims, self.window_operand_dims):
            shape[d] = self.slice_sizes[od]
        self.out_shape = tuple(shape)

    def start_map(self) -> dict[int, int]:
        """operand dim -> position in the index vector."""
        return {od: k for k, od in enumerate(self.start_index_map)}

    def batching_map(self) -> dict[int, int]:
        """operand batching dim -> position among the result's batch dims."""
        return {od: batch_position(idd, self.index_vector_dim) for od, idd in zip(self.operand_batching, self.indices_batching)}


def _gather_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    operand, indices = ins
    return operand.with_shape(GatherDims(operand, indices, attrs).out_shape)


def _index_vector(indices: np.ndarray, batch_index: tuple[int, ...], index_vector_dim: int) -> np.ndarray:
    if index_vector_dim == indices.ndim:
        return np.array([indices[batch_index]], dtype=np.int64)
    position = batch_index[:index_vector_dim] + (slice(None),) + batch_index[index_vector_dim:]
    return indices[position].astype(np.int64)


def _gather_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    operand, indices = ins
    dims = GatherDims(TensorType(out.dtype, operand.shape), TensorType(DType.I64, indices.shape), attrs)
    start_map, batching_map = dims.start_map(), dims.batching_map()
    window_shape = tuple(dims.slice_sizes[d] for d in dims.window_operand_dims)
    if operand.size == 0:  # only zero-size (collapsed) slices fit: nothing to read
        return np.zeros(out.shape, dtype=operand.dtype)
    blocks = np.zeros(dims.batch_shape + window_shape, dtype=operand.dtype)
    for batch_index in itertools.product(*(range(n) for n in dims.batch_shape)):
        vector = _index_vector(indices, batch_index, dims.index_vector_dim)
        region = []
        for d in range(operand.ndim):
            size = dims.slice_sizes[d]
            if d in start_map:
                start = int(np.clip(vector[start_map[d]], 0, operand.shape[d] - size))
            elif d in batching_map:
                start = batch_index[batching_map[d]]
            else:
                start = 0
            region.append(slice(start, start + size))
        window = operand[tuple(region)]
        blocks[batch_index] = window.reshape(window_shape)
    # blocks is [batch..., offset...]: move each group to its result dims
    order = list(dims.batch_dims) + list(dims.offset_dims)
    return np.transpose(blocks, np.argsort(order)) if order else blocks


# == scatter ==========================================================================
class ScatterDims:
    """Validated scatter attributes and the derived dim maps."""

    def __init__(self, operand: TensorType, indices: TensorType, updates: TensorType, attrs: dict[str, Any]):
        op = "scatter"
        self.update_window_dims = _ints(attrs, "update_window_dims", op)
        self.inserted = _ints(attrs, "inserted_window_dims", op)
        self.to_operand = _ints(attrs, "scatter_dims_to_operand_dims", op)
        self.index_vector_dim = _int(attrs, "index_vector_dim", op)
        self.input_batching = _ints(attrs, "input_batching_dims", op, ())
        self.indices_batching = _ints(attrs, "scatter_indices_batching_dims", op, ())
        self.kind = attrs.get("kind")
        if self.kind not in SCATTER_KINDS:
            raise IRError(f"scatter kind must be one of {SCATTER_KINDS}, got {self.kind!r}")
        if not _index_dtype_ok(indices):
            raise IRError(f"scatter indices must be integers, got {indices}")
        if updates.dtype != operand.dtype:
            raise IRError(f"scatter updates {updates} and operand {operand} differ in dtype")
        if not 0 <= self.index_vector_dim <= indices.rank:
            raise IRError(f"scatter: index_vector_dim {self.index_vector_dim} out of range for {indices}")
        vector = indices.shape[self.index_vector_dim] if self.index_vector_dim < indices.rank else 1
        if len(self.to_operand) != vector:
            raise IRError(f"scatter: scatter_dims_to_operand_dims {self.to_operand} needs {vector} entries")
        _check_dims(self.update_window_dims, updates.rank, "update_window_dims", op, ordered=True)
        _check_dims(self.inserted, operand.rank, "inserted_window_dims", op, ordered=True)
        _check_dims(self.input_batching, operand.rank, "input_batching_dims", op, ordered=True)
        _check_dims(self.to_operand, operand.rank, "scatter_dims_to_operand_dims", op)
        _check_dims(self.indices_batching, indices.rank, "scatter_indices_batching_dims", op)
        if set(self.inserted) & set(self.input_batching) or set(self.to_operand) & set(self.input_batching):
            raise IRError("scatter: a batching dim is also inserted or scattered into")
        if self.index_vector_dim in self.indices_batching or len(self.input_batching) != len(self.indices_batching):
            raise IRError("scatter: input/scatter_indices batching dims must pair up and exclude index_vector_dim")
        self.window_operand_dims = tuple(d for d in range(operand.rank) if d not in self.inserted and d not in self.input_batching)
        if len(self.update_window_dims) != len(self.window_operand_dims):
            raise IRError(f"scatter: update_window_dims {self.update_window_dims} needs {len(self.window_operand_dims)} entries for {operand}")
        self.scatter_shape = tuple(s for d, s in enumerate(indices.shape) if d != self.index_vector_dim)
        self.update_scatter_dims = tuple(d for d in range(updates.rank) if d not in self.update_window_dims)
        if tuple(updates.shape[d] for d in self.update_scatter_dims) != self.scatter_shape:
            raise IRError(f"scatter: updates {updates} scatter dims do not match indices {indices}")
        for ud, od in zip(self.update_window_dims, self.window_operand_dims):
            if updates.shape[ud] > operand.shape[od]:
                raise IRError(f"scatter: update window dim {ud} of {updates} exceeds operand dim {od} of {operand}")
        for od, idd in zip(self.input_batching, self.indices_batching):
            if operand.shape[od] != indices.shape[idd]:
                raise IRError(f"scatter: batching dims {od} of {operand} and {idd} of {indices} differ in size")
        self.window_shape = tuple(updates.shape[d] for d in self.update_window_dims)

    def start_map(self) -> dict[int, int]:
        """operand dim -> position in the index vector."""
        return {od: k for k, od in enumerate(self.to_operand)}

    def batching_map(self) -> dict[int, int]:
        """operand batching dim -> position among the update scatter dims."""
        return {od: batch_position(idd, self.index_vector_dim) for od, idd in zip(self.input_batching, self.indices_batching)}

    def window_extent(self, operand_dim: int) -> int:
        """Size of the update window along an operand dim (1 for inserted and batching dims)."""
        if operand_dim in self.window_operand_dims:
            return self.window_shape[self.window_operand_dims.index(operand_dim)]
        return 1


def _scatter_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    operand, indices, updates = ins
    ScatterDims(operand, indices, updates, attrs)
    return operand


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """Half types combine in float32 (as codegen does), rounded back after every update."""
    if dtype.kind == "f" and dtype.itemsize < 4 or dtype.name == "bfloat16":
        return np.dtype(np.float32)
    return dtype


def scatter_combine(kind: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    if kind == "assign":
        return new
    if old.dtype == np.bool_:
        return {"add": np.logical_or, "mul": np.logical_and, "max": np.logical_or, "min": np.logical_and}[kind](old, new)
    # max/min propagate NaN, like the max/min ops
    fn = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[kind]
    wide = _compute_dtype(old.dtype)
    with np.errstate(all="ignore"):
        return fn(old.astype(wide), new.astype(wide)).astype(old.dtype)


def _scatter_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    operand, indices, updates = ins
    dims = ScatterDims(TensorType(out.dtype, operand.shape), TensorType(DType.I64, indices.shape),
                       TensorType(out.dtype, updates.shape), attrs)
    result = np.array(operand, copy=True)
    start_map, batching_map = dims.start_map(), dims.batching_map()
    # updates as [scatter..., window...], the window reshaped to full operand rank
    moved = np.transpose(updates, list(dims.update_scatter_dims) + list(dims.update_window_dims))
    full_window = tuple(dims.window_extent(d) for d in range(operand.ndim))
    for scatter_index in itertools.product(*(range(n) for n in dims.scatter_shape)):
        vector = _index_vector(indices, scatter_index, dims.index_vector_dim)
        region = []
        for d in range(operand.ndim):
            if d in start_map:
                start = int(vector[start_map[d]])
            elif d in batching_map:
                start = scatter_index[batching_map[d]]
            else:
                start = 0
            if start < 0 or start + full_window[d] > operand.shape[d]:
                break  # the window does not fit: skip all of it
            region.append(slice(start, start + full_window[d]))
        else:
            window = moved[scatter_index].reshape(full_window)
            result[tuple(region)] = scatter_combine(dims.kind, result[tuple(region)], window)
    return result


# == reverse ==========================================================================
def _reverse_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (x,) = ins
    dims = _ints(attrs, "dims", "reverse")
    _check_dims(dims, x.rank, "dims", "reverse")
    return x


def _reverse_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return np.flip(ins[0], axis=attrs["dims"]) if attrs["dims"] else ins[0]


register("gather", _gather_infer, _gather_ref, 2)
register("scatter", _scatter_infer, _scatter_ref, 3)
register("reverse", _reverse_infer, _reverse_ref, 1)
