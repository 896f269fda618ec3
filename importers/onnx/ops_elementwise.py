"""Elementwise ONNX ops: arithmetic, activations, comparisons, logic, Where, Cast, Clip."""
from __future__ import annotations

import math
from collections.abc import Callable

from aot.ir import Value

from .context import Ctx, NodeArgs, broadcast_shape
from .loader import to_dtype

OPS: dict[str, Callable[[Ctx, NodeArgs], list[Value]]] = {}


def op(*names: str):
    def register(fn):
        for name in names:
            OPS[name] = fn
        return fn

    return register


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
    scaled = ctx.op("mul", [x, ctx.broadcast_to(slope, x.type.shape)])
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
    return [ctx.convert(a.inputs[0], dtype)]


@op("IsNaN")
def _isnan(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    return [ctx.op("compare", [x, x], direction="ne")]
