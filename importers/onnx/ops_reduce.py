"""ONNX reductions: ReduceSum/Mean/Max/Min/Prod, ReduceL1/L2/SumSquare/LogSum/LogSumExp."""
from __future__ import annotations

import math

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, norm_axis, op_registry

OPS, _ = op_registry()

# op_type -> (prepare operand, primitive reduce kind, finish)
_KINDS = {
    "ReduceSum": "sum", "ReduceMean": "sum", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod",
    "ReduceL1": "sum", "ReduceL2": "sum", "ReduceSumSquare": "sum", "ReduceLogSum": "sum",
    "ReduceLogSumExp": "sum",
}


def _axes(ctx: Ctx, a: NodeArgs, rank: int) -> tuple[int, ...] | None:
    """Reduced axes; None means the node is the identity (noop_with_empty_axes with no axes)."""
    # axes moved from attribute to input: ReduceSum at opset 13, the others at opset 18
    axes_as_input = ctx.opset >= (13 if a.node.op_type == "ReduceSum" else 18)
    if axes_as_input:
        given = a.input(1)
        axes = None
        if given is not None:
            array = ctx.const(given)
            if array is None:
                raise ctx.unsupported("axes must be a constant (or computable at compile time)")
            axes = [int(v) for v in array.reshape(-1)]
    else:
        axes = a.attr("axes")
    if not axes:
        if axes_as_input and a.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(rank))
    return tuple(sorted({norm_axis(ctx, int(ax), rank) for ax in axes}))


def _reduce(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    op_type = a.node.op_type
    axes = _axes(ctx, a, x.type.rank)
    if axes is None:
        return [x]
    keepdims = bool(a.attr("keepdims", 1))
    if op_type == "ReduceL1":
        x = ctx.op("abs", [x])
    elif op_type in ("ReduceL2", "ReduceSumSquare"):
        x = ctx.op("mul", [x, x])
    elif op_type == "ReduceLogSumExp":
        # log(sum(exp(x))) = max + log(sum(exp(x - max))), stable for large x
        peak = ctx.reduce(x, "max", axes)
        exps = ctx.op("exp", [ctx.op("sub", [x, ctx.unreduce(peak, x.type.shape, axes)])])
        y = ctx.op("add", [peak, ctx.op("log", [ctx.reduce(exps, "sum", axes)])])
        return [_keep(ctx, y, x, axes, keepdims)]
    y = ctx.reduce(x, _KINDS[op_type], axes)
    if op_type == "ReduceMean":
        y = ctx.binary_scalar("div", y, math.prod(x.type.shape[i] for i in axes))
    elif op_type == "ReduceL2":
        y = ctx.op("sqrt", [y])
    elif op_type == "ReduceLogSum":
        y = ctx.op("log", [y])
    return [_keep(ctx, y, x, axes, keepdims)]


def _keep(ctx: Ctx, y: Value, x: Value, axes: tuple[int, ...], keepdims: bool) -> Value:
    if not keepdims:
        return y
    return ctx.reshape(y, [1 if i in axes else d for i, d in enumerate(x.type.shape)])


for _name in _KINDS:
    OPS[_name] = _reduce


def _arg_reduce(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Index of the first (or last) max/min along `axis`: iota where x hits the extreme, reduced by min (max)."""
    x = a.inputs[0]
    shape = x.type.shape
    axis = norm_axis(ctx, a.attr("axis", 0), x.type.rank)
    kind = "max" if a.node.op_type == "ArgMax" else "min"
    extreme = ctx.unreduce(ctx.reduce(x, kind, (axis,)), shape, (axis,))
    hits = ctx.op("compare", [x, extreme], direction="eq")
    index = ctx.op("iota", [], shape=shape, dim=axis, dtype=DType.I64)
    last = bool(a.attr("select_last_index", 0))
    # positions that miss get an index that never wins: -1 when taking the max index, dim when the min
    miss = ctx.full(-1 if last else shape[axis], index.type)
    y = ctx.reduce(ctx.op("select", [hits, index, miss]), "max" if last else "min", (axis,))
    return [_keep(ctx, y, x, (axis,), bool(a.attr("keepdims", 1)))]


OPS["ArgMax"] = _arg_reduce
OPS["ArgMin"] = _arg_reduce
