"""Elementwise arithmetic for decompositions: `Num` wraps a Value so formulas read as formulas.

    x = Num(cx, value)
    y = (x * x + 1.0).sqrt()        # mul, add (1.0 as a constant of x's type), sqrt
    z = x.lt(0.5).where(-x, y)      # compare, select

Every operation emits one primitive op through `Ctx.op` (so constant operands
fold at import); a Python number becomes a constant of the other operand's
type, rounded from the double as MLIR's getConstantLike rounds it. Operands of
one expression share one type: nothing here broadcasts.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aot.ir import DType, Value
from aot.ir.types import TensorType

from .context import Ctx


@dataclass(frozen=True)
class Num:
    cx: Ctx
    v: Value

    @property
    def type(self) -> TensorType:
        return self.v.type

    @property
    def dtype(self) -> DType:
        return self.v.type.dtype

    # -- building blocks ------------------------------------------------------------
    def like(self, value: float | int | bool) -> Num:
        """A constant of this value's type (a splat of `value`)."""
        return Num(self.cx, self.cx.full(value, self.v.type))

    def _value(self, other: Num | float | int) -> Value:
        return other.v if isinstance(other, Num) else self.cx.full(other, self.v.type)

    def _unary(self, op: str) -> Num:
        return Num(self.cx, self.cx.op(op, [self.v]))

    def _binary(self, op: str, other: Num | float | int, swap: bool = False) -> Num:
        a, b = self.v, self._value(other)
        return Num(self.cx, self.cx.op(op, [b, a] if swap else [a, b]))

    def _compare(self, direction: str, other: Num | float | int) -> Num:
        return Num(self.cx, self.cx.op("compare", [self.v, self._value(other)], direction=direction))

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, other: Num | float | int) -> Num:
        return self._binary("add", other)

    def __radd__(self, other: float | int) -> Num:
        return self._binary("add", other, swap=True)

    def __sub__(self, other: Num | float | int) -> Num:
        return self._binary("sub", other)

    def __rsub__(self, other: float | int) -> Num:
        return self._binary("sub", other, swap=True)

    def __mul__(self, other: Num | float | int) -> Num:
        return self._binary("mul", other)

    def __rmul__(self, other: float | int) -> Num:
        return self._binary("mul", other, swap=True)

    def __truediv__(self, other: Num | float | int) -> Num:
        return self._binary("div", other)

    def __rtruediv__(self, other: float | int) -> Num:
        return self._binary("div", other, swap=True)

    def __neg__(self) -> Num:
        return self._unary("neg")

    def __and__(self, other: Num) -> Num:
        return self._binary("and", other)

    def __or__(self, other: Num) -> Num:
        return self._binary("or", other)

    def __invert__(self) -> Num:
        return self._unary("not")

    def pow(self, other: Num | float | int) -> Num:
        return self._binary("pow", other)

    def rem(self, other: Num | float | int) -> Num:
        return self._binary("rem", other)

    def atan2(self, other: Num | float | int) -> Num:
        """atan2(self, other): the angle of the point (other, self)."""
        return self._binary("atan2", other)

    # -- functions --------------------------------------------------------------------------
    def abs(self) -> Num:
        return self._unary("abs")

    def sign(self) -> Num:
        return self._unary("sign")

    def floor(self) -> Num:
        return self._unary("floor")

    def sqrt(self) -> Num:
        return self._unary("sqrt")

    def exp(self) -> Num:
        return self._unary("exp")

    def expm1(self) -> Num:
        return self._unary("expm1")

    def log(self) -> Num:
        return self._unary("log")

    def log1p(self) -> Num:
        return self._unary("log1p")

    def sin(self) -> Num:
        return self._unary("sin")

    def cos(self) -> Num:
        return self._unary("cos")

    def is_finite(self) -> Num:
        return self._unary("is_finite")

    def convert(self, dtype: DType) -> Num:
        return Num(self.cx, self.cx.convert(self.v, dtype))

    # -- comparisons (results are i1) and selection ---------------------------------------------
    def eq(self, other: Num | float | int) -> Num:
        return self._compare("eq", other)

    def ne(self, other: Num | float | int) -> Num:
        return self._compare("ne", other)

    def lt(self, other: Num | float | int) -> Num:
        return self._compare("lt", other)

    def le(self, other: Num | float | int) -> Num:
        return self._compare("le", other)

    def gt(self, other: Num | float | int) -> Num:
        return self._compare("gt", other)

    def ge(self, other: Num | float | int) -> Num:
        return self._compare("ge", other)

    def where(self, on_true: Num | float | int, on_false: Num | float | int) -> Num:
        """select(self, on_true, on_false); self is the i1 predicate, a number takes the other's type."""
        if not isinstance(on_true, Num) and not isinstance(on_false, Num):
            raise TypeError("where needs at least one Num branch to take its type from")
        typed = on_true if isinstance(on_true, Num) else on_false
        assert isinstance(typed, Num)
        t, f = typed._value(on_true), typed._value(on_false)
        return Num(self.cx, self.cx.op("select", [self.v, t, f]))


def horner(x: Num, coefficients: Sequence[float]) -> Num:
    """c[0] * x^(n-1) + ... + c[n-1], highest degree first, evaluated as CHLO does (mul then add)."""
    poly = x.like(coefficients[0])
    for c in coefficients[1:]:
        poly = poly * x + c
    return poly


def finfo(dtype: DType) -> Any:
    """Float limits of a dtype, bfloat16 included (ml_dtypes' finfo covers numpy's types too)."""
    import ml_dtypes  # ships with onnx, as aot.ir.types relies on

    return ml_dtypes.finfo(dtype.to_numpy())


__all__ = ["Num", "horner", "finfo"]
