"""Element types and `dense<...>` literals as numpy arrays."""
from __future__ import annotations

import numpy as np

from .syntax import DenseLit, TType

# MLIR element type -> numpy dtype name. The importer later refuses the ones
# aot does not compile; parsing them still works, so the error can say which.
_NUMPY = {
    "f16": "float16", "f32": "float32", "f64": "float64",
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64",
    "si8": "int8", "si16": "int16", "si32": "int32", "si64": "int64",
}
_BITS = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64, "bfloat16": np.uint16}


def numpy_dtype(elem: str) -> np.dtype | None:
    if elem == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    name = _NUMPY.get(elem)
    return np.dtype(name) if name else None


def dense_array(lit: DenseLit, ttype: TType) -> np.ndarray:
    """The array a dense literal denotes at `ttype`; ValueError says why it cannot."""
    dtype = numpy_dtype(ttype.elem)
    if dtype is None:
        raise ValueError(f"dense literals of element type {ttype.elem} are not supported")
    if not ttype.is_static:
        raise ValueError(f"a dense literal needs a static type, got {ttype}")
    shape = tuple(int(d) for d in ttype.shape or ())
    size = int(np.prod(shape, dtype=np.int64))
    if lit.hex_blob is not None:
        if len(lit.hex_blob) % dtype.itemsize:
            raise ValueError(f"hex data holds {len(lit.hex_blob)} bytes, not a whole number of {ttype.elem} elements")
        flat = np.frombuffer(lit.hex_blob, dtype=dtype)
        if flat.size == 1 and size != 1:
            return np.full(shape, flat[0], dtype=dtype)
        if flat.size != size:
            raise ValueError(f"hex data holds {flat.size} elements, {ttype} needs {size}")
        return flat.reshape(shape).copy()
    data = lit.data
    if not isinstance(data, list):
        return np.full(shape, _scalar(data, dtype), dtype=dtype)
    array = np.array(_map_nested(data, dtype), dtype=dtype) if data else np.zeros((0,), dtype)
    if array.size != size:
        raise ValueError(f"literal has {array.size} elements, {ttype} needs {size}")
    return array.reshape(shape)


def _map_nested(data: list, dtype: np.dtype) -> list:
    return [_map_nested(d, dtype) if isinstance(d, list) else _scalar(d, dtype) for d in data]


def _scalar(value: object, dtype: np.dtype) -> object:
    """A literal element; hex integers on float types are bit patterns (`0xFF800000` is -inf)."""
    if isinstance(value, str) and value.lower().startswith("0x"):
        bits = int(value, 16)
        if dtype.kind == "f" or dtype.name == "bfloat16":
            return np.array(bits, dtype=_BITS[dtype.name]).view(dtype)[()]
        return bits
    return value


def hex_bytes(text: str) -> bytes:
    """The bytes of a `"0x..."` blob string (body without quotes)."""
    return bytes.fromhex(text[2:])
