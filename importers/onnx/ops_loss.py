"""Loss ONNX ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (inference form).

The class picked per sample is a run-time index: a one-hot mask over the
class dim (iota == target) selects it, as in ops_index. Targets equal to
ignore_index, or outside [0, C), select nothing and weigh 0.
"""
from __future__ import annotations


from aot.ir import DType, Value

from .context import Ctx, NodeArgs, op_registry
from .ops_index import _collect

OPS, op = op_registry()


def nll_loss(ctx: Ctx, a: NodeArgs, log_prob: Value, target: Value, weight: Value | None) -> Value:
    """loss[n, d...] = -log_prob[n, target, d...] * weight[target], reduced as `reduction` says."""
    shape = log_prob.type.shape
    rank = len(shape)
    others = (0,) + tuple(range(2, rank))  # target's dims inside [N, C, d...]
    target = ctx.convert(target, DType.I64)
    target_b = ctx.broadcast_in_dims(target, shape, others)
    classes = ctx.op("iota", [], shape=shape, dim=1, dtype=DType.I64)
    mask = ctx.op("compare", [target_b, classes], direction="eq")
    ignore = a.attr("ignore_index")
    if ignore is not None:
        mask = ctx.op("and", [mask, ctx.op("compare", [target_b, ctx.full(int(ignore), target_b.type)], direction="ne")])
    picked = _collect(ctx, log_prob, mask, 1, "sum")
    if weight is None:
        ones = ctx.full(1, log_prob.type)
        w = _collect(ctx, ones, mask, 1, "sum")  # 1 where a class was picked, 0 where ignored
    else:
        w = _collect(ctx, ctx.broadcast_in_dims(weight, shape, (1,)), mask, 1, "sum")
    loss = ctx.op("neg", [ctx.op("mul", [picked, w])])
    reduction = a.attr("reduction", "mean")
    axes = tuple(range(loss.type.rank))
    if reduction == "none":
        return loss
    total = ctx.reduce(loss, "sum", axes)
    if reduction == "sum":
        return total
    if reduction != "mean":
        raise ctx.unsupported(f"reduction '{reduction}'")
    return ctx.op("div", [total, ctx.reduce(w, "sum", axes)])


@op("NegativeLogLikelihoodLoss")
def _nll(ctx: Ctx, a: NodeArgs) -> list[Value]:
    return [nll_loss(ctx, a, a.inputs[0], a.inputs[1], a.input(2))]


@op("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(ctx: Ctx, a: NodeArgs) -> list[Value]:
    scores, labels, weight = a.inputs[0], a.inputs[1], a.input(2)
    shape = scores.type.shape
    # log_softmax over the class dim, stable: x - max - log(sum(exp(x - max)))
    peak = ctx.unreduce(ctx.reduce(scores, "max", (1,)), shape, (1,))
    shifted = ctx.op("sub", [scores, peak])
    total = ctx.unreduce(ctx.reduce(ctx.op("exp", [shifted]), "sum", (1,)), shape, (1,))
    log_prob = ctx.op("sub", [shifted, ctx.op("log", [total])])
    loss = nll_loss(ctx, a, log_prob, labels, weight)
    return [loss, log_prob] if a.num_outputs > 1 else [loss]
