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
from aot.ir.types import DType, TensorType, float8_saturate, numpy_is_float
from aot.ir.ops.registry import register


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
    """Half and float8 types compute in float32 (as codegen does) so folding matches run time."""
    if numpy_is_float(x.dtype) and x.dtype.itemsize < 4:
        return x.astype(np.float32)
    return x


def _unsigned(x: np.ndarray) -> np.ndarray:
    """The same bits as the unsigned int of x's width."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _popcnt(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(_unsigned(x)).astype(x.dtype)


def _clz(x: np.ndarray) -> np.ndarray:
    bits = 8 * x.dtype.itemsize
    u = _unsigned(x).astype(np.uint64)
    length = np.zeros(u.shape, dtype=np.int64)
    for shift in range(bits):  # bit_length: 1 + position of the highest set bit
        length = np.where((u >> np.uint64(shift)) & np.uint64(1), shift + 1, length)
    return (bits - length).astype(x.dtype)


def _rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Remainder with the sign of the dividend (C fmod / truncated division).

    Integers: x % 0 = 0 and MIN % -1 = 0, defined rather than trapping (as div).
    """
    if a.dtype.kind in "iu":
        safe = np.where((b == 0) | (b == -1 if a.dtype.kind == "i" else False), 1, b).astype(a.dtype)
        return np.where(b == 0, 0, np.fmod(a, safe)).astype(a.dtype)
    return np.fmod(a, b)


def _shift_amount(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(amount >= bit width, amount clamped to be safe): the amount is read as unsigned, as StableHLO."""
    too_far = _unsigned(b) >= 8 * a.dtype.itemsize
    return too_far, np.where(too_far, 0, _unsigned(b)).astype(_unsigned(a).dtype)


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    too_far, amount = _shift_amount(a, b)
    return np.where(too_far, 0, (_unsigned(a) << amount).view(a.dtype)).astype(a.dtype)


def _shift_right_logical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    too_far, amount = _shift_amount(a, b)
    return np.where(too_far, 0, (_unsigned(a) >> amount).view(a.dtype)).astype(a.dtype)


def _shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sign fill from the top bit (for u8 too: the bits are shifted as signed)."""
    too_far, amount = _shift_amount(a, b)
    signed = a.view(np.dtype(f"i{a.dtype.itemsize}"))
    fill = np.where(signed < 0, -1, 0).astype(signed.dtype)
    shifted = np.where(too_far, fill, signed >> amount.astype(signed.dtype))
    return shifted.astype(signed.dtype).view(a.dtype)


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
    "not": np.invert,  # logical not on i1, bitwise not on ints
    "copy": np.copy,
    "expm1": np.expm1,  # exp(x) - 1, accurate near 0
    "log1p": np.log1p,  # log(1 + x), accurate near 0
    "tan": np.tan,
    "is_finite": np.isfinite,  # -> i1
    "popcnt": _popcnt,  # number of set bits
    "clz": _clz,  # leading zero bits (the bit width for 0)
}
FLOAT_ONLY_UNARY = frozenset({
    "exp", "log", "tanh", "logistic", "sqrt", "rsqrt", "floor", "ceil", "round", "erf", "sin", "cos",
    "expm1", "log1p", "tan", "is_finite",
})

BINARY_FNS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,  # NaN-propagating, like ONNX Max and XLA max
    "min": np.minimum,
    "pow": np.power,
    "and": np.bitwise_and,  # logical on i1, bitwise on ints
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "atan2": np.arctan2,  # atan2(y, x): angle of (x, y) in [-pi, pi]
    "rem": _rem,
    "shift_left": _shift_left,
    "shift_right_arithmetic": _shift_right_arithmetic,
    "shift_right_logical": _shift_right_logical,
}

COMPARE_FNS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}

# bitwise ops: i1 or integer operands
BITWISE = frozenset({"and", "or", "xor", "not"})
# integer-only ops (not i1, not float)
INT_ONLY = frozenset({"shift_left", "shift_right_arithmetic", "shift_right_logical", "popcnt", "clz"})
FLOAT_ONLY_BINARY = frozenset({"atan2"})
# unary ops whose result is i1
BOOL_RESULT_UNARY = frozenset({"is_finite"})


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "u":
        # exact for 64 bits too (a float64 quotient is not); x / 0 = 0 as codegen defines it
        return np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(a.dtype)
    if a.dtype.kind in "iu":
        # integer division truncates toward zero (C semantics, as ONNX Div does)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.trunc(a.astype(np.float64) / b.astype(np.float64))
        return q.astype(a.dtype)
    return np.divide(a, b)


BINARY_FNS["div"] = _div


def _check_dtype(op: str, t: TensorType) -> None:
    if op in BITWISE and t.dtype is not DType.BOOL and not t.dtype.is_int:
        raise IRError(f"{op} needs i1 or integer operands, got {t}")
    if op in INT_ONLY and not t.dtype.is_int:
        raise IRError(f"{op} needs integer operands, got {t}")
    if op == "rem" and t.dtype is DType.BOOL:
        raise IRError(f"rem needs numeric operands, got {t}")
    if (op in FLOAT_ONLY_UNARY or op in FLOAT_ONLY_BINARY) and not t.dtype.is_float:
        raise IRError(f"{op} needs a float operand, got {t}")


def _unary_rule(op: str):
    def infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
        _check_dtype(op, ins[0])
        return ins[0].with_dtype(DType.BOOL) if op in BOOL_RESULT_UNARY else ins[0]

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
    if out.dtype.is_int and numpy_is_float(x.dtype):
        return _saturating_float_to_int(x, target)
    if out.dtype is DType.BOOL:
        return x != 0
    if out.dtype.is_float8:
        return float8_saturate(x, out.dtype)
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
