"""Elementwise StableHLO ops: operands already share one shape (no implicit broadcast)."""
from __future__ import annotations

from aot.ir import DType, Value
from aot.registry import registry

from .context import Ctx
from .syntax import Enum, Op

OPS, op = registry()  # op name -> lowering (cx, op, operands) -> results

UNARY = {
    "abs": "abs", "negate": "neg", "exponential": "exp", "log": "log", "tanh": "tanh", "logistic": "logistic",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "floor": "floor", "ceil": "ceil", "round_nearest_even": "round",
    "sine": "sin", "cosine": "cos", "tan": "tan", "sign": "sign", "not": "not",
    "exponential_minus_one": "expm1", "log_plus_one": "log1p", "is_finite": "is_finite",
    "popcnt": "popcnt", "count_leading_zeros": "clz",
}
BINARY = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "maximum": "max", "minimum": "min",
    "power": "pow", "and": "and", "or": "or", "xor": "xor", "remainder": "rem", "atan2": "atan2",
    "shift_left": "shift_left", "shift_right_arithmetic": "shift_right_arithmetic",
    "shift_right_logical": "shift_right_logical",
}
COMPARE = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}


def _unary(ours: str):
    def lower(cx: Ctx, op: Op, ins: list[Value]) -> list[Value]:
        return [cx.op(ours, ins)]

    return lower


def _binary(ours: str):
    def lower(cx: Ctx, op: Op, ins: list[Value]) -> list[Value]:
        return [cx.op(ours, ins)]

    return lower


for _name, _ours in UNARY.items():
    OPS[f"stablehlo.{_name}"] = _unary(_ours)
for _name, _ours in BINARY.items():
    OPS[f"stablehlo.{_name}"] = _binary(_ours)


@op("stablehlo.compare")
def _compare(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    direction = o.attrs.get("comparison_direction")
    text = direction.value if isinstance(direction, Enum) else str(direction)
    if text not in COMPARE:
        raise cx.error(f"unknown comparison direction {text!r}")
    # TOTALORDER differs from FLOAT only for NaN and -0.0; JAX uses it inside sort comparators
    return [cx.op("compare", ins, direction=COMPARE[text])]


@op("stablehlo.select")
def _select(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    pred, a, b = ins
    return [cx.op("select", [cx.broadcast_scalar(pred, a.type.shape), a, b])]


@op("stablehlo.clamp")
def _clamp(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    lo, x, hi = ins
    shape = x.type.shape
    return [cx.op("min", [cx.op("max", [x, cx.broadcast_scalar(lo, shape)]), cx.broadcast_scalar(hi, shape)])]


@op("stablehlo.convert")
def _convert(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [cx.convert(ins[0], cx.dtype(cx.result_type().elem))]


@op("stablehlo.round_nearest_afz")
def _round_afz(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    """Round half away from zero: sign(x) * floor(|x| + 0.5)."""
    (x,) = ins
    half = cx.full(0.5, x.type)
    return [cx.op("mul", [cx.op("sign", [x]), cx.op("floor", [cx.op("add", [cx.op("abs", [x]), half])])])]


@op("stablehlo.bitcast_convert")
def _bitcast(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    if cx.dtype(cx.result_type().elem) is ins[0].type.dtype and cx.result_type().shape == ins[0].type.shape:
        return ins
    raise cx.unsupported("bitcast_convert between different element types is not supported")


@op("stablehlo.optimization_barrier")
def _barrier(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return ins  # only orders rematerialisation in XLA; values pass through


__all__ = ["OPS", "DType"]
