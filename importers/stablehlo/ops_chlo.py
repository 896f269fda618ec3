"""chlo ops (the "client HLO" JAX writes for functions StableHLO lacks), lowered to primitives.

Each lowering builds the decomposition StableHLO's chlo-legalize-to-stablehlo
pass builds, which is what XLA (and so JAX) runs: special functions in
special.py, the short ones here. Where that pass upcasts f16/bf16 to f32
(sinh, cosh and the special functions), so do we.

Not lowered, each a clear error: complex element types (aot has none),
chlo.ragged_dot (JAX writes ragged_dot as stablehlo ops on CPU), chlo.scan
(CHLO itself has no decomposition), chlo.mulhi.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from aot.ir import DType, Value
from aot.registry import registry

from . import ops_elementwise, ops_shape, special
from .arith import Num, finfo
from .context import Ctx
from .syntax import Op

OPS, op = registry()  # op name -> lowering (cx, op, operands) -> results

# chlo ops that are StableHLO primitives of ours already
SAME_AS_PRIMITIVE = {"chlo.erf": "erf", "chlo.tan": "tan"}


def _float(cx: Ctx, v: Value) -> Num:
    if not v.type.dtype.is_float:
        raise cx.error(f"needs a float operand, got {v.type}")
    return Num(cx, v)


def _unary(fn: Callable[[Num], Num]) -> Callable[[Ctx, Op, list[Value]], list[Value]]:
    def lower(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
        return [fn(_float(cx, ins[0])).v]

    return lower


def _binary(fn: Callable[[Num, Num], Num]) -> Callable[[Ctx, Op, list[Value]], list[Value]]:
    def lower(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
        a, b = ins
        if a.type != b.type:
            raise cx.error(f"operands must have one type, got {a.type} and {b.type}")
        return [fn(_float(cx, a), _float(cx, b)).v]

    return lower


def _primitive(ours: str) -> Callable[[Ctx, Op, list[Value]], list[Value]]:
    def lower(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
        return [cx.op(ours, ins)]

    return lower


# -- trigonometric and hyperbolic -------------------------------------------------------------
def _asin(x: Num) -> Num:
    """2 atan2(x, 1 + sqrt((1 - x)(1 + x))): the product form keeps precision near |x| = 1."""
    angle = x.atan2(1.0 + ((1.0 - x) * (1.0 + x)).sqrt())
    return angle + angle


def _acos(x: Num) -> Num:
    return ((1.0 - x) * (1.0 + x)).sqrt().atan2(x)


def _atan(x: Num) -> Num:
    return x.atan2(1.0)


def _asinh(x: Num) -> Num:
    """sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log 2 + log |x| where x^2 would overflow."""
    ax = x.abs()
    ax2 = ax * ax
    huge = ax.ge(x.like(float(finfo(x.dtype).max)).sqrt())
    near = (ax + ax2 / (1.0 + (1.0 + ax2).sqrt())).log1p()
    far = x.like(2.0).log() + ax.log()
    return x.sign() * huge.where(far, near)


def _acosh(x: Num) -> Num:
    """log1p(sqrt(x - 1) (sqrt(x + 1) + sqrt(x - 1))); log 2 + log x beyond max / 2. NaN below 1."""
    two = x.like(2.0)
    root = (x - 1.0).sqrt()
    near = (root * ((x + 1.0).sqrt() + root)).log1p()
    far = two.log() + x.log()
    return x.ge(x.like(float(finfo(x.dtype).max)) / two).where(far, near)


def _atanh(x: Num) -> Num:
    """(log1p(x) - log1p(-x)) / 2; NaN for |x| > 1."""
    return x.abs().gt(1.0).where(math.nan, (x.log1p() - (-x).log1p()) * 0.5)


def _sinh_wide(x: Num) -> Num:
    """(e^x - e^-x) / 2 as e^(x + log 1/2) - e^(log 1/2 - x) (no early overflow); via expm1 for |x| < 1."""
    log_half = x.like(0.5).log()
    far = (x + log_half).exp() - (log_half - x).exp()
    e = x.expm1()
    near = 0.5 * (e + e / (e + 1.0))
    return x.abs().lt(1.0).where(near, far)


def _cosh_wide(x: Num) -> Num:
    log_half = x.like(0.5).log()
    return (x + log_half).exp() + (log_half - x).exp()


def _sinh(x: Num) -> Num:
    return special.upcast(_sinh_wide, x)


def _cosh(x: Num) -> Num:
    return special.upcast(_cosh_wide, x)


# -- next_after ---------------------------------------------------------------------------------
def _next_after(x: Num, y: Num) -> Num:
    """The float next to x toward y, by arithmetic (aot has no bitcast): x +- the spacing of floats at |x|.

    The spacing above a normal |x| is 2^(e - mantissa bits) for |x| in [2^e, 2^(e+1));
    below an exact power of two it is half that. 2^e is found by a binary search over
    the exponent with power-of-two scalings, all exact. Subnormals are spaced by the
    smallest subnormal. Results match the bit-incrementing std::nextafter that CHLO
    builds, signed zeros and infinities included.
    """
    info = finfo(x.dtype)
    smallest_normal, tiny = float(info.smallest_normal), float(info.smallest_subnormal)
    a = x.abs()
    scaled, power = a, x.like(1.0)
    step = 1 << ((info.maxexp - 1).bit_length() - 1)
    while step:
        up = scaled.ge(2.0 ** step)
        scaled = up.where(scaled * 2.0 ** -step, scaled)
        power = up.where(power * 2.0 ** step, power)
        down = scaled.lt(2.0 ** (1 - step))
        scaled = down.where(scaled * 2.0 ** step, scaled)
        power = down.where(power * 2.0 ** -step, power)
        step //= 2
    ulp = power * 2.0 ** -info.nmant
    subnormal = a.lt(smallest_normal)
    above = subnormal.where(tiny, ulp)
    below = subnormal.where(tiny, (a.eq(power) & a.gt(smallest_normal)).where(ulp * 0.5, ulp))
    grow = (y.gt(x) & x.gt(0.0)) | (y.lt(x) & x.lt(0.0))
    magnitude = grow.where(a + above, a - below)
    magnitude = a.eq(math.inf).where(float(info.max), magnitude)
    result = x.lt(0.0).where(-magnitude, magnitude)
    result = x.eq(0.0).where(y.lt(0.0).where(-tiny, x.like(tiny)), result)
    result = x.eq(y).where(y, result)
    return (x.ne(x) | y.ne(y)).where(math.nan, result)


UNARY: dict[str, Callable[[Num], Num]] = {
    "asin": _asin, "acos": _acos, "atan": _atan, "asinh": _asinh, "acosh": _acosh, "atanh": _atanh,
    "sinh": _sinh, "cosh": _cosh, "erfc": special.erfc, "erf_inv": special.erf_inv, "lgamma": special.lgamma,
    "digamma": special.digamma, "bessel_i1e": special.bessel_i1e,
}
BINARY: dict[str, Callable[[Num, Num], Num]] = {
    "zeta": special.zeta, "polygamma": special.polygamma, "next_after": _next_after,
}
for _name, _fn in UNARY.items():
    OPS[f"chlo.{_name}"] = _unary(_fn)
for _name, _fn2 in BINARY.items():
    OPS[f"chlo.{_name}"] = _binary(_fn2)
for _name, _ours in SAME_AS_PRIMITIVE.items():
    OPS[_name] = _primitive(_ours)


# -- predicates, square, conj, constants -----------------------------------------------------------
@op("chlo.is_inf")
def _is_inf(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [_float(cx, ins[0]).abs().eq(math.inf).v]


@op("chlo.is_pos_inf")
def _is_pos_inf(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [_float(cx, ins[0]).eq(math.inf).v]


@op("chlo.is_neg_inf")
def _is_neg_inf(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [_float(cx, ins[0]).eq(-math.inf).v]


@op("chlo.square")
def _square(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return [cx.op("mul", [ins[0], ins[0]])]


@op("chlo.conj")
def _conj(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return ins  # conj(x) = x for real x; complex types are refused where types are read


@op("chlo.constant")
def _constant(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    return ops_shape.OPS["stablehlo.constant"](cx, o, ins)


@op("chlo.constant_like")
def _constant_like(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    """A splat of `value` in the operand's shape and the result's element type."""
    value = o.attrs.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise cx.error(f"constant_like needs a scalar 'value', got {value!r}")
    dtype = cx.dtype(cx.result_type().elem)
    return [cx.full(value, ins[0].type.with_dtype(dtype))]


# -- top_k -------------------------------------------------------------------------------------------
@op("chlo.top_k")
def _top_k(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    """The k largest along the last dim, largest first, ties in index order: a stable descending sort, sliced.

    As XLA's sort with a TOTALORDER comparator, NaN counts as the largest;
    unlike it, -0.0 and 0.0 tie (keeping index order) and a NaN with its
    sign bit set counts as largest too.
    """
    (x,) = ins
    k = cx.int_attr("k")
    rank = x.type.rank
    if rank == 0:
        raise cx.error(f"top_k needs an operand of rank >= 1, got {x.type}")
    n = x.type.shape[-1]
    if not 0 <= k <= n:
        raise cx.error(f"k = {k} is outside [0, {n}] for the last dim of {x.type}")
    index_dtype = cx.dtype(cx.result_type(1).elem)
    dtype = index_dtype if index_dtype in (DType.I32, DType.I64) else DType.I64
    values = cx.op("sort", [x], dim=rank - 1, descending=True)
    order = cx.convert(cx.op("argsort", [x], dim=rank - 1, descending=True, dtype=dtype), index_dtype)
    keep = {"start": (0,) * rank, "limit": x.type.shape[:-1] + (k,), "stride": (1,) * rank}
    return [cx.op("slice", [values], **keep), cx.op("slice", [order], **keep)]


# -- broadcasting binary forms -------------------------------------------------------------------------
BROADCASTING = {
    "add": "stablehlo.add", "atan2": "stablehlo.atan2", "divide": "stablehlo.divide",
    "maximum": "stablehlo.maximum", "minimum": "stablehlo.minimum", "multiply": "stablehlo.multiply",
    "power": "stablehlo.power", "remainder": "stablehlo.remainder", "subtract": "stablehlo.subtract",
    "and": "stablehlo.and", "or": "stablehlo.or", "xor": "stablehlo.xor",
    "shift_left": "stablehlo.shift_left", "shift_right_arithmetic": "stablehlo.shift_right_arithmetic",
    "shift_right_logical": "stablehlo.shift_right_logical", "compare": "stablehlo.compare",
    "select": "stablehlo.select", "next_after": "chlo.next_after", "zeta": "chlo.zeta",
    "polygamma": "chlo.polygamma",
}


def _broadcast_operand(cx: Ctx, v: Value, shape: tuple[int, ...], dims: tuple[int, ...] | None) -> Value:
    """v in `shape`: its dims map to `dims` (broadcast_dimensions) or, numpy-style, to the trailing ones."""
    if v.type.shape == shape:
        return v
    if v.type.rank == 0:
        return cx.broadcast_scalar(v, shape)
    if dims is None or v.type.rank == len(shape):
        dims = tuple(range(len(shape) - v.type.rank, len(shape)))
    return ops_shape.broadcast_in_dim(cx, v, shape, dims)


def _broadcasting(target: str) -> Callable[[Ctx, Op, list[Value]], list[Value]]:
    def lower(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
        shape = cx.static_result().shape
        dims = cx.ints("broadcast_dimensions") if "broadcast_dimensions" in o.attrs else None
        operands = [_broadcast_operand(cx, v, shape, dims) for v in ins]
        return (ops_elementwise.OPS.get(target) or OPS[target])(cx, o, operands)

    return lower


for _name, _target in BROADCASTING.items():
    OPS[f"chlo.broadcast_{_name}"] = _broadcasting(_target)


__all__ = ["OPS", "SAME_AS_PRIMITIVE"]
