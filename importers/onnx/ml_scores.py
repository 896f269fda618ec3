"""Score helpers shared by the ai.onnx.ml classifiers and regressors (ops_ml.py, ops_trees.py).

`post_transform` applies an ONNX-ML post_transform to a score matrix [N, K],
row by row, with onnxruntime's formulas: PROBIT is its Winitzki approximation
of erfinv (not the exact inverse), SOFTMAX_ZERO leaves (near-)zero scores out
of the normalising sum. `first_argmax` is the class index rule every ML
classifier shares: the first maximal score wins.
"""
from __future__ import annotations

import numpy as np

from aot.ir import DType, Value

from .context import Ctx

POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")

# onnxruntime's ErfInv (ml_common.h): Winitzki's approximation with a = 0.147 and pi rounded to 3.14159
_WINITZKI_A = np.float32(0.147)
_WINITZKI_TERM = np.float32(2.0) / (np.float32(3.14159) * _WINITZKI_A)
_SQRT2 = float(np.float32(np.sqrt(2.0)))
# SOFTMAX_ZERO treats scores within this distance of 0 as absent
_SOFTMAX_ZERO_EPSILON = 1e-7


def check_post_transform(ctx: Ctx, name: str) -> str:
    if name not in POST_TRANSFORMS:
        raise ctx.error(f"post_transform '{name}' is not one of {', '.join(POST_TRANSFORMS)}")
    return name


def post_transform(ctx: Ctx, scores: Value, kind: str) -> Value:
    """scores [N, K] -> the transformed scores; SOFTMAX and SOFTMAX_ZERO work along K."""
    if kind == "NONE":
        return scores
    if kind == "LOGISTIC":
        return ctx.op("logistic", [scores])
    if kind == "PROBIT":
        return probit(ctx, scores)
    if kind == "SOFTMAX":
        return _softmax(ctx, scores)
    if kind == "SOFTMAX_ZERO":
        return _softmax_zero(ctx, scores)
    raise ctx.error(f"post_transform '{kind}' is not one of {', '.join(POST_TRANSFORMS)}")


def probit(ctx: Ctx, p: Value) -> Value:
    """sqrt(2) * erfinv(2p - 1), erfinv as onnxruntime approximates it:
    sign(x) * sqrt(sqrt(t^2 - log(1 - x^2) / a) - t), t = 2 / (pi a) + log(1 - x^2) / 2."""
    x = ctx.binary_scalar("sub", ctx.binary_scalar("mul", p, 2.0), 1.0)
    one = ctx.full(1.0, x.type)
    log = ctx.op("log", [ctx.op("mul", [ctx.op("sub", [one, x]), ctx.op("add", [one, x])])])
    term = ctx.binary_scalar("add", ctx.binary_scalar("mul", log, 0.5), float(_WINITZKI_TERM))
    ratio = ctx.binary_scalar("div", log, float(_WINITZKI_A))
    inner = ctx.op("sub", [ctx.op("sqrt", [ctx.op("sub", [ctx.op("mul", [term, term]), ratio])]), term])
    magnitude = ctx.op("sqrt", [inner])
    negative = ctx.op("compare", [x, ctx.full(0.0, x.type)], direction="lt")
    erfinv = ctx.op("select", [negative, ctx.op("neg", [magnitude]), magnitude])
    return ctx.binary_scalar("mul", erfinv, _SQRT2)


def _softmax(ctx: Ctx, scores: Value) -> Value:
    shape = scores.type.shape
    peak = ctx.unreduce(ctx.reduce(scores, "max", (1,)), shape, (1,))
    exps = ctx.op("exp", [ctx.op("sub", [scores, peak])])
    total = ctx.unreduce(ctx.reduce(exps, "sum", (1,)), shape, (1,))
    return ctx.op("div", [exps, total])


def _softmax_zero(ctx: Ctx, scores: Value) -> Value:
    """Softmax over the non-zero scores; a zero score stays (about) zero: 0 * exp(-max)."""
    shape = scores.type.shape
    peak = ctx.unreduce(ctx.reduce(scores, "max", (1,)), shape, (1,))
    present = ctx.op("compare", [ctx.op("abs", [scores]), ctx.full(_SOFTMAX_ZERO_EPSILON, scores.type)], direction="gt")
    exps = ctx.op("exp", [ctx.op("sub", [scores, peak])])
    scaled_zero = ctx.op("mul", [scores, ctx.op("exp", [ctx.op("neg", [peak])])])
    values = ctx.op("select", [present, exps, scaled_zero])
    counted = ctx.op("select", [present, exps, ctx.full(0.0, scores.type)])
    total = ctx.unreduce(ctx.reduce(counted, "sum", (1,)), shape, (1,))
    return ctx.op("div", [values, total])


def first_argmax(ctx: Ctx, scores: Value) -> Value:
    """scores [N, K] -> [N] i64: the first k with the largest score."""
    shape = scores.type.shape
    peak = ctx.unreduce(ctx.reduce(scores, "max", (1,)), shape, (1,))
    hits = ctx.op("compare", [scores, peak], direction="eq")
    index = ctx.op("iota", [], shape=shape, dim=1, dtype=DType.I64)
    # a position that misses gets K, which never wins the min (all NaN: K, clamped by the label gather)
    misses = ctx.op("select", [hits, index, ctx.full(shape[1], index.type)])
    return ctx.reduce(misses, "min", (1,))


def take_labels(ctx: Ctx, labels: list[int], index: Value) -> Value:
    """labels[index] for index [N] i64 in [0, len(labels)] (the last position clamps to the last label)."""
    table = ctx.constant(np.asarray(labels, dtype=np.int64))
    return gather_1d(ctx, table, index)


def gather_1d(ctx: Ctx, table: Value, index: Value) -> Value:
    """table[index] elementwise: table [M], index any shape (clamped to [0, M) as the IR's gather does)."""
    return ctx.op("gather", [table, index], offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
                  index_vector_dim=index.type.rank, slice_sizes=(1,))


def gather_rows(ctx: Ctx, table: Value, index: Value) -> Value:
    """table[index, :]: table [M, K], index [...] -> [..., K]."""
    rank = index.type.rank
    return ctx.op("gather", [table, index], offset_dims=(rank,), collapsed_slice_dims=(0,), start_index_map=(0,),
                  index_vector_dim=rank, slice_sizes=(1, table.type.shape[1]))


def as_rows(ctx: Ctx, x: Value) -> Value:
    """X as the [N, F] matrix the ML ops work on: a 1-D X is one row (onnxruntime's convention)."""
    if x.type.rank == 2:
        return x
    if x.type.rank == 1:
        return ctx.reshape(x, (1,) + x.type.shape)
    raise ctx.unsupported(f"X must be 1-D or 2-D [N, F], got {x.type}")
