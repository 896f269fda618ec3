"""Neural-network ONNX ops: Gemm, MatMul, Conv, pooling, normalisations, (Log)Softmax."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aot.arith import ceil_div
from aot.ir import DType, Value

from .context import Ctx, NodeArgs, broadcast_shape, norm_axis, op_registry
from .loader import to_dtype

OPS, op = op_registry()


# -- contractions -----------------------------------------------------------------
@op("Gemm")
def _gemm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Y = alpha * A' B' + beta * C, with A' = A^T if transA (same for B)."""
    lhs, rhs, c = a.inputs[0], a.inputs[1], a.input(2)
    if lhs.type.rank != 2 or rhs.type.rank != 2:
        raise ctx.error(f"Gemm needs 2-D A and B, got {lhs.type} and {rhs.type}")
    lhs_contract = 0 if a.attr("transA", 0) else 1
    rhs_contract = 1 if a.attr("transB", 0) else 0
    y = ctx.op("dot", [lhs, rhs], lhs_batch=(), rhs_batch=(), lhs_contract=(lhs_contract,), rhs_contract=(rhs_contract,))
    alpha, beta = a.attr("alpha", 1.0), a.attr("beta", 1.0)
    if alpha != 1.0:
        y = ctx.binary_scalar("mul", y, alpha)
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.binary_scalar("mul", c, beta)
        y = ctx.op("add", [y, ctx.broadcast_to(c, y.type.shape)])
    return [y]


@op("MatMul")
def _matmul(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """numpy.matmul: 1-D operands are promoted (and the added dim dropped), batch dims broadcast."""
    lhs, rhs = a.inputs
    lhs_vec, rhs_vec = lhs.type.rank == 1, rhs.type.rank == 1
    if lhs_vec:
        lhs = ctx.reshape(lhs, (1,) + lhs.type.shape)
    if rhs_vec:
        rhs = ctx.reshape(rhs, rhs.type.shape + (1,))
    lr, rr = lhs.type.rank, rhs.type.rank
    if lhs.type.shape[-1] != rhs.type.shape[-2]:
        raise ctx.error(f"MatMul of {a.inputs[0].type} and {a.inputs[1].type}: inner dims differ")
    if rr == 2:
        # [..., M, K] x [K, N]: the batch dims of lhs are free dims of the dot; no broadcast of weights
        y = ctx.op("dot", [lhs, rhs], lhs_batch=(), rhs_batch=(), lhs_contract=(lr - 1,), rhs_contract=(0,))
    else:
        batch = broadcast_shape(ctx, lhs.type.shape[:-2], rhs.type.shape[:-2])
        nb = len(batch)
        lhs = ctx.broadcast_to(lhs, batch + lhs.type.shape[-2:])
        rhs = ctx.broadcast_to(rhs, batch + rhs.type.shape[-2:])
        dims = tuple(range(nb))
        y = ctx.op("dot", [lhs, rhs], lhs_batch=dims, rhs_batch=dims, lhs_contract=(nb + 1,), rhs_contract=(nb,))
    shape = list(y.type.shape)
    if rhs_vec:
        shape.pop(-1)
    if lhs_vec:
        shape.pop(-1 if rhs_vec else -2)
    return [ctx.reshape(y, shape)]


# -- convolution and pooling ------------------------------------------------------
def _spatial_padding(
    ctx: Ctx, a: NodeArgs, in_spatial: Sequence[int], kernel: Sequence[int],
    strides: Sequence[int], dilation: Sequence[int],
) -> list[tuple[int, int]]:
    """Per-dim (lo, hi) padding from auto_pad or pads ([begin..., end...])."""
    n = len(in_spatial)
    auto_pad = a.attr("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        padding = []
        for size, k, s, d in zip(in_spatial, kernel, strides, dilation):
            out = ceil_div(size, s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            padding.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
        return padding
    if auto_pad == "VALID":
        return [(0, 0)] * n
    if auto_pad != "NOTSET":
        raise ctx.error(f"unknown auto_pad '{auto_pad}'")
    pads = list(a.attr("pads", [0] * (2 * n)))
    if len(pads) != 2 * n:
        raise ctx.error(f"pads has {len(pads)} entries, expected {2 * n}")
    return [(int(pads[i]), int(pads[i + n])) for i in range(n)]


@op("Conv")
def _conv(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, w, bias = a.inputs[0], a.inputs[1], a.input(2)
    nsp = x.type.rank - 2
    if nsp < 1:
        raise ctx.error(f"Conv needs an input of rank >= 3, got {x.type}")
    kernel = tuple(a.attr("kernel_shape", w.type.shape[2:]))
    strides = tuple(a.attr("strides", [1] * nsp))
    dilation = tuple(a.attr("dilations", [1] * nsp))
    padding = _spatial_padding(ctx, a, x.type.shape[2:], kernel, strides, dilation)
    y = ctx.op("conv", [x, w], strides=strides, padding=tuple(padding), dilation=dilation, groups=int(a.attr("group", 1)))
    if bias is not None:
        y = ctx.op("add", [y, ctx.broadcast_in_dims(bias, y.type.shape, (1,))])
    return [y]


@op("ConvTranspose")
def _conv_transpose(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Transposed convolution as a convolution over the input spread by the strides (lhs_dilation).

    Full output extent per dim: stride * (in - 1) + output_padding + span - lo - hi,
    span = (k - 1) * dilation + 1. The equivalent convolution pads the spread input
    by span - 1 - lo (low) and span - 1 - hi + output_padding (high) and uses the
    kernel flipped spatially with its two channel dims swapped per group. Padding
    that comes out negative crops the result instead.
    """
    x, w, bias = a.inputs[0], a.inputs[1], a.input(2)
    nsp = x.type.rank - 2
    if nsp < 1 or w.type.rank != x.type.rank:
        raise ctx.error(f"ConvTranspose needs x [N,C,*S] and w [C,M/g,*K], got {x.type} and {w.type}")
    groups = int(a.attr("group", 1))
    c, m_per_group = w.type.shape[:2]
    kernel = w.type.shape[2:]
    in_spatial = x.type.shape[2:]
    strides = tuple(int(v) for v in a.attr("strides", [1] * nsp))
    dilation = tuple(int(v) for v in a.attr("dilations", [1] * nsp))
    out_pad = [int(v) for v in a.attr("output_padding", [0] * nsp)][:nsp]
    if x.type.shape[1] != c or c % groups:
        raise ctx.error(f"ConvTranspose: input channels {x.type.shape[1]} vs weight {w.type}, group {groups}")
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    full = [s * (n - 1) + op + span for s, n, op, span in zip(strides, in_spatial, out_pad, spans)]  # unpadded extent
    auto_pad = a.attr("auto_pad", "NOTSET")
    output_shape = a.attr("output_shape")
    out_shape = [int(v) for v in output_shape][-nsp:] if output_shape is not None else None
    if "pads" in a.attrs or (auto_pad not in ("SAME_UPPER", "SAME_LOWER") and out_shape is None):
        pads = [int(v) for v in a.attr("pads", [0] * (2 * nsp))]
        if len(pads) != 2 * nsp:
            raise ctx.error(f"pads has {len(pads)} entries, expected {2 * nsp}")
        lo = pads[:nsp]
        if out_shape is None:
            out_shape = [f - l - h for f, l, h in zip(full, lo, pads[nsp:])]
    else:
        if out_shape is None:
            out_shape = [n * s for n, s in zip(in_spatial, strides)]
        total = [f - o for f, o in zip(full, out_shape)]
        lo = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    if any(o < 1 for o in out_shape):
        raise ctx.error(f"ConvTranspose output shape {out_shape} is empty")
    # weight [C, M/g, *K] -> [g, C/g, M/g, *K] -> [g, M/g, C/g, *K] -> [M, C/g, *K], flipped
    wg = ctx.reshape(w, (groups, c // groups, m_per_group) + kernel)
    wg = ctx.transpose(wg, (0, 2, 1) + tuple(range(3, 3 + nsp)))
    wt = ctx.reshape(wg, (groups * m_per_group, c // groups) + kernel)
    wt = ctx.op("reverse", [wt], dims=tuple(range(2, 2 + nsp)))
    padding, crops = [], []
    for span, l, n, s, o in zip(spans, lo, in_spatial, strides, out_shape):
        # output index i reads full index i + l; the spread input is s * (n - 1) + 1 long
        low = span - 1 - l
        high = o + l - s * (n - 1) - 1
        padding.append((max(low, 0), max(high, 0)))
        crops.append((max(-low, 0), max(-high, 0)))
    y = ctx.op("conv", [x, wt], strides=(1,) * nsp, padding=tuple(padding), dilation=dilation,
               groups=groups, lhs_dilation=strides)
    if any(lo_c or hi_c for lo_c, hi_c in crops):
        shape = y.type.shape
        y = ctx.op("slice", [y], start=(0, 0) + tuple(lo_c for lo_c, _ in crops),
                   limit=shape[:2] + tuple(n - hi_c for n, (_, hi_c) in zip(shape[2:], crops)), stride=(1,) * len(shape))
    if bias is not None:
        y = ctx.op("add", [y, ctx.broadcast_in_dims(bias, y.type.shape, (1,))])
    return [y]


def _pool_geometry(ctx: Ctx, a: NodeArgs, x: Value) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], list[tuple[int, int]], list[tuple[int, int]]]:
    """kernel, strides, dilations, explicit padding, and padding extended for ceil_mode (ONNX/onnxruntime rule)."""
    nsp = x.type.rank - 2
    kernel = tuple(a.attr("kernel_shape"))
    strides = tuple(a.attr("strides", [1] * nsp))
    dilation = tuple(a.attr("dilations", [1] * nsp))
    padding = _spatial_padding(ctx, a, x.type.shape[2:], kernel, strides, dilation)
    extended = list(padding)
    if a.attr("ceil_mode", 0):
        for i, (size, k, s, d, (lo, hi)) in enumerate(zip(x.type.shape[2:], kernel, strides, dilation, padding)):
            span = (k - 1) * d + 1
            out = ceil_div(size + lo + hi - span, s) + 1
            if (out - 1) * s >= size + lo:
                out -= 1  # the last window must start inside the input or its left padding
            extended[i] = (lo, max(hi, (out - 1) * s + span - size - lo))
    return kernel, strides, dilation, padding, extended


def _window_attrs(kernel, strides, padding, dilation=None) -> dict:
    attrs = {"window": (1, 1) + tuple(kernel), "strides": (1, 1) + tuple(strides), "padding": ((0, 0), (0, 0)) + tuple(padding)}
    if dilation is not None and any(d != 1 for d in dilation):
        attrs["window_dilation"] = (1, 1) + tuple(dilation)
    return attrs


@op("MaxPool")
def _max_pool(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    kernel, strides, dilation, _, padding = _pool_geometry(ctx, a, x)
    return [ctx.op("reduce_window", [x], kind="max", **_window_attrs(kernel, strides, padding, dilation))]


def _window_counts(x: Value, kernel, strides, dilation, explicit, out_spatial, include_pad: bool) -> np.ndarray:
    """How many window taps of each output land inside the input (and its explicit padding if include_pad)."""
    counts = np.ones((), dtype=np.float64)
    for size, k, s, d, (lo, hi), n_out in zip(x.type.shape[2:], kernel, strides, dilation, explicit, out_spatial):
        taps = (np.arange(n_out) * s - lo)[:, None] + np.arange(k)[None, :] * d
        low_limit, high_limit = (-lo, size + hi) if include_pad else (0, size)
        per_dim = ((taps >= low_limit) & (taps < high_limit)).sum(axis=1)
        counts = np.multiply.outer(counts, per_dim.astype(np.float64))
    return counts


@op("AveragePool")
def _average_pool(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    kernel, strides, dilation, explicit, padding = _pool_geometry(ctx, a, x)
    total = ctx.op("reduce_window", [x], kind="sum", **_window_attrs(kernel, strides, padding, dilation))
    # Count of the elements each window averages: inside the input (count_include_pad=0), or inside
    # the input and its explicit padding but not the extra ceil_mode padding (count_include_pad=1).
    include_pad = bool(a.attr("count_include_pad", 0))
    counts = _window_counts(x, kernel, strides, dilation, explicit, total.type.shape[2:], include_pad)
    if np.all(counts == counts.flat[0]):
        return [ctx.binary_scalar("div", total, float(counts.flat[0]))]
    divisor = ctx.constant(counts, x.type.dtype)
    dims = tuple(range(2, x.type.rank))
    return [ctx.op("div", [total, ctx.broadcast_in_dims(divisor, total.type.shape, dims)])]


@op("LpPool")
def _lp_pool(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """y = (sum over the window of |x|^p) ^ (1/p); padding contributes 0."""
    x = a.inputs[0]
    p = float(a.attr("p", 2))
    kernel, strides, dilation, _, padding = _pool_geometry(ctx, a, x)
    mag = ctx.op("abs", [x])
    powered = ctx.op("mul", [mag, mag]) if p == 2.0 else ctx.binary_scalar("pow", mag, p)
    total = ctx.op("reduce_window", [powered], kind="sum", **_window_attrs(kernel, strides, padding, dilation))
    return [ctx.op("sqrt", [total]) if p == 2.0 else ctx.binary_scalar("pow", total, 1.0 / p)]


@op("GlobalLpPool")
def _global_lp_pool(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    p = float(a.attr("p", 2))
    mag = ctx.op("abs", [x])
    powered = ctx.op("mul", [mag, mag]) if p == 2.0 else ctx.binary_scalar("pow", mag, p)
    total = ctx.reduce(powered, "sum", tuple(range(2, x.type.rank)), keepdims=True)
    return [ctx.op("sqrt", [total]) if p == 2.0 else ctx.binary_scalar("pow", total, 1.0 / p)]


@op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    axes = tuple(range(2, x.type.rank))
    if a.node.op_type == "GlobalMaxPool":
        return [ctx.reduce(x, "max", axes, keepdims=True)]
    total = ctx.reduce(x, "sum", axes, keepdims=True)
    return [ctx.binary_scalar("div", total, float(math.prod(x.type.shape[2:])))]


# -- normalisation ----------------------------------------------------------------
@op("BatchNormalization")
def _batch_norm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Inference form: y = x * scale + shift, scale = gamma / sqrt(var + eps), shift = beta - mean * scale."""
    x, gamma, beta, mean, var = a.inputs[:5]
    if a.attr("training_mode", 0):
        raise ctx.unsupported("training_mode=1 (aot compiles inference graphs)")
    eps = float(a.attr("epsilon", 1e-5))
    params = [ctx.const(v) for v in (gamma, beta, mean, var)]
    dtype = x.type.dtype
    if all(p is not None for p in params):
        g, b, m, v = (p.astype(np.float64) for p in params)
        scale_np = g / np.sqrt(v + eps)
        scale = ctx.constant(scale_np, dtype)
        shift = ctx.constant(b - m * scale_np, dtype)
    else:
        inv_std = ctx.op("rsqrt", [ctx.binary_scalar("add", var, eps)])
        scale = ctx.op("mul", [gamma, inv_std])
        shift = ctx.op("sub", [beta, ctx.op("mul", [mean, scale])])
    shape = x.type.shape
    y = ctx.op("mul", [x, ctx.broadcast_in_dims(scale, shape, (1,))])
    return [ctx.op("add", [y, ctx.broadcast_in_dims(shift, shape, (1,))])]


def _normalize(ctx: Ctx, x: Value, axes: Sequence[int], eps: float) -> Value:
    """(x - mean) / sqrt(var + eps) over `axes`."""
    return _normalize_stats(ctx, x, axes, eps)[0]


def _normalize_stats(ctx: Ctx, x: Value, axes: Sequence[int], eps: float) -> tuple[Value, Value, Value]:
    """(normalised x, mean, 1 / sqrt(var + eps)); the statistics have `axes` removed.

    The mean is the row's first element plus the mean of x minus it: exact for a
    constant row, whose plain float32 mean, off in the last bit, 1/sqrt(eps) would
    amplify (onnxruntime accumulates in double; the fuzzer found LayerNorm over a
    padded constant row 7.8e-4 off).
    """
    shape = x.type.shape
    count = float(math.prod(shape[i] for i in axes))
    first = ctx.op("slice", [x], start=(0,) * len(shape), limit=tuple(1 if i in axes else d for i, d in enumerate(shape)),
                   stride=(1,) * len(shape))
    pivot = ctx.reshape(first, tuple(d for i, d in enumerate(shape) if i not in axes))
    shifted = ctx.op("sub", [x, ctx.unreduce(pivot, shape, axes)])
    mean = ctx.op("add", [pivot, ctx.binary_scalar("div", ctx.reduce(shifted, "sum", axes), count)])
    centered = ctx.op("sub", [x, ctx.unreduce(mean, shape, axes)])
    var = ctx.binary_scalar("div", ctx.reduce(ctx.op("mul", [centered, centered]), "sum", axes), count)
    inv_std = ctx.op("rsqrt", [ctx.binary_scalar("add", var, eps)])
    return ctx.op("mul", [centered, ctx.unreduce(inv_std, shape, axes)]), mean, inv_std


def _stash(ctx: Ctx, a: NodeArgs, x: Value) -> Value:
    """x in the stash type (float32 unless stash_type says otherwise): half inputs normalise in float32."""
    stash = to_dtype(int(a.attr("stash_type", 1)), "stash_type")
    if not stash.is_float or stash.is_float8:
        raise ctx.unsupported(f"stash_type={int(a.attr('stash_type'))} ({stash.value}) is not a precision to normalise in")
    return ctx.convert(x, stash) if x.type.dtype in (DType.F16, DType.BF16) or stash is DType.F64 else x


@op("LayerNormalization")
def _layer_norm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, scale, bias = a.inputs[0], a.inputs[1], a.input(2)
    rank = x.type.rank
    axis = norm_axis(ctx, a.attr("axis", -1), rank)
    axes = tuple(range(axis, rank))
    y, mean, inv_std = _normalize_stats(ctx, _stash(ctx, a, x), axes, float(a.attr("epsilon", 1e-5)))
    y = ctx.convert(y, x.type.dtype)
    y = ctx.op("mul", [y, ctx.broadcast_to(scale, y.type.shape)])
    if bias is not None:
        y = ctx.op("add", [y, ctx.broadcast_to(bias, y.type.shape)])
    kept = [1 if i in axes else d for i, d in enumerate(x.type.shape)]
    return [y, ctx.reshape(mean, kept), ctx.reshape(inv_std, kept)]


@op("RMSNormalization")
def _rms_norm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """y = x / sqrt(mean(x^2 over axis..) + eps) * scale."""
    x, scale = a.inputs[0], a.inputs[1]
    rank = x.type.rank
    axis = norm_axis(ctx, a.attr("axis", -1), rank)
    axes = tuple(range(axis, rank))
    wide = _stash(ctx, a, x)
    count = float(math.prod(x.type.shape[i] for i in axes))
    mean_square = ctx.binary_scalar("div", ctx.reduce(ctx.op("mul", [wide, wide]), "sum", axes), count)
    inv_rms = ctx.op("rsqrt", [ctx.binary_scalar("add", mean_square, float(a.attr("epsilon", 1e-5)))])
    y = ctx.convert(ctx.op("mul", [wide, ctx.unreduce(inv_rms, wide.type.shape, axes)]), x.type.dtype)
    return [ctx.op("mul", [y, ctx.broadcast_to(scale, y.type.shape)])]


@op("GroupNormalization")
def _group_norm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, scale, bias = a.inputs
    groups = int(a.attr("num_groups"))
    shape = x.type.shape
    n, c = shape[:2]
    grouped = ctx.reshape(_stash(ctx, a, x), (n, groups, c // groups) + shape[2:])
    y = _normalize(ctx, grouped, range(2, grouped.type.rank), float(a.attr("epsilon", 1e-5)))
    y = ctx.convert(ctx.reshape(y, shape), x.type.dtype)
    # scale and bias are per channel from opset 21 on, per group before
    if scale.type.shape[0] == groups and groups != c:
        scale = ctx.reshape(ctx.broadcast_in_dims(scale, (groups, c // groups), (0,)), (c,))
        bias = ctx.reshape(ctx.broadcast_in_dims(bias, (groups, c // groups), (0,)), (c,))
    y = ctx.op("mul", [y, ctx.broadcast_in_dims(scale, shape, (1,))])
    return [ctx.op("add", [y, ctx.broadcast_in_dims(bias, shape, (1,))])]


@op("MeanVarianceNormalization")
def _mvn(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    axes = [norm_axis(ctx, ax, x.type.rank) for ax in a.attr("axes", [0, 2, 3])]
    # ONNX's function body uses eps = 1e-9 inside the sqrt
    return [_normalize(ctx, x, sorted(set(axes)), 1e-9)]


@op("LpNormalization")
def _lp_norm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    axis = norm_axis(ctx, a.attr("axis", -1), x.type.rank)
    p = int(a.attr("p", 2))
    if p == 1:
        norm = ctx.reduce(ctx.op("abs", [x]), "sum", (axis,))
    elif p == 2:
        norm = ctx.op("sqrt", [ctx.reduce(ctx.op("mul", [x, x]), "sum", (axis,))])
    else:
        raise ctx.error(f"p must be 1 or 2, got {p}")
    norm = ctx.unreduce(norm, x.type.shape, (axis,))
    zero = ctx.op("compare", [norm, ctx.full(0, norm.type)], direction="eq")
    # a zero norm gives 0, not NaN (the reference's where(norm == 0, 0, x / norm))
    return [ctx.op("select", [zero, ctx.full(0, x.type), ctx.op("div", [x, norm])])]


@op("InstanceNormalization")
def _instance_norm(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, scale, bias = a.inputs
    y = _normalize(ctx, x, range(2, x.type.rank), float(a.attr("epsilon", 1e-5)))
    y = ctx.op("mul", [y, ctx.broadcast_in_dims(scale, y.type.shape, (1,))])
    return [ctx.op("add", [y, ctx.broadcast_in_dims(bias, y.type.shape, (1,))])]


# -- softmax ----------------------------------------------------------------------
def _softmax_axes(ctx: Ctx, a: NodeArgs, x: Value) -> tuple[Value, tuple[int, ...], tuple[int, ...]]:
    """Operand, reduced axes and the shape to restore.

    Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
    normalised over the second dim; from 13 on over the single `axis` (default -1).
    """
    rank = x.type.rank
    shape = x.type.shape
    if ctx.opset < 13:
        axis = norm_axis(ctx, a.attr("axis", 1), rank)
        return x, tuple(range(axis, rank)), shape
    return x, (norm_axis(ctx, a.attr("axis", -1), rank),), shape


@op("Softmax", "LogSoftmax")
def _softmax(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, axes, shape = _softmax_axes(ctx, a, a.inputs[0])
    # subtract the max for stability: exp(x - max) never overflows
    peak = ctx.unreduce(ctx.reduce(x, "max", axes), shape, axes)
    shifted = ctx.op("sub", [x, peak])
    exps = ctx.op("exp", [shifted])
    total = ctx.reduce(exps, "sum", axes)
    if a.node.op_type == "LogSoftmax":
        return [ctx.op("sub", [shifted, ctx.op("log", [ctx.unreduce(total, shape, axes)])])]
    # one division per row, then a multiply per element (as onnxruntime does): a vector
    # division per element cost a quarter of a long softmax row
    scale = ctx.op("div", [ctx.full(1.0, total.type), total])
    return [ctx.op("mul", [exps, ctx.unreduce(scale, shape, axes)])]


@op("LRN")
def _lrn(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """y = x / (bias + alpha / size * sum of x^2 over `size` neighbouring channels) ^ beta."""
    x = a.inputs[0]
    size = int(a.attr("size"))
    alpha, beta, bias = float(a.attr("alpha", 1e-4)), float(a.attr("beta", 0.75)), float(a.attr("bias", 1.0))
    rank = x.type.rank
    window = (1, size) + (1,) * (rank - 2)
    padding = ((0, 0), ((size - 1) // 2, size - 1 - (size - 1) // 2)) + ((0, 0),) * (rank - 2)
    sums = ctx.op("reduce_window", [ctx.op("mul", [x, x])], kind="sum", window=window, strides=(1,) * rank, padding=padding)
    denom = ctx.binary_scalar("add", ctx.binary_scalar("mul", sums, alpha / size), bias)
    return [ctx.op("div", [x, ctx.binary_scalar("pow", denom, beta)])]


# -- einsum -----------------------------------------------------------------------
def _einsum_terms(ctx: Ctx, equation: str, operands: Sequence[Value]) -> tuple[list[str], str]:
    """Input subscripts and output subscript, the ellipsis spelled out as fresh upper-case letters.

    Ellipsis dims align from the right across operands (numpy broadcasting);
    the implicit output is the ellipsis dims, then the letters used once, sorted.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ctx.error(f"equation '{equation}' has {len(terms)} operand terms for {len(operands)} inputs")
    fresh = [ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if ch not in eq]
    ell_ranks = []
    for term, v in zip(terms, operands):
        named = len(term.replace("...", ""))
        if ("..." in term and named > v.type.rank) or ("..." not in term and named != v.type.rank):
            raise ctx.error(f"term '{term}' does not match operand {v.type}")
        ell_ranks.append(v.type.rank - named if "..." in term else 0)
    n_ell = max(ell_ranks, default=0)
    ell = "".join(fresh[:n_ell])
    spelled = [t.replace("...", ell[n_ell - r:]) for t, r in zip(terms, ell_ranks)]
    if arrow:
        out = out.replace("...", ell)
    else:
        counts = {ch: "".join(spelled).count(ch) for ch in "".join(spelled)}
        out = ell + "".join(sorted(ch for ch, n in counts.items() if n == 1 and ch not in ell))
    for ch in "".join(spelled) + out:
        if not ch.isalpha():
            raise ctx.error(f"bad subscript '{ch}' in einsum equation '{equation}'")
    return spelled, out


def _einsum_diagonal(ctx: Ctx, v: Value, term: str) -> tuple[Value, str]:
    """Take the diagonal of every letter repeated within one term (ii -> i)."""
    while len(set(term)) != len(term):
        ch = next(c for c in term if term.count(c) > 1)
        p = term.index(ch)
        q = term.index(ch, p + 1)
        shape = v.type.shape
        rows = ctx.op("iota", [], shape=shape, dim=p, dtype=DType.I64)
        cols = ctx.op("iota", [], shape=shape, dim=q, dtype=DType.I64)
        on_diag = ctx.op("compare", [rows, cols], direction="eq")
        kind = "max" if v.type.dtype is DType.BOOL else "sum"
        v = ctx.reduce(ctx.op("select", [on_diag, v, ctx.full(0, v.type)]), kind, (q,))
        term = term[:q] + term[q + 1:]
    return v, term


@op("Einsum")
def _einsum(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Diagonals and lone sums per operand, then pairwise dot_general left to right, then a transpose."""
    operands = list(a.inputs)
    terms, out = _einsum_terms(ctx, str(a.attr("equation")), operands)
    sizes: dict[str, int] = {}
    for term, v in zip(terms, operands):
        for ch, n in zip(term, v.type.shape):
            if sizes.get(ch, 1) != 1 and n not in (1, sizes[ch]):
                raise ctx.error(f"subscript '{ch}' has sizes {sizes[ch]} and {n}")
            sizes[ch] = max(sizes.get(ch, 1), n)
    items = []
    for i, (term, v) in enumerate(zip(terms, operands)):
        v, term = _einsum_diagonal(ctx, v, term)
        # letters no other operand and not the output mention are summed out now
        others = out + "".join(t for j, t in enumerate(terms) if j != i)
        lone = tuple(d for d, ch in enumerate(term) if ch not in others)
        if lone:
            v = ctx.reduce(v, "sum", lone)
            term = "".join(ch for d, ch in enumerate(term) if d not in lone)
        # size-1 dims that pair with a bigger one broadcast up (ellipsis broadcasting)
        v = ctx.broadcast_in_dims(v, tuple(sizes[ch] for ch in term), tuple(range(len(term))))
        items.append((v, term))
    lhs, lterm = items[0]
    for k in range(1, len(items)):
        rhs, rterm = items[k]
        later = out + "".join(t for _, t in items[k + 1:])
        shared = [ch for ch in lterm if ch in rterm]
        batch = [ch for ch in shared if ch in later]
        contract = [ch for ch in shared if ch not in later]
        lhs = ctx.op("dot", [lhs, rhs],
                     lhs_batch=tuple(lterm.index(ch) for ch in batch), rhs_batch=tuple(rterm.index(ch) for ch in batch),
                     lhs_contract=tuple(lterm.index(ch) for ch in contract), rhs_contract=tuple(rterm.index(ch) for ch in contract))
        lterm = "".join(batch) + "".join(ch for ch in lterm if ch not in shared) + "".join(ch for ch in rterm if ch not in shared)
        gone = tuple(d for d, ch in enumerate(lterm) if ch not in out + "".join(t for _, t in items[k + 1:]))
        if gone:
            lhs = ctx.reduce(lhs, "sum", gone)
            lterm = "".join(ch for d, ch in enumerate(lterm) if d not in gone)
    if set(lterm) != set(out) or len(out) != len(set(out)):
        raise ctx.error(f"einsum output '{out}' does not match the operands' subscripts '{lterm}'")
    return [ctx.transpose(lhs, [lterm.index(ch) for ch in out])]
