"""Transcendental functions without libm, as small alwaysinline LLVM functions.

The generated shared object links against nothing, so every function below
is built from +,*,/, bit operations and intrinsics that lower to single
instructions (sqrt, fabs, copysign). Each is branch-free (selects) so the
loops that call it vectorize after inlining. Functions are emitted for f32
and f64; the f32 versions of sin, cos and pow compute in f64; f32 erf is a
rational approximation (abs error <= 4.5e-7).

Accuracy (checked against numpy in tests/codegen/cpu/test_math.py): exp, log,
tanh, logistic within ~2 ulp; erf, sin, cos, pow within ~1 ulp of f32. sin,
cos and tan give NaN for |x| >= 2^20 (no Payne-Hanek reduction). expm1,
log1p, tan and atan2 compute f32 in f64 (tests/codegen/cpu/test_math.py);
COMPUTED_IN_F64 names those that do, and their f16/bf16/float8 results round
the f64 result once (elemental.py). fmod is exact (integer long division of
the significands).
"""
from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from llvmlite import ir

from aot.codegen.arith_target import ArithTarget
from aot.codegen.constants import constant

F32 = ir.FloatType()
F64 = ir.DoubleType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)


@dataclass(frozen=True)
class FloatFormat:
    """A float type for the bodies below: scalar, or a vector of `lanes` (the bodies are
    branch-free selects and arithmetic, so one body serves both; constants splat)."""

    ty: ir.Type
    ity: ir.Type
    mant: int  # stored mantissa bits
    bias: int
    suffix: str
    lanes: int = 0  # 0: scalar

    @property
    def single(self) -> bool:
        return self.mant == 23

    def c(self, value: float) -> ir.Constant:
        return constant(self.ty, [value] * self.lanes if self.lanes else value)

    def ci(self, value: int) -> ir.Constant:
        return constant(self.ity, [value] * self.lanes if self.lanes else value)


FMT32 = FloatFormat(F32, I32, 23, 127, "f32")
FMT64 = FloatFormat(F64, I64, 52, 1023, "f64")

# the functions whose bodies take vectors (VECTOR_FUNCTIONS): no integer-indexed tables,
# no f64 detour; the rest are called lane by lane on vectors
VECTOR_FUNCTIONS = frozenset({"exp", "log", "tanh", "logistic", "erf"})


def float_format(ty: ir.Type) -> FloatFormat:
    if isinstance(ty, ir.VectorType):
        scalar = float_format(ty.element)
        return FloatFormat(ty, ir.VectorType(scalar.ity, ty.count), scalar.mant, scalar.bias,
                           f"v{ty.count}{scalar.suffix}", ty.count)
    return FMT64 if isinstance(ty, ir.DoubleType) else FMT32


def _exp_coeffs(degree: int) -> list[float]:
    return [1.0 / math.factorial(k) for k in range(degree + 1)]


def _tanh_coeffs(count: int) -> list[float]:
    """Odd Taylor coefficients of tanh (x, x^3, x^5, ...) from tanh' = 1 - tanh^2."""
    n = 2 * count
    a = [Fraction(0)] * (n + 1)
    a[1] = Fraction(1)
    for k in range(1, n):
        square = sum((a[i] * a[k - i] for i in range(k + 1)), Fraction(0))
        a[k + 1] = ((1 if k == 0 else 0) - square) / (k + 1)
    return [float(a[2 * j + 1]) for j in range(count)]


def _erf_coeffs(count: int) -> list[float]:
    scale = 2.0 / math.sqrt(math.pi)
    return [scale * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(count)]


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    """Get or declare an LLVM intrinsic such as "llvm.sqrt.f32"."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    return ir.Function(module, ir.FunctionType(ret, list(args)), name=name)


Body = Callable[["MathLib", ir.IRBuilder, list[ir.Value], FloatFormat], ir.Value]


def _bound(value: ir.Value) -> float | None:
    """The value of a float constant, or of a vector constant whose lanes are all one float
    (bit for bit); None for anything else."""
    if not isinstance(value, ir.Constant) or not isinstance(value.type, (ir.FloatType, ir.DoubleType, ir.VectorType)):
        return None
    payload = value.constant
    if isinstance(value.type, ir.VectorType):
        if not isinstance(value.type.element, (ir.FloatType, ir.DoubleType)):
            return None
        if payload is None:
            return 0.0
        # llvmlite holds a vector's lanes as element constants; a lane of None is +0.0
        lanes = [p.constant if isinstance(p, ir.Constant) else p for p in payload]
        lanes = [0.0 if v is None else v for v in lanes]
        if not lanes or any(not isinstance(v, float) for v in lanes):
            return None
        bits = {struct.pack("<d", v) for v in lanes}
        return lanes[0] if len(bits) == 1 else None
    if payload is None:
        return 0.0
    return payload if isinstance(payload, float) else None


def bounded_minmax(b: ir.IRBuilder, target: ArithTarget, kind: str, x: ir.Value, y: ir.Value) -> ir.Value | None:
    """llvm.maximum/minimum(x, y) ("max"/"min") where one operand is a non-NaN constant c,
    as a compare and select on a target where that is cheaper (select_bounded_minmax), bit
    for bit the same: NaN in the other operand v passes through, as an ordered compare
    with it is false. c != 0: max is `c > v ? c : v` (x86: one maxps c, v); max against
    +0.0 (a ReLU) `c >= v ? c : v`, so that -0.0 gives +0.0 as maximum does (a compare
    and an and). min mirrors it; None where this does not apply (max against -0.0, min
    against +0.0, no constant)."""
    if not target.select_bounded_minmax:
        return None
    for c, v in ((y, x), (x, y)):
        bound = _bound(c)
        if bound is None or math.isnan(bound):
            continue
        negative_zero = math.copysign(1.0, bound) < 0
        if bound != 0.0:
            direction = ">" if kind == "max" else "<"
        elif kind == "max" and not negative_zero:
            direction = ">="
        elif kind == "min" and negative_zero:
            direction = "<="
        else:
            continue
        return b.select(b.fcmp_ordered(direction, c, v), c, v, name=f"{kind}.bounded")
    return None

# Functions whose f32 version is the f64 body with the result rounded to f32 (an f32
# polynomial would not reach ~1 ulp). Narrower types (elemental.py) round the f64
# result once, straight to their own precision, instead of to f32 and again.
COMPUTED_IN_F64 = frozenset({"sin", "cos", "pow", "expm1", "log1p", "tan", "atan2"})


class MathLib:
    """Builds (once per module) and calls the math functions of one module."""

    def __init__(self, module: ir.Module, target: ArithTarget):
        self.module = module
        self.target = target

    # -- plumbing ------------------------------------------------------------
    def _function(self, name: str, ty: ir.Type, nargs: int, body: Body) -> ir.Function:
        fmt = float_format(ty)
        symbol = f"aot.{name}.{fmt.suffix}"
        existing = self.module.globals.get(symbol)
        if existing is not None:
            return existing
        fn = ir.Function(self.module, ir.FunctionType(ty, [ty] * nargs), name=symbol)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        builder.ret(body(self, builder, list(fn.args), fmt))
        return fn

    def _call(self, builder: ir.IRBuilder, name: str, args: Sequence[ir.Value], body: Body) -> ir.Value:
        """Call `name` on float args; the COMPUTED_IN_F64 ones compute f32 in f64."""
        ty = args[0].type
        if name in COMPUTED_IN_F64 and not isinstance(ty, ir.DoubleType):
            wide_args = [builder.fpext(a, F64) for a in args]
            result = builder.call(self._function(name, F64, len(args), body), wide_args, name=name)
            return builder.fptrunc(result, ty, name=f"{name}.f32")
        return builder.call(self._function(name, ty, len(args), body), list(args), name=name)

    def _intr(self, builder: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
        ty = args[0].type
        fmt = float_format(ty)
        fn = intrinsic(self.module, f"llvm.{name}.{fmt.suffix}", ty, [ty] * len(args))
        return builder.call(fn, list(args))

    # -- single-instruction helpers -------------------------------------------
    def fabs(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._intr(b, "fabs", x)

    def copysign(self, b: ir.IRBuilder, mag: ir.Value, sign: ir.Value) -> ir.Value:
        return self._intr(b, "copysign", mag, sign)

    def sqrt(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._intr(b, "sqrt", x)

    def maximum(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        """NaN-propagating max (llvm.maximum)."""
        return bounded_minmax(b, self.target, "max", x, y) or self._intr(b, "maximum", x, y)

    def minimum(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        return bounded_minmax(b, self.target, "min", x, y) or self._intr(b, "minimum", x, y)

    def floor(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        if self.target.native_rounding:
            return self._intr(b, "floor", x)
        return self._call(b, "floor", [x], _soft_floor)

    def ceil(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        if self.target.native_rounding:
            return self._intr(b, "ceil", x)
        return self._call(b, "ceil", [x], _soft_ceil)

    def roundeven(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        if self.target.native_rounding:
            return self._intr(b, "roundeven", x)
        return self._call(b, "roundeven", [x], _soft_roundeven)

    # -- transcendentals ---------------------------------------------------------
    def exp(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "exp", [x], _exp_body)

    def log(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "log", [x], _log_body)

    def tanh(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "tanh", [x], _tanh_body)

    def logistic(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "logistic", [x], _logistic_body)

    def erf(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        element = x.type.element if isinstance(x.type, ir.VectorType) else x.type
        if isinstance(element, ir.FloatType):
            # f32 (GELU's hot path): a rational approximation that vectorizes, not the f64 series
            return self._call(b, "erf_f32", [x], _erf_f32_body)
        return self._call(b, "erf", [x], _erf_body)

    def sin(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "sin", [x], _sin_body)

    def cos(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "cos", [x], _cos_body)

    def pow(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        return self._call(b, "pow", [x, y], _pow_body)

    def expm1(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "expm1", [x], _expm1_body)

    def log1p(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "log1p", [x], _log1p_body)

    def tan(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        return self._call(b, "tan", [x], _tan_body)

    def atan2(self, b: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
        return self._call(b, "atan2", [y, x], _atan2_body)

    def fmod(self, b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        """C fmod, exact (LLVM's frem would become a libm call)."""
        return self._call(b, "fmod", [x, y], _fmod_body)


# -- bodies: (lib, builder, args, format) -> result ------------------------------------


def _horner(b: ir.IRBuilder, x: ir.Value, coeffs: Sequence[float], fmt: FloatFormat) -> ir.Value:
    """coeffs[0] + x*(coeffs[1] + x*(...)).

    Each step may contract to one fused multiply-add where the target has FMA:
    half the latency of the dependent chain (the polynomial is most of an exp's
    or erf's cost, and LLVM does not always interleave enough loop iterations
    to hide it) and one rounding fewer.
    """
    acc: ir.Value = fmt.c(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = b.fadd(b.fmul(acc, x, flags=("contract",)), fmt.c(c), flags=("contract",))
    return acc


def _is_nan(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fcmp_unordered("uno", x, x, name="isnan")


def _round_magic(b: ir.IRBuilder, v: ir.Value, fmt: FloatFormat) -> ir.Value:
    """Round to nearest even for |v| < 2^(mant-1), with no libm call: (v + 1.5*2^mant) - 1.5*2^mant."""
    return _round_magic_to_int(b, v, fmt)[0]


def _round_magic_to_int(b: ir.IRBuilder, v: ir.Value, fmt: FloatFormat) -> tuple[ir.Value, ir.Value]:
    """(_round_magic(v), the same as an integer): v + magic holds the rounded value in its low
    mantissa bits, so the integer is a subtraction of bit patterns, not a conversion (a NaN
    v gives some integer, where fptosi would give poison)."""
    magic = fmt.c(1.5 * 2.0 ** fmt.mant)
    shifted = b.fadd(v, magic)
    return b.fsub(shifted, magic), b.sub(b.bitcast(shifted, fmt.ity), b.bitcast(magic, fmt.ity))


def _pow2(b: ir.IRBuilder, n: ir.Value, fmt: FloatFormat) -> ir.Value:
    """2^n for integer n within the normal exponent range, from exponent bits."""
    bits = b.shl(b.add(n, fmt.ci(fmt.bias)), fmt.ci(fmt.mant))
    return b.bitcast(bits, fmt.ty)


def _exp_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    if fmt.single:
        hi, lo, degree = 89.0, -104.0, 7
        ln2_hi, ln2_lo = 0.693145751953125, 1.428606765330187045e-06
    else:
        hi, lo, degree = 710.0, -746.0, 13
        ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    # Clamp: beyond these the result is inf / 0 anyway; keeps 2^n in range. NaN passes through.
    # Inputs below `lo` (softmax's masked -inf among them) compute exp(0) and select an exact 0
    # at the end: computing the underflow itself would go through subnormals, which cost a
    # microcode assist per element on x86.
    underflow = b.fcmp_ordered("<", x, fmt.c(lo))
    xc = b.select(b.fcmp_ordered(">", x, fmt.c(hi)), fmt.c(hi), x)
    xc = b.select(underflow, fmt.c(0.0), xc)
    # k = round(x / ln2), and n = k as an integer from its bits: a NaN x gives some n, and the
    # NaN p carries through the products, so no select for NaN (fptosi of a NaN is poison: it
    # took a select before it and one after, 5 of the ~28 instructions of a vector exp, where
    # softmaxes and SiLUs spend most of their time)
    k, n = _round_magic_to_int(b, b.fmul(xc, fmt.c(1.0 / math.log(2.0))), fmt)
    # (FMA-contractible: k * ln2_hi is exact either way, the ln2_lo term only gains)
    contract = ("contract",)
    r = b.fsub(b.fsub(xc, b.fmul(k, fmt.c(ln2_hi), flags=contract), flags=contract),
               b.fmul(k, fmt.c(ln2_lo), flags=contract), flags=contract)
    p = _horner(b, r, _exp_coeffs(degree), fmt)
    n1 = b.ashr(n, fmt.ci(1))
    n2 = b.sub(n, n1)
    # two steps so 2^n1 and 2^n2 are normal even when the result is subnormal or inf
    result = b.fmul(b.fmul(p, _pow2(b, n1, fmt)), _pow2(b, n2, fmt))
    return b.select(underflow, fmt.c(0.0), result)


def _log_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    terms = 6 if fmt.single else 12
    min_normal = 2.0 ** (1 - fmt.bias)
    scale_bits = fmt.mant + 1
    subnormal = b.fcmp_ordered("<", x, fmt.c(min_normal))
    xs = b.select(subnormal, b.fmul(x, fmt.c(2.0 ** scale_bits)), x)
    e_adjust = b.select(subnormal, fmt.ci(-scale_bits), fmt.ci(0))
    bits = b.bitcast(xs, fmt.ity)
    e = b.sub(b.lshr(bits, fmt.ci(fmt.mant)), fmt.ci(fmt.bias))
    e = b.add(e, e_adjust)
    mant_mask = (1 << fmt.mant) - 1
    m = b.bitcast(b.or_(b.and_(bits, fmt.ci(mant_mask)), fmt.ci(fmt.bias << fmt.mant)), fmt.ty)
    big = b.fcmp_ordered(">", m, fmt.c(math.sqrt(2.0)))
    m = b.select(big, b.fmul(m, fmt.c(0.5)), m)
    e = b.add(e, b.zext(big, fmt.ity))
    s = b.fdiv(b.fsub(m, fmt.c(1.0)), b.fadd(m, fmt.c(1.0)))
    s2 = b.fmul(s, s)
    log_m = b.fmul(s, _horner(b, s2, [2.0 / (2 * k + 1) for k in range(terms)], fmt))
    ef = b.sitofp(e, fmt.ty)
    ln2_hi, ln2_lo = (0.693145751953125, 1.428606765330187045e-06) if fmt.single else (6.93147180369123816490e-01, 1.90821492927058770002e-10)
    result = b.fadd(b.fmul(ef, fmt.c(ln2_hi)), b.fadd(log_m, b.fmul(ef, fmt.c(ln2_lo))))
    result = b.select(b.fcmp_ordered("==", x, fmt.c(math.inf)), fmt.c(math.inf), result)
    result = b.select(b.fcmp_ordered("==", x, fmt.c(0.0)), fmt.c(-math.inf), result)
    return b.select(b.fcmp_unordered("<", x, fmt.c(0.0)), fmt.c(math.nan), result)


def _tanh_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    saturate, terms = (9.0, 9) if fmt.single else (20.0, 17)
    a = lib.fabs(b, x)
    # small |x|: odd Taylor series (no cancellation); large: 1 - 2/(exp(2|x|)+1)
    x2 = b.fmul(x, x)
    small = b.fmul(x, _horner(b, x2, _tanh_coeffs(terms), fmt))
    ac = b.select(b.fcmp_ordered(">", a, fmt.c(saturate)), fmt.c(saturate), a)
    e = lib.exp(b, b.fmul(ac, fmt.c(2.0)))
    large = b.fsub(fmt.c(1.0), b.fdiv(fmt.c(2.0), b.fadd(e, fmt.c(1.0))))
    large = b.select(b.fcmp_ordered(">", a, fmt.c(saturate)), fmt.c(1.0), large)
    large = lib.copysign(b, large, x)
    return b.select(b.fcmp_ordered("<", a, fmt.c(0.5)), small, large)


def _logistic_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    # e = exp(-|x|) never overflows: x >= 0 -> 1/(1+e), x < 0 -> e/(1+e)
    e = lib.exp(b, b.fneg(lib.fabs(b, x)))
    r = b.fdiv(fmt.c(1.0), b.fadd(fmt.c(1.0), e))
    return b.select(b.fcmp_ordered(">=", x, fmt.c(0.0)), r, b.fmul(e, r))


def _erf_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """f64: Taylor series for |x| < 2, continued fraction of erfc beyond (rel. error ~1e-15)."""
    (x,) = args
    taylor_terms, cf_terms = 30, 60
    a = lib.fabs(b, x)
    x2 = b.fmul(x, x)
    near = b.fmul(x, _horner(b, x2, _erf_coeffs(taylor_terms), fmt))
    # erfc(a) = exp(-a^2) / (sqrt(pi) * K), K = a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))
    af = b.select(b.fcmp_ordered("<", a, fmt.c(2.0)), fmt.c(2.0), a)
    af = b.select(b.fcmp_ordered(">", af, fmt.c(7.0)), fmt.c(7.0), af)
    k: ir.Value = af
    for n in reversed(range(1, cf_terms + 1)):
        k = b.fadd(af, b.fdiv(fmt.c(n / 2.0), k))
    e = lib.exp(b, b.fneg(b.fmul(af, af)))
    erfc = b.fdiv(e, b.fmul(k, fmt.c(math.sqrt(math.pi))))
    far = lib.copysign(b, b.fsub(fmt.c(1.0), erfc), x)
    result = b.select(b.fcmp_ordered("<", a, fmt.c(2.0)), near, far)
    return b.select(_is_nan(b, x), x, result)


# erf(x) ~ x * P(x^2) / Q(x^2) on [-4, 4] (the f32 approximation of Eigen and XLA);
# beyond 4, erf is +-1 in f32. Absolute error <= 4.5e-7 (<= 8 ulp near |erf| -> 1).
_ERF_F32_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
              -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_ERF_F32_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
              -1.42647390514189e-02)


def _erf_f32_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    clamped = b.select(b.fcmp_ordered(">", x, fmt.c(4.0)), fmt.c(4.0), x)
    clamped = b.select(b.fcmp_ordered("<", clamped, fmt.c(-4.0)), fmt.c(-4.0), clamped)
    x2 = b.fmul(clamped, clamped)
    p = fmt.c(_ERF_F32_P[0])
    for c in _ERF_F32_P[1:]:
        p = b.fadd(b.fmul(p, x2), fmt.c(c))
    q = fmt.c(_ERF_F32_Q[0])
    for c in _ERF_F32_Q[1:]:
        q = b.fadd(b.fmul(q, x2), fmt.c(c))
    # a NaN x passes both clamps (ordered compares are false) and the ratio: no select for it
    return b.fdiv(b.fmul(clamped, p), q)


_TRIG_LIMIT = 2.0 ** 20
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)


def _quadrant_reduce(lib: MathLib, b: ir.IRBuilder, x: ir.Value, fmt: FloatFormat) -> tuple[ir.Value, ir.Value]:
    """r = x - q*pi/2 (Cody-Waite, three parts), q mod 4 as an integer."""
    q = _round_magic(b, b.fmul(x, fmt.c(2.0 / math.pi)), fmt)
    r = x
    for part in _PIO2:
        r = b.fsub(r, b.fmul(q, fmt.c(part)))
    q_safe = b.select(b.fcmp_ordered("<", lib.fabs(b, q), fmt.c(2.0 ** 52)), q, fmt.c(0.0))
    quadrant = b.and_(b.fptosi(q_safe, fmt.ity), fmt.ci(3))
    return r, quadrant


def _sin_cos_poly(b: ir.IRBuilder, r: ir.Value, fmt: FloatFormat) -> tuple[ir.Value, ir.Value]:
    r2 = b.fmul(r, r)
    sin_c = [(-1) ** k / math.factorial(2 * k + 1) for k in range(10)]
    cos_c = [(-1) ** k / math.factorial(2 * k) for k in range(11)]
    return b.fmul(r, _horner(b, r2, sin_c, fmt)), _horner(b, r2, cos_c, fmt)


def _pick_quadrant(b: ir.IRBuilder, quadrant: ir.Value, options: Sequence[ir.Value], fmt: FloatFormat) -> ir.Value:
    result = options[0]
    for q in range(1, 4):
        result = b.select(b.icmp_signed("==", quadrant, fmt.ci(q)), options[q], result)
    return result


def _sin_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    r, quadrant = _quadrant_reduce(lib, b, x, fmt)
    s, c = _sin_cos_poly(b, r, fmt)
    return _outside_range_nan(lib, b, x, _pick_quadrant(b, quadrant, [s, c, b.fneg(s), b.fneg(c)], fmt), fmt)


def _outside_range_nan(lib: MathLib, b: ir.IRBuilder, x: ir.Value, result: ir.Value, fmt: FloatFormat) -> ir.Value:
    """Cody-Waite reduction is exact only for |x| < 2^20; beyond it, NaN rather than a wrong value.

    (Payne-Hanek reduction would be needed there; no model we know feeds such angles.)
    """
    ok = b.fcmp_ordered("<", lib.fabs(b, x), fmt.c(_TRIG_LIMIT))
    return b.select(ok, result, fmt.c(math.nan))


def _cos_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    r, quadrant = _quadrant_reduce(lib, b, x, fmt)
    s, c = _sin_cos_poly(b, r, fmt)
    return _outside_range_nan(lib, b, x, _pick_quadrant(b, quadrant, [c, b.fneg(s), b.fneg(c), s], fmt), fmt)


def _pow_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """IEEE pow: exp(y*log|x|) with the sign of a negative base fixed for integer y."""
    x, y = args
    ax = lib.fabs(b, x)
    magnitude = lib.exp(b, b.fmul(y, lib.log(b, ax)))
    y_int = b.fcmp_ordered("==", _floor_exact(lib, b, y, fmt), y)
    half = b.fmul(y, fmt.c(0.5))
    y_odd = b.and_(y_int, b.fcmp_ordered("!=", _floor_exact(lib, b, half, fmt), half))
    negative = b.fcmp_ordered("<", x, fmt.c(0.0))
    neg_zero_odd = b.and_(b.fcmp_ordered("==", x, fmt.c(0.0)), y_odd)
    signed = b.select(y_odd, lib.copysign(b, magnitude, x), magnitude)
    finite = b.fcmp_ordered("<", ax, fmt.c(math.inf))
    # a negative finite base to a non-integer power has no real value; (-inf)^y is |x|^y
    result = b.select(b.and_(b.and_(negative, finite), b.not_(y_int)), fmt.c(math.nan), signed)
    result = b.select(neg_zero_odd, lib.copysign(b, magnitude, x), result)
    unit = b.or_(b.fcmp_ordered("==", x, fmt.c(1.0)), b.fcmp_ordered("==", y, fmt.c(0.0)))
    unit = b.or_(unit, b.and_(b.fcmp_ordered("==", ax, fmt.c(1.0)), b.fcmp_ordered("==", lib.fabs(b, y), fmt.c(math.inf))))
    return b.select(unit, fmt.c(1.0), result)


def _expm1_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """x = k ln2 + r, |r| <= ln2/2; expm1(r) by its series; then 2^k (expm1(r) + 1) - 1 arranged
    so no step cancels: k = 0 gives expm1(r) itself (exact for tiny x)."""
    (x,) = args
    xc = b.select(b.fcmp_ordered(">", x, fmt.c(710.0)), fmt.c(710.0), x)
    xc = b.select(b.fcmp_ordered("<", xc, fmt.c(-60.0)), fmt.c(-60.0), xc)
    ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    k = _round_magic(b, b.fmul(xc, fmt.c(1.0 / math.log(2.0))), fmt)
    r = b.fsub(b.fsub(xc, b.fmul(k, fmt.c(ln2_hi))), b.fmul(k, fmt.c(ln2_lo)))
    # expm1(r) = r * (1 + r/2 + r^2/6 + ...): the leading r keeps -0.0 and tiny r exact
    em = b.fmul(r, _horner(b, r, [1.0 / math.factorial(n + 1) for n in range(17)], fmt))
    n = b.fptosi(b.select(_is_nan(b, k), fmt.c(0.0), k), fmt.ity)
    n1 = b.ashr(n, fmt.ci(1))
    scale = (_pow2(b, n1, fmt), _pow2(b, b.sub(n, n1), fmt))  # 2^k in two normal factors

    def scaled(v: ir.Value) -> ir.Value:
        return b.fmul(b.fmul(v, scale[0]), scale[1])

    one = fmt.c(1.0)
    # 1 <= k <= 52: 2^k (em + (1 - 2^-k)), 1 - 2^-k exact; k < 0 or k > 52: 2^k (em + 1) - 1
    mid = scaled(b.fadd(em, b.fsub(one, _pow2_negative(b, n, fmt))))
    other = b.fsub(scaled(b.fadd(em, one)), one)
    in_mid = b.and_(b.icmp_signed(">=", n, fmt.ci(1)), b.icmp_signed("<=", n, fmt.ci(52)))
    result = b.select(in_mid, mid, other)
    result = b.select(b.icmp_signed("==", n, fmt.ci(0)), em, result)
    return b.select(_is_nan(b, x), x, result)


def _pow2_negative(b: ir.IRBuilder, n: ir.Value, fmt: FloatFormat) -> ir.Value:
    """2^-n for 1 <= n <= 52 (other n give some normal power of two, unused by callers)."""
    clamped = b.select(b.icmp_signed("<", n, fmt.ci(1)), fmt.ci(1), n)
    clamped = b.select(b.icmp_signed(">", clamped, fmt.ci(60)), fmt.ci(60), clamped)
    return _pow2(b, b.sub(fmt.ci(0), clamped), fmt)


def _log1p_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """Kahan's trick: u = 1 + x; log1p(x) = x * log(u) / (u - 1), which cancels u's rounding error."""
    (x,) = args
    u = b.fadd(fmt.c(1.0), x)
    corrected = b.fmul(lib.log(b, u), b.fdiv(x, b.fsub(u, fmt.c(1.0))))
    result = b.select(b.fcmp_ordered("==", u, fmt.c(1.0)), x, corrected)
    result = b.select(b.fcmp_ordered("==", x, fmt.c(-1.0)), fmt.c(-math.inf), result)
    return b.select(b.fcmp_ordered("==", x, fmt.c(math.inf)), x, result)


def _tan_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    r, quadrant = _quadrant_reduce(lib, b, x, fmt)
    s, c = _sin_cos_poly(b, r, fmt)
    odd = b.trunc(quadrant, ir.IntType(1))
    # even quadrant: sin/cos; odd: -cos/sin
    result = b.select(odd, b.fdiv(b.fneg(c), s), b.fdiv(s, c))
    return _outside_range_nan(lib, b, x, result, fmt)


_ATAN_TERMS = 24  # |u| <= tan(pi/8): u^(2n+1)/(2n+1) < 2^-55 by n = 24
_PI = (3.14159265358979311600e+00, 1.22464679914735317723e-16)


def _atan_reduced(lib: MathLib, b: ir.IRBuilder, t: ir.Value, fmt: FloatFormat) -> ir.Value:
    """atan(t) for 0 <= t <= 1: pi/4 + atan((t-1)/(t+1)) above tan(pi/8), then the odd series."""
    big = b.fcmp_ordered(">", t, fmt.c(math.sqrt(2.0) - 1.0))
    u = b.select(big, b.fdiv(b.fsub(t, fmt.c(1.0)), b.fadd(t, fmt.c(1.0))), t)
    u2 = b.fmul(u, u)
    series = b.fmul(u, _horner(b, u2, [(-1) ** n / (2 * n + 1) for n in range(_ATAN_TERMS)], fmt))
    quarter = b.fadd(fmt.c(_PI[0] / 4), b.fadd(series, fmt.c(_PI[1] / 4)))
    return b.select(big, quarter, series)


def _atan2_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """atan2(y, x) from atan(min/max) of the magnitudes (no overflow), then the octant fix-ups."""
    y, x = args
    ay, ax = lib.fabs(b, y), lib.fabs(b, x)
    swap = b.fcmp_ordered(">", ay, ax)
    hi = b.select(swap, ay, ax)
    lo = b.select(swap, ax, ay)
    t = b.fdiv(lo, hi)
    t = b.select(b.fcmp_ordered("==", hi, fmt.c(0.0)), fmt.c(0.0), t)  # atan2(+-0, +-0)
    both_inf = b.and_(b.fcmp_ordered("==", ay, fmt.c(math.inf)), b.fcmp_ordered("==", ax, fmt.c(math.inf)))
    t = b.select(both_inf, fmt.c(1.0), t)
    angle = _atan_reduced(lib, b, t, fmt)
    angle = b.select(swap, b.fadd(b.fsub(fmt.c(_PI[0] / 2), angle), fmt.c(_PI[1] / 2)), angle)
    x_negative = b.icmp_signed("<", b.bitcast(x, fmt.ity), fmt.ci(0))  # sign bit: -0.0 counts
    angle = b.select(x_negative, b.fadd(b.fsub(fmt.c(_PI[0]), angle), fmt.c(_PI[1])), angle)
    result = lib.copysign(b, angle, y)
    return b.select(b.or_(_is_nan(b, x), _is_nan(b, y)), fmt.c(math.nan), result)


def _fmod_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """Exact fmod: the significands' remainder by integer long division, a few exponent bits a step.

    With |x| = mx 2^ex and |y| = my 2^ey (my < 2^(mant+1)), r = mx mod my, then
    for each step of s <= 63 - (mant+1) bits: r = (r << s) mod my. The result
    r 2^ey is exact, its sign the dividend's.
    """
    x, y = args
    i64 = ir.IntType(64)
    width = fmt.mant + 1
    step = 63 - width
    ax, ay = lib.fabs(b, x), lib.fabs(b, y)

    def split(v: ir.Value) -> tuple[ir.Value, ir.Value]:
        bits = b.bitcast(v, fmt.ity)
        field = b.lshr(bits, fmt.ci(fmt.mant))
        mant = b.and_(bits, fmt.ci((1 << fmt.mant) - 1))
        normal = b.icmp_unsigned("!=", field, fmt.ci(0))
        significand = b.select(normal, b.or_(mant, fmt.ci(1 << fmt.mant)), mant)
        exponent = b.select(normal, field, fmt.ci(1))  # subnormals: exponent 1, no implicit bit
        if fmt.ity.width == 64:
            return significand, exponent
        return b.zext(significand, i64), b.zext(exponent, i64)  # both non-negative

    mx, ex = split(ax)
    my, ey = split(ay)
    special = b.or_(b.or_(_is_nan(b, x), _is_nan(b, y)), b.fcmp_ordered("==", ay, fmt.c(0.0)))
    special = b.or_(special, b.fcmp_ordered("==", ax, fmt.c(math.inf)))
    passthrough = b.fcmp_ordered("<", ax, ay)  # also y = inf with x finite, and x = 0
    my_safe = b.select(b.icmp_unsigned("==", my, i64(0)), i64(1), my)
    fn = b.function
    start = b.block
    head = fn.append_basic_block("fmod.head")
    body = fn.append_basic_block("fmod.body")
    done = fn.append_basic_block("fmod.done")
    r0 = b.urem(mx, my_safe)
    gap0 = b.sub(ex, ey)
    gap0 = b.select(b.or_(special, passthrough), i64(0), gap0)  # no loop for the early answers
    b.branch(head)
    b.position_at_end(head)
    r = b.phi(i64, name="fmod.r")
    gap = b.phi(i64, name="fmod.gap")
    r.add_incoming(r0, start)
    gap.add_incoming(gap0, start)
    b.cbranch(b.icmp_signed(">", gap, i64(0)), body, done)
    b.position_at_end(body)
    shift = b.select(b.icmp_signed(">", gap, i64(step)), i64(step), gap)
    r_next = b.urem(b.shl(r, shift), my_safe)
    r.add_incoming(r_next, body)
    gap.add_incoming(b.sub(gap, shift), body)
    b.branch(head)
    b.position_at_end(done)
    # r 2^(ey - bias - mant), in two normal power-of-two factors (the product is exact)
    value = b.sitofp(r, fmt.ty)
    e = b.sub(ey, i64(fmt.bias + fmt.mant))
    e = b.trunc(e, fmt.ity) if fmt.ity.width < 64 else e
    e1 = b.ashr(e, fmt.ci(1))
    value = b.fmul(b.fmul(value, _pow2(b, e1, fmt)), _pow2(b, b.sub(e, e1), fmt))
    result = lib.copysign(b, value, x)
    result = b.select(passthrough, x, result)
    return b.select(special, fmt.c(math.nan), result)


def _floor_exact(lib: MathLib, b: ir.IRBuilder, x: ir.Value, fmt: FloatFormat) -> ir.Value:
    """floor(x) without libm: exact for every finite x (|x| >= 2^mant is already integral)."""
    return _soft_floor(lib, b, [x], fmt)


def _truncate(lib: MathLib, b: ir.IRBuilder, x: ir.Value, fmt: FloatFormat) -> tuple[ir.Value, ir.Value]:
    """(trunc(x) for |x| < 2^mant else 0, whether |x| < 2^mant)."""
    in_range = b.fcmp_ordered("<", lib.fabs(b, x), fmt.c(2.0 ** fmt.mant))
    safe = b.select(in_range, x, fmt.c(0.0))
    return b.sitofp(b.fptosi(safe, fmt.ity), fmt.ty), in_range


def _soft_floor(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    t, in_range = _truncate(lib, b, x, fmt)
    t = b.fsub(t, b.select(b.fcmp_ordered(">", t, x), fmt.c(1.0), fmt.c(0.0)))
    return b.select(in_range, lib.copysign(b, t, x), x)


def _soft_ceil(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    t, in_range = _truncate(lib, b, x, fmt)
    t = b.fadd(t, b.select(b.fcmp_ordered("<", t, x), fmt.c(1.0), fmt.c(0.0)))
    return b.select(in_range, lib.copysign(b, t, x), x)


def _soft_roundeven(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    (x,) = args
    a = lib.fabs(b, x)
    magic = fmt.c(2.0 ** fmt.mant)
    rounded = b.fsub(b.fadd(a, magic), magic)
    in_range = b.fcmp_ordered("<", a, magic)
    return b.select(in_range, lib.copysign(b, rounded, x), x)


# -- half-precision conversions (bit manipulation, no libgcc) ------------------------------
I16 = ir.IntType(16)


def _f16_to_f32_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """IEEE half bits (in the low 16 bits of an f32-typed argument's int view) -> f32 (F. Giesen's method)."""
    (packed,) = args
    h = b.bitcast(packed, I32)
    o = b.shl(b.and_(h, I32(0x7FFF)), I32(13))
    exp = b.and_(o, I32(0x7C00 << 13))
    o = b.add(o, I32((127 - 15) << 23))
    inf_nan = b.icmp_unsigned("==", exp, I32(0x7C00 << 13))
    o_special = b.add(o, I32((128 - 16) << 23))
    zero_sub = b.icmp_unsigned("==", exp, I32(0))
    # subnormal/zero: renormalize with one float subtraction
    renorm = b.fsub(b.bitcast(b.add(o, I32(1 << 23)), F32), constant(F32, 2.0 ** -14))
    o = b.select(inf_nan, o_special, o)
    o = b.select(zero_sub, b.bitcast(renorm, I32), o)
    o = b.or_(o, b.shl(b.and_(h, I32(0x8000)), I32(16)))
    return b.bitcast(o, F32)


def _f32_to_f16_body(lib: MathLib, b: ir.IRBuilder, args: list[ir.Value], fmt: FloatFormat) -> ir.Value:
    """f32 -> IEEE half bits with round-to-nearest-even, returned in the low bits of an f32-typed value."""
    (x,) = args
    f = b.bitcast(x, I32)
    sign = b.and_(f, I32(0x80000000))
    f = b.xor(f, sign)
    f32_inf = 255 << 23
    f16_max = (127 + 16) << 23
    denorm_magic = ((127 - 15) + (23 - 10) + 1) << 23
    special = b.select(b.icmp_unsigned(">", f, I32(f32_inf)), I32(0x7E00), I32(0x7C00))
    denorm_sum = b.fadd(b.bitcast(f, F32), b.bitcast(I32(denorm_magic), F32))
    denorm = b.sub(b.bitcast(denorm_sum, I32), I32(denorm_magic))
    mant_odd = b.and_(b.lshr(f, I32(13)), I32(1))
    normal = b.add(b.add(f, I32(((15 - 127) << 23) + 0xFFF)), mant_odd)
    normal = b.lshr(normal, I32(13))
    o = b.select(b.icmp_unsigned("<", f, I32(113 << 23)), denorm, normal)
    o = b.select(b.icmp_unsigned(">=", f, I32(f16_max)), special, o)
    o = b.or_(o, b.lshr(sign, I32(16)))
    return b.bitcast(o, F32)


def f16_bits_to_f32(lib: MathLib, b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    packed = b.bitcast(b.zext(bits, I32), F32)
    return b.call(lib._function("f16_to_f32", F32, 1, _f16_to_f32_body), [packed], name="f16.ext")


def f32_to_f16_bits(lib: MathLib, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    packed = b.call(lib._function("f32_to_f16", F32, 1, _f32_to_f16_body), [x], name="f16.trunc")
    return b.trunc(b.bitcast(packed, I32), I16)


def bf16_bits_to_f32(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(bits, I32), I32(16)), F32, name="bf16.ext")


def f32_to_bf16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Round to nearest even; NaN stays NaN (quieted)."""
    f = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(f, I32(16)), I32(1))
    rounded = b.lshr(b.add(f, b.add(I32(0x7FFF), lsb)), I32(16))
    quiet_nan = b.or_(b.lshr(f, I32(16)), I32(0x40))
    is_nan = b.fcmp_unordered("uno", x, x)
    return b.trunc(b.select(is_nan, quiet_nan, rounded), I16, name="bf16.trunc")


def f64_to_f32_odd(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """f64 -> f32 rounded to odd, so a second rounding to a narrower type is correctly rounded."""
    t = b.fptrunc(x, F32)
    back = b.fpext(t, F64)
    ax = b.call(intrinsic(b.module, "llvm.fabs.f64", F64, [F64]), [x])
    aback = b.call(intrinsic(b.module, "llvm.fabs.f64", F64, [F64]), [back])
    bits = b.bitcast(t, I32)
    # rounded away from zero: step one ulp back toward zero (finite results only)
    finite = b.fcmp_ordered("<", b.call(intrinsic(b.module, "llvm.fabs.f32", F32, [F32]), [t]), constant(F32, math.inf))
    toward_zero = b.select(b.and_(finite, b.fcmp_ordered(">", aback, ax)), b.sub(bits, I32(1)), bits)
    inexact = b.fcmp_ordered("!=", back, x)
    odd = b.select(b.and_(finite, inexact), b.or_(toward_zero, I32(1)), toward_zero)
    return b.bitcast(odd, F32)
