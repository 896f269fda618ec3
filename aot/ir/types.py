"""Element types and static tensor types of the IR."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from aot.errors import IRError


class DType(enum.Enum):
    """Element type. The value is the short name used in IR text."""

    F16 = "f16"
    BF16 = "bf16"
    F32 = "f32"
    F64 = "f64"
    I8 = "i8"
    I16 = "i16"
    I32 = "i32"
    I64 = "i64"
    U8 = "u8"
    BOOL = "i1"
    U16 = "u16"
    U32 = "u32"
    U64 = "u64"
    # float8 (OCP FP8 and the "fnuz" variants of ONNX): one byte in memory, f32 in registers
    F8E4M3FN = "f8e4m3fn"
    F8E4M3FNUZ = "f8e4m3fnuz"
    F8E5M2 = "f8e5m2"
    F8E5M2FNUZ = "f8e5m2fnuz"

    @property
    def is_float(self) -> bool:
        return self in FLOAT_DTYPES

    @property
    def is_int(self) -> bool:
        return self in INT_DTYPES

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def manifest_name(self) -> str:
        """Name used in the artifact manifest and the C runtime (numpy-style)."""
        return _MANIFEST_NAME[self]

    @property
    def is_narrow_float(self) -> bool:
        """Stored in fewer bits than f32 and computed in f32 (f16, bf16, float8)."""
        return self in NARROW_FLOAT_DTYPES

    @property
    def is_float8(self) -> bool:
        return self in FLOAT8_DTYPES

    def to_numpy(self) -> np.dtype:
        name = _ML_DTYPES_NAME.get(self)
        if name is not None:
            import ml_dtypes  # ships with onnx; numpy has no bfloat16 or float8

            return np.dtype(getattr(ml_dtypes, name))
        return np.dtype(_NUMPY_NAME[self])

    @staticmethod
    def from_numpy(dtype: np.dtype | type) -> DType:
        dt = np.dtype(dtype)
        for member, name in _ML_DTYPES_NAME.items():
            if dt.name == name:
                return member
        for member, name in _NUMPY_NAME.items():
            if dt == np.dtype(name):
                return member
        raise IRError(f"no IR dtype for numpy dtype {dt}")

    @staticmethod
    def parse(text: str) -> DType:
        try:
            return DType(text)
        except ValueError:
            raise IRError(f"unknown dtype '{text}'") from None


FLOAT8_DTYPES = frozenset({DType.F8E4M3FN, DType.F8E4M3FNUZ, DType.F8E5M2, DType.F8E5M2FNUZ})
NARROW_FLOAT_DTYPES = frozenset({DType.F16, DType.BF16}) | FLOAT8_DTYPES
FLOAT_DTYPES = frozenset({DType.F16, DType.BF16, DType.F32, DType.F64}) | FLOAT8_DTYPES
INT_DTYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U16, DType.U32, DType.U64})
SIGNED_DTYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64})
UNSIGNED_DTYPES = INT_DTYPES - SIGNED_DTYPES

_ITEMSIZE = {
    DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8, DType.I8: 1, DType.I16: 2,
    DType.I32: 4, DType.I64: 8, DType.U8: 1, DType.BOOL: 1, DType.U16: 2, DType.U32: 4, DType.U64: 8,
    DType.F8E4M3FN: 1, DType.F8E4M3FNUZ: 1, DType.F8E5M2: 1, DType.F8E5M2FNUZ: 1,
}
_NUMPY_NAME = {
    DType.F16: "float16", DType.F32: "float32", DType.F64: "float64", DType.I8: "int8",
    DType.I16: "int16", DType.I32: "int32", DType.I64: "int64", DType.U8: "uint8", DType.BOOL: "bool",
    DType.U16: "uint16", DType.U32: "uint32", DType.U64: "uint64",
}
# numpy has no such types; ml_dtypes (a dependency of onnx) does, under these names
_ML_DTYPES_NAME = {
    DType.BF16: "bfloat16", DType.F8E4M3FN: "float8_e4m3fn", DType.F8E4M3FNUZ: "float8_e4m3fnuz",
    DType.F8E5M2: "float8_e5m2", DType.F8E5M2FNUZ: "float8_e5m2fnuz",
}
# manifest / C runtime names: numpy's, and ml_dtypes' without the underscore for float8
_MANIFEST_NAME = {
    **_NUMPY_NAME, DType.BF16: "bfloat16", DType.F8E4M3FN: "float8e4m3fn", DType.F8E4M3FNUZ: "float8e4m3fnuz",
    DType.F8E5M2: "float8e5m2", DType.F8E5M2FNUZ: "float8e5m2fnuz",
}


@dataclass(frozen=True)
class Float8Format:
    """Layout and special values of one float8 type (sign, `exponent` bits, `mantissa` bits)."""

    dtype: DType
    exponent: int
    mantissa: int
    bias: int
    max_code: int  # magnitude bits of the largest finite value
    nan_code: int  # the NaN written (fnuz: 0x80, the only NaN; its sign bit is the NaN)
    inf_code: int | None  # magnitude bits of infinity (e5m2 only)
    fnuz: bool  # no negative zero: -0 is written as 0

    def overflow_threshold(self) -> tuple[float, bool]:
        """(t, inclusive): a finite |x| rounds past the largest finite value iff |x| > t (>= t when inclusive).
        t is the midpoint above the largest value; a tie goes to the even neighbour."""
        largest = float(np.uint8(self.max_code).view(self.dtype.to_numpy()))
        ulp = 2.0 ** (math.floor(math.log2(largest)) - self.mantissa)
        return largest + ulp / 2, bool(self.max_code & 1)


FLOAT8_FORMATS: dict[DType, Float8Format] = {
    DType.F8E4M3FN: Float8Format(DType.F8E4M3FN, 4, 3, 7, 0x7E, 0x7F, None, False),
    DType.F8E4M3FNUZ: Float8Format(DType.F8E4M3FNUZ, 4, 3, 8, 0x7F, 0x80, None, True),
    DType.F8E5M2: Float8Format(DType.F8E5M2, 5, 2, 15, 0x7B, 0x7E, 0x7C, False),
    DType.F8E5M2FNUZ: Float8Format(DType.F8E5M2FNUZ, 5, 2, 16, 0x7F, 0x80, None, True),
}


def numpy_is_float(dtype: np.dtype) -> bool:
    """A float numpy dtype, ml_dtypes' bfloat16 and float8 types included (their kind is not always 'f')."""
    return dtype.kind == "f" or dtype.name in _ML_DTYPES_NAME.values()


def float8_saturate(x: np.ndarray, dtype: DType) -> np.ndarray:
    """x (a float array) in float8 `dtype` as ONNX Cast with saturate=1 gives it: round to nearest
    even, out-of-range values and infinities clamp to the largest finite value, NaN stays NaN."""
    import ml_dtypes

    limit = float(ml_dtypes.finfo(dtype.to_numpy()).max)
    with np.errstate(invalid="ignore"):
        return np.clip(x.astype(np.float32), -limit, limit).astype(dtype.to_numpy())


@dataclass(frozen=True)
class TensorType:
    """A static tensor type: element type and shape (a scalar has shape ())."""

    dtype: DType
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        for dim in self.shape:
            if not isinstance(dim, int) or dim < 0:
                raise IRError(f"bad dimension {dim!r} in shape {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for dim in self.shape:
            n *= dim
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def with_shape(self, shape: tuple[int, ...]) -> TensorType:
        return TensorType(self.dtype, tuple(shape))

    def with_dtype(self, dtype: DType) -> TensorType:
        return TensorType(dtype, self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{','.join(str(d) for d in self.shape)}]"
