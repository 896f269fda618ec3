"""Element types and static tensor types of the IR."""
from __future__ import annotations

import enum
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

    def to_numpy(self) -> np.dtype:
        if self is DType.BF16:
            import ml_dtypes  # ships with onnx; numpy has no bfloat16

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(_NUMPY_NAME[self])

    @staticmethod
    def from_numpy(dtype: np.dtype | type) -> DType:
        dt = np.dtype(dtype)
        if dt.name == "bfloat16":
            return DType.BF16
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


FLOAT_DTYPES = frozenset({DType.F16, DType.BF16, DType.F32, DType.F64})
INT_DTYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64, DType.U8})
SIGNED_DTYPES = frozenset({DType.I8, DType.I16, DType.I32, DType.I64})

_ITEMSIZE = {
    DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8, DType.I8: 1, DType.I16: 2,
    DType.I32: 4, DType.I64: 8, DType.U8: 1, DType.BOOL: 1,
}
_NUMPY_NAME = {
    DType.F16: "float16", DType.F32: "float32", DType.F64: "float64", DType.I8: "int8",
    DType.I16: "int16", DType.I32: "int32", DType.I64: "int64", DType.U8: "uint8", DType.BOOL: "bool",
}
_MANIFEST_NAME = {**_NUMPY_NAME, DType.BF16: "bfloat16"}


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
