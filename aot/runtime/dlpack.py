"""DLPack through ctypes: taking a producer's tensor in place, and exporting device memory.

The structs are DLPack's (dlpack.h, ABI 1.x): DLDevice, DLDataType, DLTensor,
DLManagedTensor and DLManagedTensorVersioned. The two halves:

- `import_capsule(capsule)`: a producer's capsule ("dltensor" or "dltensor_versioned")
  -> an `ImportedTensor` (address, device, dtype, shape, strides, `release()`), the
  capsule marked used, as the protocol asks of a consumer; `check` refuses what the runtime
  cannot read in place (another device or dtype, another shape, strides, misalignment).
- `export_capsule(owner, ...)`: a legacy "dltensor" capsule describing device memory,
  which keeps `owner` alive until the consumer calls the deleter (or, never consumed,
  until the capsule is destroyed).

Neither half trusts the object it is given: something that is not a capsule, a capsule
of another name or a malformed tensor is a RunError, never a crash.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from aot.errors import RunError
from aot.ir.types import DType

# DLDeviceType
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3

# DLPACK_FLAG_BITMASK_READ_ONLY (DLManagedTensorVersioned.flags)
_FLAG_READ_ONLY = 1
_MAX_NDIM = 64  # far above any model's rank; bounds what a malformed tensor makes us read


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*deleter)(DLManagedTensor*)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# -- dtypes: aot DType <-> DLDataType (code, bits, lanes)
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6
_DL_FLOAT8 = {  # DLPack 1.1 codes
    DType.F8E4M3FN: 10, DType.F8E4M3FNUZ: 11, DType.F8E5M2: 12, DType.F8E5M2FNUZ: 13,
}


def _dl_dtype(dtype: DType) -> tuple[int, int, int]:
    bits = 8 * dtype.itemsize
    if dtype in _DL_FLOAT8:
        return (_DL_FLOAT8[dtype], bits, 1)
    if dtype is DType.BF16:
        return (_DL_BFLOAT, bits, 1)
    if dtype is DType.BOOL:
        return (_DL_BOOL, bits, 1)
    if dtype.is_float:
        return (_DL_FLOAT, bits, 1)
    return (_DL_INT if dtype.manifest_name.startswith("int") else _DL_UINT, bits, 1)


_DL_DTYPES = {d: _dl_dtype(d) for d in DType}
_BY_DL_DTYPE = {dl: d for d, dl in _DL_DTYPES.items()}


def dl_dtype(dtype: DType) -> tuple[int, int, int]:
    """`dtype` as DLPack's (code, bits, lanes)."""
    return _DL_DTYPES[dtype]


def describe_dl_dtype(dl: tuple[int, int, int]) -> str:
    """An aot dtype name for `dl` where there is one, else its numbers."""
    known = _BY_DL_DTYPE.get(tuple(dl))
    if known is not None:
        return known.manifest_name
    code, bits, lanes = dl
    return f"DLPack dtype (code {code}, bits {bits}, lanes {lanes})"


def describe_device(device: tuple[int, int]) -> str:
    kind, ordinal = device
    return {KDL_CPU: "cpu", KDL_CUDA: f"cuda:{ordinal}", KDL_CUDA_HOST: "cuda_host"}.get(
        kind, f"DLPack device ({kind}, {ordinal})")


# -- PyCapsule_* through ctypes.pythonapi (the GIL held, Python errors raised); prototypes
# of our own, so other users of ctypes.pythonapi keep the argtypes they set
def _capi(name: str, restype, argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, [ctypes.py_object, ctypes.c_char_p])
_capsule_get_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p])
_capsule_get_name = _capi("PyCapsule_GetName", ctypes.c_char_p, [ctypes.py_object])
_capsule_set_name = _capi("PyCapsule_SetName", ctypes.c_int, [ctypes.py_object, ctypes.c_void_p])
_incref = _capi("Py_IncRef", None, [ctypes.py_object])
_decref = _capi("Py_DecRef", None, [ctypes.py_object])

# PyCapsule_SetName keeps the pointer, not a copy: these buffers live as long as the module.
_USED_NAMES = {
    b"dltensor": ctypes.create_string_buffer(b"used_dltensor"),
    b"dltensor_versioned": ctypes.create_string_buffer(b"used_dltensor_versioned"),
}


# -- consuming a producer's capsule
@dataclass
class ImportedTensor:
    """A producer's tensor taken in place: `address` is data + byte_offset; `strides` (in
    elements) is None where the producer gave none (compact row-major). Call `release()`
    when done with the memory (it runs the producer's deleter, once)."""
    address: int
    device: tuple[int, int]
    dtype: tuple[int, int, int]
    shape: tuple[int, ...]
    strides: Optional[tuple[int, ...]]
    read_only: bool
    _release: Optional[Callable[[], None]] = field(default=None, repr=False)

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


def _capsule_name(capsule: object) -> Optional[bytes]:
    if type(capsule).__name__ != "PyCapsule":
        return None
    return _capsule_get_name(capsule)


def import_capsule(capsule: object, what: str) -> ImportedTensor:
    """Take the tensor of a DLPack capsule (legacy or versioned), marking the capsule used;
    `what` names it in errors ("input 'x'")."""
    for name in (b"dltensor", b"dltensor_versioned"):
        if _capsule_is_valid(capsule, name):
            break
    else:
        found = _capsule_name(capsule)
        got = f"a capsule named {found!r}" if found is not None else f"a {type(capsule).__name__}"
        raise RunError(f"{what}: __dlpack__() returned {got}, not an unused DLPack capsule "
                       "('dltensor' or 'dltensor_versioned')")
    pointer = _capsule_get_pointer(capsule, name)
    if not pointer:
        raise RunError(f"{what}: the DLPack capsule holds a NULL tensor")
    read_only = False
    if name == b"dltensor_versioned":
        managed = DLManagedTensorVersioned.from_address(pointer)
        if managed.version.major != 1:
            raise RunError(f"{what}: DLPack version {managed.version.major}.{managed.version.minor}, "
                           "this binding reads 1.x")
        read_only = bool(managed.flags & _FLAG_READ_ONLY)
    else:
        managed = DLManagedTensor.from_address(pointer)
    tensor = managed.dl_tensor
    shape, strides = _dims(tensor, what)
    # Read everything before the capsule is consumed: an error above leaves it to its own
    # destructor, which runs the deleter.
    imported = ImportedTensor(
        address=(tensor.data or 0) + tensor.byte_offset,
        device=(int(tensor.device.device_type), int(tensor.device.device_id)),
        dtype=(int(tensor.dtype.code), int(tensor.dtype.bits), int(tensor.dtype.lanes)),
        shape=shape, strides=strides, read_only=read_only)
    deleter = managed.deleter
    if _capsule_set_name(capsule, ctypes.addressof(_USED_NAMES[name])) != 0:  # pragma: no cover - a valid capsule
        raise RunError(f"{what}: cannot mark the DLPack capsule used")
    if deleter:
        imported._release = lambda: deleter(pointer)
    return imported


def _dims(tensor: DLTensor, what: str) -> tuple[tuple[int, ...], Optional[tuple[int, ...]]]:
    ndim = int(tensor.ndim)
    if not 0 <= ndim <= _MAX_NDIM:
        raise RunError(f"{what}: the DLPack tensor has ndim {ndim}")
    if ndim and not tensor.shape:
        raise RunError(f"{what}: the DLPack tensor has ndim {ndim} and no shape")
    shape = tuple(int(tensor.shape[i]) for i in range(ndim))
    if any(s < 0 for s in shape):
        raise RunError(f"{what}: the DLPack tensor has a negative dimension {shape}")
    strides = tuple(int(tensor.strides[i]) for i in range(ndim)) if ndim and tensor.strides else None
    return shape, strides


def is_compact(shape: Sequence[int], strides: Optional[Sequence[int]]) -> bool:
    """Dense row-major: each dimension's stride the product of those after it (a
    dimension of size 1 may have any stride; an empty tensor is always compact)."""
    if strides is None or 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def check(tensor: ImportedTensor, what: str, *, device: tuple[int, int], dtype: DType,
          shape: Sequence[int], writable: bool = False, alignment: int = 16) -> None:
    """Refuse a tensor the runtime cannot use in place as `what`: each violation is a
    RunError naming `what` and what is wrong."""
    if tensor.device != tuple(device):
        raise RunError(f"{what} is on {describe_device(tensor.device)}, this session runs on "
                       f"{describe_device(device)}")
    if tensor.dtype != dl_dtype(dtype):
        raise RunError(f"{what}: expected dtype {dtype.manifest_name}, got {describe_dl_dtype(tensor.dtype)}")
    if list(tensor.shape) != list(shape):
        raise RunError(f"{what}: expected shape {_fmt(shape)}, got {_fmt(tensor.shape)}")
    if not is_compact(tensor.shape, tensor.strides):
        raise RunError(f"{what}: strides {_fmt(tensor.strides or ())} (in elements) are not dense row-major "
                       f"for shape {_fmt(tensor.shape)}; pass a contiguous tensor (e.g. .contiguous())")
    nbytes = math.prod(tensor.shape) * dtype.itemsize
    if nbytes and tensor.address % alignment:
        raise RunError(f"{what}: data address {tensor.address:#x} is not {alignment}-byte aligned")
    if writable and tensor.read_only:
        raise RunError(f"{what}: the DLPack tensor is read-only")


def _fmt(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(int(d)) for d in dims) + "]"


def take(obj: object, what: str, stream: Optional[int]) -> ImportedTensor:
    """`obj.__dlpack__(stream=stream)` imported (stream: the consumer's CUstream, so the
    producer orders its pending work before ours; a producer that takes no stream
    argument is asked without one)."""
    if stream is None:
        capsule = obj.__dlpack__()
    else:
        try:
            capsule = obj.__dlpack__(stream=stream)
        except TypeError:
            capsule = obj.__dlpack__()
    return import_capsule(capsule, what)


# -- producing a capsule
def export_capsule(owner: object, address: int, shape: Sequence[int], dtype: DType,
                   device: tuple[int, int]) -> object:
    """A legacy "dltensor" capsule for `shape` x `dtype` at device `address`; the
    DLManagedTensor holds a reference to `owner` (what keeps the memory alive) until its
    deleter runs: when the consumer is done with it, or when the capsule is destroyed
    without being consumed.

    The capsule, its destructor and the deleter are numpy's (a capsule of a placeholder
    array with the same ndim, whose tensor fields are then rewritten and whose
    manager_ctx, the reference numpy's deleter drops, becomes `owner`): C functions, which
    run safely wherever Python destroys the capsule. A ctypes callback as destructor or
    deleter cannot: called while an exception propagates (a capsule passed to a call that
    raised), it turns that exception into SystemError ("returned a result with an
    exception set")."""
    ndim = len(shape)
    placeholder = np.empty((1,) * ndim, np.uint8)
    capsule = placeholder.__dlpack__()
    managed = DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
    tensor = managed.dl_tensor
    if managed.manager_ctx != id(placeholder) or tensor.ndim != ndim or (ndim and not tensor.strides):
        raise RunError("numpy's DLPack export is not laid out as this binding expects "
                       "(manager_ctx the array, shape and strides filled)")
    tensor.data = address
    tensor.device = DLDevice(*device)
    tensor.dtype = DLDataType(*dl_dtype(dtype))
    tensor.byte_offset = 0
    stride = 1
    for i in reversed(range(ndim)):
        tensor.shape[i] = int(shape[i])
        tensor.strides[i] = stride
        stride *= int(shape[i])
    _incref(owner)
    managed.manager_ctx = id(owner)
    _decref(placeholder)  # the reference numpy's capsule took, now held on `owner`
    return capsule
