"""Linear quantization ONNX ops, lowered to float arithmetic: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

quantize(x)   = saturate(round_half_even(x / scale) + zero_point)
dequantize(q) = (q - zero_point) * scale
Scales and zero points are per tensor (scalar), per axis (1-D along `axis`)
or blocked (x's rank, each element covering `block_size` along `axis`).
Arithmetic is in float32 (float64 for float64 scales): integer operands of
the 8- and 16-bit types are exact there, and products of 8-bit operands sum
exactly while a dot stays under 2^24 in magnitude. The narrow types aot has
no dtype for (int4, float8, uint16, ...) are rejected by the loader, by name.
"""
from __future__ import annotations


import numpy as np

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, norm_axis, op_registry
from .loader import to_dtype
from .ops_nn import _conv, _matmul

OPS, op = op_registry()


def _compute_dtype(*values: Value | None) -> DType:
    return DType.F64 if any(v is not None and v.type.dtype is DType.F64 for v in values) else DType.F32


def _expand_param(ctx: Ctx, p: Value, x: Value, axis: int, block_size: int, dtype: DType) -> Value:
    """A scale or zero point broadcast to x's shape (per tensor, per axis, or blocked)."""
    p = ctx.convert(p, dtype)
    shape = x.type.shape
    if p.type.size == 1 and block_size == 0:
        return ctx.broadcast_in_dims(ctx.reshape(p, ()), shape, ())
    axis = norm_axis(ctx, axis, x.type.rank)  # only per-axis and blocked parameters need a valid axis
    if p.type.rank == 1 and block_size == 0:
        if p.type.shape[0] != shape[axis]:
            raise ctx.error(f"per-axis parameter {p.type} does not match dim {axis} of {x.type}")
        return ctx.broadcast_in_dims(p, shape, (axis,))
    if p.type.rank != x.type.rank or block_size <= 0:
        raise ctx.error(f"parameter {p.type} for {x.type}: blocked quantization needs x's rank and block_size > 0")
    # repeat each element block_size times along axis, then crop to x's extent
    n = p.type.shape[axis]
    if n * block_size < shape[axis] or (n - 1) * block_size >= shape[axis]:
        raise ctx.error(f"{n} blocks of {block_size} do not cover dim {axis} of {x.type}")
    spread_shape = p.type.shape[:axis + 1] + (block_size,) + p.type.shape[axis + 1:]
    dims = tuple(d if d <= axis else d + 1 for d in range(p.type.rank))
    spread = ctx.broadcast_in_dims(p, spread_shape, dims)
    full = ctx.reshape(spread, p.type.shape[:axis] + (n * block_size,) + p.type.shape[axis + 1:])
    if n * block_size != shape[axis]:
        rank = x.type.rank
        limit = tuple(shape[axis] if d == axis else full.type.shape[d] for d in range(rank))
        full = ctx.op("slice", [full], start=(0,) * rank, limit=limit, stride=(1,) * rank)
    return full


def _quantize(ctx: Ctx, x: Value, scale: Value, zp: Value | None, out: DType, compute: DType,
              saturate: bool = True) -> Value:
    """saturate(round(x / scale) + zp) in `out`; scale and zp already at x's shape in `compute`.
    float8: x / scale cast to `out` (rounded to nearest even; the zero point is 0 by definition)."""
    if out.is_float8:
        return ctx.convert(ctx.op("div", [ctx.convert(x, compute), scale]), out, saturate=saturate)
    q = ctx.op("round", [ctx.op("div", [ctx.convert(x, compute), scale])])
    if zp is not None:
        q = ctx.op("add", [q, zp])
    info = np.iinfo(out.to_numpy())
    q = ctx.op("max", [q, ctx.full(float(info.min), q.type)])
    q = ctx.op("min", [q, ctx.full(float(info.max), q.type)])
    return ctx.convert(q, out)


def _dequantize(ctx: Ctx, q: Value, scale: Value, zp: Value | None, compute: DType) -> Value:
    v = ctx.convert(q, compute)
    if zp is not None:
        v = ctx.op("sub", [v, zp])
    return ctx.op("mul", [v, scale])


def _axis_block(ctx: Ctx, a: NodeArgs, x: Value) -> tuple[int, int]:
    return int(a.attr("axis", 1)), int(a.attr("block_size", 0))


QUANT_DTYPES = (DType.U8, DType.I8, DType.I16, DType.U16,
                DType.F8E4M3FN, DType.F8E4M3FNUZ, DType.F8E5M2, DType.F8E5M2FNUZ)


@op("QuantizeLinear")
def _quantize_linear(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, scale, zp = a.inputs[0], a.inputs[1], a.input(2)
    if zp is not None:
        out = zp.type.dtype
    elif a.attr("output_dtype"):
        out = to_dtype(int(a.attr("output_dtype")), "output_dtype")
    else:
        out = DType.U8
    if out not in QUANT_DTYPES:
        names = ", ".join(d.manifest_name for d in QUANT_DTYPES)
        raise ctx.unsupported(f"quantizing to {out.manifest_name} ({names} are supported)")
    axis, block = _axis_block(ctx, a, x)
    compute = _compute_dtype(x, scale)
    s = _expand_param(ctx, scale, x, axis, block, compute)
    z = None if zp is None else _expand_param(ctx, zp, x, axis, block, compute)
    return [_quantize(ctx, x, s, z, out, compute, saturate=bool(a.attr("saturate", 1)))]


@op("DequantizeLinear")
def _dequantize_linear(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, scale, zp = a.inputs[0], a.inputs[1], a.input(2)
    if x.type.dtype not in QUANT_DTYPES + (DType.I32,):
        raise ctx.unsupported(f"dequantizing {x.type.dtype.manifest_name}")
    axis, block = _axis_block(ctx, a, x)
    compute = _compute_dtype(scale)
    s = _expand_param(ctx, scale, x, axis, block, compute)
    z = None if zp is None else _expand_param(ctx, zp, x, axis, block, compute)
    return [ctx.convert(_dequantize(ctx, x, s, z, compute), scale.type.dtype)]


@op("DynamicQuantizeLinear")
def _dynamic_quantize_linear(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """uint8 with scale = (max(0, max x) - min(0, min x)) / 255, zero point = saturate(round(-min / scale))."""
    x = a.inputs[0]
    axes = tuple(range(x.type.rank))
    zero = ctx.full(0.0, ctx.reduce(x, "max", axes).type)
    hi = ctx.op("max", [ctx.reduce(x, "max", axes), zero])
    lo = ctx.op("min", [ctx.reduce(x, "min", axes), zero])
    scale = ctx.binary_scalar("div", ctx.op("sub", [hi, lo]), 255.0)
    zp_float = ctx.op("round", [ctx.op("div", [ctx.op("neg", [lo]), scale])])
    zp_float = ctx.op("min", [ctx.op("max", [zp_float, zero]), ctx.full(255.0, zero.type)])
    shape = x.type.shape
    y = _quantize(ctx, x, ctx.broadcast_in_dims(scale, shape, ()), ctx.broadcast_in_dims(zp_float, shape, ()), DType.U8, DType.F32)
    return [y, scale, ctx.convert(zp_float, DType.U8)]


def _dequantized_operand(ctx: Ctx, q: Value, scale: Value, zp: Value | None, axis: int, compute: DType) -> Value:
    s = _expand_param(ctx, scale, q, axis, 0, compute)
    z = None if zp is None else _expand_param(ctx, zp, q, axis, 0, compute)
    return _dequantize(ctx, q, s, z, compute)


def _integer_operand(ctx: Ctx, q: Value, zp: Value | None, axis: int) -> Value:
    """q - zero_point in float32 (exact for 8-bit operands)."""
    z = None if zp is None else _expand_param(ctx, zp, q, axis, 0, DType.F32)
    v = ctx.convert(q, DType.F32)
    return v if z is None else ctx.op("sub", [v, z])


def _with_inputs(a: NodeArgs, inputs: list[Value | None]) -> NodeArgs:
    """The node's attributes over already-lowered operands (to reuse the MatMul/Conv lowerings)."""
    return NodeArgs(a.node, inputs, a.attrs)


def _requantize(ctx: Ctx, y: Value, y_scale: Value, y_zp: Value | None, compute: DType) -> Value:
    out = y_zp.type.dtype if y_zp is not None else DType.U8
    shape = y.type.shape
    s = ctx.broadcast_in_dims(ctx.reshape(ctx.convert(y_scale, compute), ()), shape, ())
    z = None if y_zp is None else ctx.broadcast_in_dims(ctx.reshape(ctx.convert(y_zp, compute), ()), shape, ())
    return _quantize(ctx, y, s, z, out, compute)


@op("QLinearMatMul")
def _qlinear_matmul(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Integer products (a - a_zp)(b - b_zp), then rescaled by a_scale * b_scale / y_scale and requantized.

    a's parameters are per row (axis -2 of a), b's per column (axis -1 of b), or scalars.
    """
    qa, a_scale, a_zp, qb, b_scale, b_zp, y_scale, y_zp = (a.input(i) for i in range(8))
    compute = _compute_dtype(a_scale, b_scale, y_scale)
    fa = _dequantized_operand(ctx, qa, a_scale, a_zp, max(qa.type.rank - 2, 0), compute)
    fb = _dequantized_operand(ctx, qb, b_scale, b_zp, qb.type.rank - 1, compute)
    y = _matmul(ctx, _with_inputs(a, [fa, fb]))[0]
    return [_requantize(ctx, y, y_scale, y_zp, compute)]


@op("MatMulInteger")
def _matmul_integer(ctx: Ctx, a: NodeArgs) -> list[Value]:
    qa, qb, a_zp, b_zp = (a.input(i) for i in range(4))
    fa = _integer_operand(ctx, qa, a_zp, max(qa.type.rank - 2, 0))
    fb = _integer_operand(ctx, qb, b_zp, qb.type.rank - 1)
    return [ctx.convert(_matmul(ctx, _with_inputs(a, [fa, fb]))[0], DType.I32)]


@op("ConvInteger")
def _conv_integer(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, w, x_zp, w_zp = (a.input(i) for i in range(4))
    fx = _integer_operand(ctx, x, x_zp, 1)
    fw = _integer_operand(ctx, w, w_zp, 0)
    return [ctx.convert(_conv(ctx, _with_inputs(a, [fx, fw]))[0], DType.I32)]


@op("QLinearConv")
def _qlinear_conv(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Conv of the dequantized operands (w per output channel), the int32 bias at x_scale * w_scale, requantized."""
    x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias = (a.input(i) for i in range(9))
    compute = _compute_dtype(x_scale, w_scale, y_scale)
    fx = _dequantized_operand(ctx, x, x_scale, x_zp, 1, compute)
    fw = _dequantized_operand(ctx, w, w_scale, w_zp, 0, compute)
    fb = None
    if bias is not None:
        b_scale = ctx.op("mul", [ctx.broadcast_to(ctx.convert(x_scale, compute), w_scale.type.shape),
                                 ctx.convert(w_scale, compute)])
        fb = ctx.binary("mul", ctx.convert(bias, compute), b_scale)
    y = _conv(ctx, _with_inputs(a, [fx, fw, fb]))[0]
    return [_requantize(ctx, y, y_scale, y_zp, compute)]
