"""Elementwise ONNX ops: arithmetic, activations, comparisons, logic, Where, Cast, Clip."""
from __future__ import annotations

import math

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, broadcast_shape, op_registry
from .loader import to_dtype

OPS, op = op_registry()


# -- direct maps onto primitives ------------------------------------------------
_UNARY = {
    "Neg": "neg", "Abs": "abs", "Exp": "exp", "Log": "log", "Tanh": "tanh", "Sigmoid": "logistic",
    "Sqrt": "sqrt", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Erf": "erf", "Sin": "sin",
    "Cos": "cos", "Sign": "sign", "Not": "not",
}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "And": "and", "Or": "or", "Xor": "xor"}
_COMPARE = {"Equal": "eq", "Less": "lt", "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge"}


def _unary(prim: str):
    def lower(ctx: Ctx, a: NodeArgs) -> list[Value]:
        return [ctx.op(prim, [a.inputs[0]])]

    return lower


def _binary(prim: str):
    def lower(ctx: Ctx, a: NodeArgs) -> list[Value]:
        return [ctx.binary(prim, a.inputs[0], a.inputs[1])]

    return lower


def _compare(direction: str):
    def lower(ctx: Ctx, a: NodeArgs) -> list[Value]:
        return [ctx.binary("compare", a.inputs[0], a.inputs[1], direction=direction)]

    return lower


for _name, _prim in _UNARY.items():
    OPS[_name] = _unary(_prim)
for _name, _prim in _BINARY.items():
    OPS[_name] = _binary(_prim)
for _name, _dir in _COMPARE.items():
    OPS[_name] = _compare(_dir)


@op("Identity", "Dropout")
def _identity(ctx: Ctx, a: NodeArgs) -> list[Value]:
    if a.node.op_type == "Dropout":
        training = ctx.const(a.input(2))
        if training is not None and bool(training):
            raise ctx.unsupported("training_mode=true (aot compiles inference graphs)")
        if a.input(2) is not None and training is None:
            raise ctx.unsupported("training_mode must be a constant")
    return [a.inputs[0]]


@op("Reciprocal")
def _reciprocal(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.op("div", [ctx.full(1, x.type), x])]


@op("Pow")
def _pow(ctx: Ctx, a: NodeArgs) -> list[Value]:
    base, exponent = a.inputs
    # Pow (opset 12+) allows an exponent of another type; compute in the base's type
    return [ctx.binary("pow", base, ctx.convert(exponent, base.type.dtype))]


@op("Max", "Min", "Sum", "Mean")
def _variadic(ctx: Ctx, a: NodeArgs) -> list[Value]:
    prim = {"Max": "max", "Min": "min", "Sum": "add", "Mean": "add"}[a.node.op_type]
    operands = [v for v in a.inputs if v is not None]
    acc = operands[0]
    for v in operands[1:]:
        acc = ctx.binary(prim, acc, v)
    if a.node.op_type == "Mean" and len(operands) > 1:
        acc = ctx.binary_scalar("div", acc, len(operands))
    return [acc]


@op("Relu")
def _relu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.binary_scalar("max", x, 0)]


def _less_than_zero(ctx: Ctx, x: Value) -> Value:
    return ctx.op("compare", [x, ctx.full(0, x.type)], direction="lt")


@op("LeakyRelu")
def _leaky_relu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    scaled = ctx.binary_scalar("mul", x, a.attr("alpha", 0.01))
    return [ctx.op("select", [_less_than_zero(ctx, x), scaled, x])]


@op("PRelu")
def _prelu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, slope = a.inputs
    if slope.type.rank == 1 and x.type.rank > 2 and slope.type.shape[0] == x.type.shape[1] != x.type.shape[-1]:
        # a per-channel slope (opset < 7 exports): broadcast along dim 1, not right-aligned
        slope_b = ctx.broadcast_in_dims(slope, x.type.shape, (1,))
    else:
        slope_b = ctx.broadcast_to(slope, x.type.shape)
    scaled = ctx.op("mul", [x, slope_b])
    return [ctx.op("select", [_less_than_zero(ctx, x), scaled, x])]


@op("Elu")
def _elu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    # x < 0: alpha * (exp(x) - 1)
    neg = ctx.binary_scalar("mul", ctx.binary_scalar("sub", ctx.op("exp", [x]), 1), a.attr("alpha", 1.0))
    return [ctx.op("select", [_less_than_zero(ctx, x), neg, x])]


@op("Selu")
def _selu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    alpha = a.attr("alpha", 1.67326319217681884765625)
    gamma = a.attr("gamma", 1.05070102214813232421875)
    # x <= 0: gamma * (alpha * exp(x) - alpha); else gamma * x
    neg = ctx.binary_scalar("sub", ctx.binary_scalar("mul", ctx.op("exp", [x]), alpha), alpha)
    positive = ctx.op("compare", [x, ctx.full(0, x.type)], direction="gt")
    return [ctx.binary_scalar("mul", ctx.op("select", [positive, x, neg]), gamma)]


def _clamp01(ctx: Ctx, x: Value) -> Value:
    return ctx.binary_scalar("min", ctx.binary_scalar("max", x, 0), 1)


@op("HardSigmoid")
def _hard_sigmoid(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    # max(0, min(1, alpha * x + beta))
    linear = ctx.binary_scalar("add", ctx.binary_scalar("mul", x, a.attr("alpha", 0.2)), a.attr("beta", 0.5))
    return [_clamp01(ctx, linear)]


@op("HardSwish")
def _hard_swish(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    # x * max(0, min(1, x / 6 + 1/2))
    linear = ctx.binary_scalar("add", ctx.binary_scalar("mul", x, 1.0 / 6.0), 0.5)
    return [ctx.op("mul", [x, _clamp01(ctx, linear)])]


@op("Softplus")
def _softplus(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    # log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), which never overflows
    tail = ctx.op("log", [ctx.binary_scalar("add", ctx.op("exp", [ctx.op("neg", [ctx.op("abs", [x])])]), 1)])
    return [ctx.op("add", [ctx.binary_scalar("max", x, 0), tail])]


@op("Softsign")
def _softsign(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.op("div", [x, ctx.binary_scalar("add", ctx.op("abs", [x]), 1)])]


@op("Gelu")
def _gelu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    if a.attr("approximate", "none") == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = ctx.op("mul", [ctx.op("mul", [x, x]), x])
        inner = ctx.op("add", [x, ctx.binary_scalar("mul", cube, 0.044715)])
        t = ctx.op("tanh", [ctx.binary_scalar("mul", inner, math.sqrt(2.0 / math.pi))])
    else:
        # 0.5 x (1 + erf(x / sqrt(2)))
        t = ctx.op("erf", [ctx.binary_scalar("mul", x, 1.0 / math.sqrt(2.0))])
    half_x = ctx.binary_scalar("mul", x, 0.5)
    return [ctx.op("mul", [half_x, ctx.binary_scalar("add", t, 1)])]


@op("Clip")
def _clip(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    if ctx.opset < 11:
        lo, hi = a.attr("min"), a.attr("max")
        if lo is not None:
            x = ctx.binary_scalar("max", x, lo)
        if hi is not None:
            x = ctx.binary_scalar("min", x, hi)
        return [x]
    for bound, prim in ((a.input(1), "max"), (a.input(2), "min")):
        if bound is not None:
            x = ctx.op(prim, [x, ctx.broadcast_to(bound, x.type.shape)])
    return [x]


@op("Where")
def _where(ctx: Ctx, a: NodeArgs) -> list[Value]:
    cond, x, y = a.inputs
    shape = broadcast_shape(ctx, cond.type.shape, x.type.shape, y.type.shape)
    return [ctx.op("select", [ctx.broadcast_to(v, shape) for v in (cond, x, y)])]


@op("Cast")
def _cast(ctx: Ctx, a: NodeArgs) -> list[Value]:
    dtype = to_dtype(a.attr("to"), f"Cast target of node '{ctx.node_name}'")
    return [ctx.convert(a.inputs[0], dtype, saturate=bool(a.attr("saturate", 1)))]


@op("IsNaN")
def _isnan(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.op("compare", [x, x], direction="ne")]


# -- ops added for suite coverage -------------------------------------------------------
def _require_prim(ctx: Ctx, prim: str) -> None:
    """Refuse by name when a primitive this lowering needs is not in the op set."""
    from aot.ir.ops import OPS as PRIMITIVES

    if prim not in PRIMITIVES:
        raise ctx.unsupported(f"needs the '{prim}' primitive, which this build of aot does not have")


@op("CastLike")
def _cast_like(ctx: Ctx, a: NodeArgs) -> list[Value]:
    return [ctx.convert(a.inputs[0], a.inputs[1].type.dtype, saturate=bool(a.attr("saturate", 1)))]


@op("Mod")
def _mod(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, y = a.inputs
    shape = broadcast_shape(ctx, x.type.shape, y.type.shape)
    x, y = ctx.broadcast_to(x, shape), ctx.broadcast_to(y, shape)
    fmod = bool(a.attr("fmod", 0))
    # truncated remainder (C fmod): the rem primitive on floats; x - (x / y) * y on integers (div truncates)
    if x.type.dtype.is_float:
        rem = ctx.op("rem", [x, y])
    else:
        rem = ctx.op("sub", [x, ctx.op("mul", [ctx.op("div", [x, y]), y])])
    if fmod:
        return [rem]
    # floored remainder (Python %): a non-zero remainder takes the divisor's sign
    zero = ctx.full(0, x.type)
    nonzero = ctx.op("compare", [rem, zero], direction="ne")
    signs_differ = ctx.op("xor", [_less_than_zero(ctx, rem), _less_than_zero(ctx, y)])
    fix = ctx.op("and", [nonzero, signs_differ])
    return [ctx.op("select", [fix, ctx.op("add", [rem, y]), rem])]


@op("Swish")
def _swish(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.op("mul", [x, ctx.op("logistic", [ctx.binary_scalar("mul", x, a.attr("alpha", 1.0))])])]


@op("IsInf")
def _isinf(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    pos = ctx.op("compare", [x, ctx.full(float("inf"), x.type)], direction="eq")
    neg = ctx.op("compare", [x, ctx.full(float("-inf"), x.type)], direction="eq")
    detect_pos, detect_neg = a.attr("detect_positive", 1), a.attr("detect_negative", 1)
    if detect_pos and detect_neg:
        return [ctx.op("or", [pos, neg])]
    if detect_pos:
        return [pos]
    if detect_neg:
        return [neg]
    return [ctx.op("and", [pos, neg])]  # detects nothing: all false


@op("Celu")
def _celu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    alpha = float(a.attr("alpha", 1.0))
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    neg = ctx.binary_scalar("mul", ctx.binary_scalar("sub", ctx.op("exp", [ctx.binary_scalar("div", x, alpha)]), 1), alpha)
    return [ctx.op("add", [ctx.binary_scalar("max", x, 0), ctx.binary_scalar("min", neg, 0)])]


@op("Shrink")
def _shrink(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    lambd, bias = float(a.attr("lambd", 0.5)), float(a.attr("bias", 0.0))
    # x < -lambd: x + bias; x > lambd: x - bias; else 0
    below = ctx.op("compare", [x, ctx.full(-lambd, x.type)], direction="lt")
    above = ctx.op("compare", [x, ctx.full(lambd, x.type)], direction="gt")
    zero = ctx.full(0, x.type)
    inner = ctx.op("select", [above, ctx.binary_scalar("sub", x, bias), zero])
    return [ctx.op("select", [below, ctx.binary_scalar("add", x, bias), inner])]


@op("ThresholdedRelu")
def _thresholded_relu(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    above = ctx.op("compare", [x, ctx.full(float(a.attr("alpha", 1.0)), x.type)], direction="gt")
    return [ctx.op("select", [above, x, ctx.full(0, x.type)])]


@op("Mish")
def _mish(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    softplus = _softplus(ctx, NodeArgs(a.node, [x]))[0]
    return [ctx.op("mul", [x, ctx.op("tanh", [softplus])])]


def _exp_pair(ctx: Ctx, x: Value) -> tuple[Value, Value]:
    return ctx.op("exp", [x]), ctx.op("exp", [ctx.op("neg", [x])])


@op("Sinh", "Cosh")
def _sinh_cosh(ctx: Ctx, a: NodeArgs) -> list[Value]:
    pos, neg = _exp_pair(ctx, a.inputs[0])
    combined = ctx.op("sub" if a.node.op_type == "Sinh" else "add", [pos, neg])
    return [ctx.binary_scalar("mul", combined, 0.5)]


@op("Tan")
def _tan(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.op("div", [ctx.op("sin", [x]), ctx.op("cos", [x])])]


@op("Asinh", "Acosh")
def _asinh_acosh(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    # asinh x = log(x + sqrt(x^2 + 1)); acosh x = log(x + sqrt(x^2 - 1))
    square = ctx.op("mul", [x, x])
    inner = ctx.binary_scalar("add" if a.node.op_type == "Asinh" else "sub", square, 1)
    return [ctx.op("log", [ctx.op("add", [x, ctx.op("sqrt", [inner])])])]


@op("Atanh")
def _atanh(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    # 0.5 * log((1 + x) / (1 - x))
    ratio = ctx.op("div", [ctx.binary_scalar("add", x, 1), ctx.op("sub", [ctx.full(1, x.type), x])])
    return [ctx.binary_scalar("mul", ctx.op("log", [ratio]), 0.5)]


def _atan(ctx: Ctx, x: Value) -> Value:
    _require_prim(ctx, "atan2")
    return ctx.op("atan2", [x, ctx.full(1, x.type)])


@op("Atan")
def _atan_op(ctx: Ctx, a: NodeArgs) -> list[Value]:
    return [_atan(ctx, a.inputs[0])]


@op("Asin", "Acos")
def _asin_acos(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    _require_prim(ctx, "atan2")
    # asin x = atan2(x, sqrt(1 - x^2)); acos x = atan2(sqrt(1 - x^2), x)
    root = ctx.op("sqrt", [ctx.op("sub", [ctx.full(1, x.type), ctx.op("mul", [x, x])])])
    operands = [x, root] if a.node.op_type == "Asin" else [root, x]
    return [ctx.op("atan2", operands)]


_BITWISE = {"BitwiseAnd": "and", "BitwiseOr": "or", "BitwiseXor": "xor"}


@op(*_BITWISE)
def _bitwise(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    if not x.type.dtype.is_int:
        raise ctx.error(f"needs integer operands, got {x.type}")
    return [ctx.binary(_BITWISE[a.node.op_type], x, a.inputs[1])]


@op("BitwiseNot")
def _bitwise_not(ctx: Ctx, a: NodeArgs) -> list[Value]:
    return [ctx.op("not", [a.inputs[0]])]


@op("BitShift")
def _bit_shift(ctx: Ctx, a: NodeArgs) -> list[Value]:
    direction = a.attr("direction")
    signed = a.inputs[0].type.dtype in (DType.I8, DType.I16, DType.I32, DType.I64)
    # right shifts of signed types keep the sign (arithmetic), as onnxruntime and the suite do
    prim = {"LEFT": "shift_left", "RIGHT": "shift_right_arithmetic" if signed else "shift_right_logical"}.get(direction)
    if prim is None:
        raise ctx.error(f"direction must be LEFT or RIGHT, got {direction!r}")
    _require_prim(ctx, prim)
    return [ctx.binary(prim, a.inputs[0], a.inputs[1])]
