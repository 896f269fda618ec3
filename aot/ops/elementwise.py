"""Elementwise ops: unary, binary, compare, select, convert.

Operands of binary ops have identical types (importers insert explicit
broadcasts, as XLA does), so codegen never reasons about implicit broadcasting.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ops.registry import register


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _round_half_even(x: np.ndarray) -> np.ndarray:
    return np.round(x)  # numpy rounds half to even


def _logistic(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    return 1.0 / (1.0 + np.exp(-wide))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x.astype(np.float64))


def _compute_dtype(x: np.ndarray) -> np.ndarray:
    """Half types compute in float32 (as codegen does) so folding matches run time."""
    if x.dtype.kind == "f" and x.dtype.itemsize < 4 or x.dtype.name == "bfloat16":
        return x.astype(np.float32)
    return x


UNARY_FNS = {
    "neg": np.negative,  # -x
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "logistic": _logistic,  # 1 / (1 + exp(-x))
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,  # 1 / sqrt(x)
    "floor": np.floor,
    "ceil": np.ceil,
    "round": _round_half_even,
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "sign": np.sign,
    "not": np.logical_not,
    "copy": np.copy,
}
FLOAT_ONLY_UNARY = frozenset({"exp", "log", "tanh", "logistic", "sqrt", "rsqrt", "floor", "ceil", "round", "erf", "sin", "cos"})

BINARY_FNS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,  # NaN-propagating, like ONNX Max and XLA max
    "min": np.minimum,
    "pow": np.power,
    "and": np.logical_and,
    "or": np.logical_or,
    "xor": np.logical_xor,
}

COMPARE_FNS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}

BOOL_ONLY = frozenset({"and", "or", "xor", "not"})


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        # integer division truncates toward zero (C semantics, as ONNX Div does)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.trunc(a.astype(np.float64) / b.astype(np.float64))
        return q.astype(a.dtype)
    return np.divide(a, b)


BINARY_FNS["div"] = _div


def _check_dtype(op: str, t: TensorType) -> None:
    if op in BOOL_ONLY and t.dtype is not DType.BOOL:
        raise IRError(f"{op} needs i1 operands, got {t}")
    if op in FLOAT_ONLY_UNARY and not t.dtype.is_float:
        raise IRError(f"{op} needs a float operand, got {t}")


def _unary_rule(op: str):
    def infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
        _check_dtype(op, ins[0])
        return ins[0]

    return infer


def _unary_ref(op: str):
    fn = UNARY_FNS[op]

    def ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(_compute_dtype(ins[0]))

    return ref


def _binary_rule(op: str):
    def infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
        a, b = ins
        if a != b:
            raise IRError(f"{op} operands must have the same type, got {a} and {b}")
        _check_dtype(op, a)
        return a

    return infer


def _binary_ref(op: str):
    fn = BINARY_FNS[op]

    def ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(_compute_dtype(ins[0]), _compute_dtype(ins[1]))

    return ref


def _compare_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    a, b = ins
    if a != b:
        raise IRError(f"compare operands must have the same type, got {a} and {b}")
    if attrs.get("direction") not in COMPARE_FNS:
        raise IRError(f"compare direction must be one of {sorted(COMPARE_FNS)}, got {attrs.get('direction')!r}")
    return a.with_dtype(DType.BOOL)


def _compare_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    with np.errstate(all="ignore"):
        return COMPARE_FNS[attrs["direction"]](_compute_dtype(ins[0]), _compute_dtype(ins[1]))


def _select_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    pred, a, b = ins
    if pred.dtype is not DType.BOOL or pred.shape != a.shape or a != b:
        raise IRError(f"select needs (i1[S], T[S], T[S]), got ({pred}, {a}, {b})")
    return a


def _select_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    return np.where(ins[0], ins[1], ins[2])


def _convert_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    dtype = attrs.get("dtype")
    if not isinstance(dtype, DType):
        raise IRError(f"convert needs a dtype attribute, got {dtype!r}")
    return ins[0].with_dtype(dtype)


def _saturating_float_to_int(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """float -> int truncates toward zero; NaN gives 0 and out-of-range values saturate (LLVM fptosi.sat)."""
    info = np.iinfo(target)
    f = np.trunc(x.astype(np.float64))
    too_high = f >= float(info.max)
    too_low = f <= float(info.min)
    in_range = ~(too_high | too_low | np.isnan(f))
    result = np.where(in_range, f, 0).astype(target)
    result[too_high] = info.max
    result[too_low] = info.min
    return result


def _convert_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x = ins[0]
    target = out.dtype.to_numpy()
    if out.dtype.is_int and (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        return _saturating_float_to_int(x, target)
    if out.dtype is DType.BOOL:
        return x != 0
    with np.errstate(all="ignore"):
        return x.astype(target)


ELEMENTWISE_UNARY = frozenset(UNARY_FNS)
ELEMENTWISE_BINARY = frozenset(BINARY_FNS)

for _op in UNARY_FNS:
    register(_op, _unary_rule(_op), _unary_ref(_op), 1)
for _op in BINARY_FNS:
    register(_op, _binary_rule(_op), _binary_ref(_op), 2)
register("compare", _compare_infer, _compare_ref, 2)
register("select", _select_infer, _select_ref, 3)
register("convert", _convert_infer, _convert_ref, 1)
