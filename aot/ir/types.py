"""Element types and static tensor types of the IR."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np

from aot.errors import IRError


class DType(enum.Enum):
    """Element type, and the one table of them.

    Each row: the IR text name (the member's value, so `DType("f32")` parses it), the
    name in the artifact manifest and the C runtime, the `aot_dtype_t` value of
    runtime_c/include/aot_runtime.h, bytes per element, the numpy type (ml_dtypes' where
    numpy has none), and the ONNX `TensorProto` element type. Every other list of dtypes
    derives from this one (the ONNX importer, the runtime binding, the manifest check) or
    is checked against it by tests/project/test_shared_tables.py (the C header's enum, status.c's
    names, packaging/FORMAT.md). A new dtype is a new row here, appended to aot_dtype_t.
    """

    #             IR            manifest / C      ABI bytes numpy                      ONNX TensorProto
    F16        = ("f16",        "float16",        3,  2, "float16",                   "FLOAT16")
    BF16       = ("bf16",       "bfloat16",       4,  2, "ml_dtypes.bfloat16",        "BFLOAT16")
    F32        = ("f32",        "float32",        1,  4, "float32",                   "FLOAT")
    F64        = ("f64",        "float64",        2,  8, "float64",                   "DOUBLE")
    I8         = ("i8",         "int8",           5,  1, "int8",                      "INT8")
    I16        = ("i16",        "int16",          6,  2, "int16",                     "INT16")
    I32        = ("i32",        "int32",          7,  4, "int32",                     "INT32")
    I64        = ("i64",        "int64",          8,  8, "int64",                     "INT64")
    U8         = ("u8",         "uint8",          9,  1, "uint8",                     "UINT8")
    BOOL       = ("i1",         "bool",           10, 1, "bool",                      "BOOL")  # one byte, 0 or 1
    U16        = ("u16",        "uint16",         11, 2, "uint16",                    "UINT16")
    U32        = ("u32",        "uint32",         12, 4, "uint32",                    "UINT32")
    U64        = ("u64",        "uint64",         13, 8, "uint64",                    "UINT64")
    # float8 (OCP FP8 and the "fnuz" variants of ONNX): one byte in memory, f32 in registers
    F8E4M3FN   = ("f8e4m3fn",   "float8e4m3fn",   14, 1, "ml_dtypes.float8_e4m3fn",   "FLOAT8E4M3FN")
    F8E4M3FNUZ = ("f8e4m3fnuz", "float8e4m3fnuz", 15, 1, "ml_dtypes.float8_e4m3fnuz", "FLOAT8E4M3FNUZ")
    F8E5M2     = ("f8e5m2",     "float8e5m2",     16, 1, "ml_dtypes.float8_e5m2",     "FLOAT8E5M2")
    F8E5M2FNUZ = ("f8e5m2fnuz", "float8e5m2fnuz", 17, 1, "ml_dtypes.float8_e5m2fnuz", "FLOAT8E5M2FNUZ")

    manifest_name: str  # numpy's name; ml_dtypes' without the underscore for float8
    abi_code: int  # aot_dtype_t
    itemsize: int
    numpy_type: str  # a numpy dtype name, or "ml_dtypes.<name>"
    onnx_name: str  # TensorProto.DataType name

    def __new__(cls, ir: str, manifest_name: str, abi_code: int, itemsize: int, numpy_type: str,
                onnx_name: str) -> DType:
        member = object.__new__(cls)
        member._value_ = ir
        member.manifest_name = manifest_name
        member.abi_code = abi_code
        member.itemsize = itemsize
        member.numpy_type = numpy_type
        member.onnx_name = onnx_name
        return member

    @property
    def is_float(self) -> bool:
        return self in FLOAT_DTYPES

    @property
    def is_int(self) -> bool:
        return self in INT_DTYPES

    @property
    def is_narrow_float(self) -> bool:
        """Stored in fewer bits than f32 and computed in f32 (f16, bf16, float8)."""
        return self in NARROW_FLOAT_DTYPES

    @property
    def is_float8(self) -> bool:
        return self in FLOAT8_DTYPES

    @property
    def needs_ml_dtypes(self) -> bool:
        """numpy has no such type; ml_dtypes (a dependency of onnx) does."""
        return self.numpy_type.startswith("ml_dtypes.")

    def to_numpy(self) -> np.dtype:
        if self.needs_ml_dtypes:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, self.numpy_type.removeprefix("ml_dtypes.")))
        return np.dtype(self.numpy_type)

    @staticmethod
    def from_numpy(dtype: np.dtype | type) -> DType:
        dt = np.dtype(dtype)
        for member in DType:
            if member.needs_ml_dtypes:
                if dt.name == member.numpy_type.removeprefix("ml_dtypes."):
                    return member
            elif dt == np.dtype(member.numpy_type):
                return member
        raise IRError(f"no IR dtype for numpy dtype {dt}")

    @staticmethod
    def parse(text: str) -> DType:
        try:
            return DType(text)
        except ValueError:
            raise IRError(f"unknown dtype '{text}'") from None

    @staticmethod
    def from_manifest_name(name: str) -> DType | None:
        """The dtype a manifest (or the C runtime) calls `name`; None for an unknown name."""
        return _BY_MANIFEST_NAME.get(name)

    @staticmethod
    def from_abi_code(code: int) -> DType | None:
        """The dtype of an `aot_dtype_t` value; None for an unknown one."""
        return _BY_ABI_CODE.get(code)


_BY_MANIFEST_NAME = {d.manifest_name: d for d in DType}
_BY_ABI_CODE = {d.abi_code: d for d in DType}
_ML_DTYPES_NAMES = frozenset(d.numpy_type.removeprefix("ml_dtypes.") for d in DType if d.needs_ml_dtypes)

FLOAT8_DTYPES = frozenset({DType.F8E4M3FN, DType.F8E4M3FNUZ, DType.F8E5M2, DType.F8E5M2FNUZ})
NARROW_FLOAT_DTYPES = frozenset({DType.F16, DType.BF16}) | FLOAT8_DTYPES
FLOAT_DTYPES = frozenset({DType.F16, DType.BF16, DType.F32, DType.F64}) | FLOAT8_DTYPES
INT_DTYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.U16, DType.U32, DType.U64})
SIGNED_DTYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64})
UNSIGNED_DTYPES = INT_DTYPES - SIGNED_DTYPES


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
    return dtype.kind == "f" or dtype.name in _ML_DTYPES_NAMES


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
