"""Lowering context: the IR graph under construction, folding, types and errors.

`Ctx.op` folds an op whose operands are all constants when the result is
small or no larger than its operands (as the ONNX importer does): shape
arithmetic and loop counters become constants at import, which is what lets
a `while` with a static trip count unroll, while a scalar broadcast to an
activation's shape stays a broadcast instead of turning into a weight.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import ModelError, UnsupportedError
from aot.ir import Builder, DType, Graph, Value
from aot.ir.builder import normalize_attr
from aot.ir.types import TensorType
from aot.ir.ops import evaluate, infer_type

from .locations import describe
from .syntax import Module, Op, TType

FOLD_SMALL_ELEMENTS = 64

DTYPES = {
    "f16": DType.F16, "bf16": DType.BF16, "f32": DType.F32, "f64": DType.F64,
    "i1": DType.BOOL, "i8": DType.I8, "i16": DType.I16, "i32": DType.I32, "i64": DType.I64, "ui8": DType.U8,
}


class Ctx:
    """State of one import; `current` is the op being lowered (for error locations)."""

    def __init__(self, graph: Graph, module: Module):
        self.graph = graph
        self.module = module
        self.b = Builder(graph)
        self.current: Op | None = None

    # -- errors -------------------------------------------------------------------------
    def where(self, op: Op | None = None) -> str:
        op = op or self.current
        if op is None:
            return self.module.source
        text = f"{self.module.source}:{op.pos.line}:{op.pos.col}: {op.name}"
        source = describe(op.pos.loc, self.module.loc_aliases)
        return f"{text} (from {source})" if source else text

    def error(self, message: str) -> ModelError:
        return ModelError(f"{self.where()}: {message}")

    def unsupported(self, message: str) -> UnsupportedError:
        return UnsupportedError(f"{self.where()}: {message}")

    # -- types ----------------------------------------------------------------------------
    def dtype(self, elem: str) -> DType:
        dtype = DTYPES.get(elem)
        if dtype is None:
            raise self.unsupported(f"element type {elem} is not supported (aot compiles {', '.join(DTYPES)})")
        return dtype

    def result_type(self, i: int = 0) -> TType:
        op = self.current
        if op is None or i >= len(op.result_types):
            raise self.error(f"result {i} has no declared type")
        return op.result_types[i]

    def static_result(self, i: int = 0) -> TensorType:
        """The declared type of result i, which must be static (shape-changing ops read their shape here)."""
        ttype = self.result_type(i)
        if not ttype.is_static or ttype.shape is None:
            raise self.unsupported(f"result type {ttype} has dynamic dims that cannot be resolved here; fix the input shapes (shapes=, or --shape on the command line)")
        return TensorType(self.dtype(ttype.elem), tuple(int(d) for d in ttype.shape))

    # -- op emission --------------------------------------------------------------------------
    def op(self, name: str, inputs: Sequence[Value], **attrs: Any) -> Value:
        arrays = [self.graph.constant_value(v) for v in inputs]
        if inputs and all(a is not None for a in arrays):
            norm = {k: normalize_attr(v) for k, v in attrs.items()}
            out_type = infer_type(name, [v.type for v in inputs], norm)
            if out_type.size <= max(max(a.size for a in arrays), FOLD_SMALL_ELEMENTS):
                return self.constant(evaluate(name, arrays, norm, out_type))
        return self.b.op(name, inputs, **attrs)

    def const(self, v: Value) -> np.ndarray | None:
        return self.graph.constant_value(v)

    def constant(self, array: np.ndarray | float | int | bool, dtype: DType | None = None) -> Value:
        return self.b.constant(array, dtype)

    def full(self, value: float | int | bool, type: TensorType) -> Value:
        scalar = self.b.constant(np.array(value).astype(type.dtype.to_numpy()))
        if type.shape == ():
            return scalar
        return self.op("broadcast", [scalar], shape=type.shape, dims=())

    def broadcast_scalar(self, v: Value, shape: tuple[int, ...]) -> Value:
        if v.type.shape == shape:
            return v
        if v.type.shape != ():
            raise self.error(f"operand {v.type} must be a scalar or of shape {list(shape)}")
        return self.op("broadcast", [v], shape=shape, dims=())

    def convert(self, v: Value, dtype: DType) -> Value:
        return v if v.type.dtype is dtype else self.op("convert", [v], dtype=dtype)

    def transpose(self, v: Value, perm: Sequence[int]) -> Value:
        perm = tuple(perm)
        return v if perm == tuple(range(len(perm))) else self.op("transpose", [v], perm=perm)

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        shape = tuple(int(d) for d in shape)
        return v if v.type.shape == shape else self.op("reshape", [v], shape=shape)

    def ints(self, key: str, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """An integer-list attribute of the current op (array<i64: ...>, [..] or dense<...>)."""
        assert self.current is not None
        value = self.current.attrs.get(key, default)
        if value is None:
            raise self.error(f"missing attribute '{key}'")
        if isinstance(value, np.ndarray):
            value = tuple(int(v) for v in value.reshape(-1))
        if not isinstance(value, tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(f"attribute '{key}' must be a list of integers, got {value!r}")
        return value

    def int_attr(self, key: str, default: int | None = None) -> int:
        assert self.current is not None
        value = self.current.attrs.get(key, default)
        if isinstance(value, np.ndarray) and value.size == 1:
            value = int(value.reshape(-1)[0])
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(f"attribute '{key}' must be an integer, got {value!r}")
        return value
