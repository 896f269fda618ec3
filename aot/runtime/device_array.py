"""DeviceArray: a tensor in GPU memory that a CUDA Session allocated.

    x = DeviceArray.from_numpy(session, np.ones((1, 3), np.float32))   # upload
    (y,) = session.run(None, {"x": x})                                  # y: DeviceArray
    y.numpy()                                                           # download
    torch.from_dlpack(y)                                                # no copy

The memory belongs to the session's CUDA context (aot_device_alloc) and is freed
(aot_device_free) when the last reference goes: the array's own, or one a DLPack
consumer holds through a capsule. An array keeps its session's context alive, so
closing a Session while arrays exist is fine: the context goes with the last array.

Every write into a DeviceArray (an upload, a run) has finished when the call that made
it returns, so consumers need no stream synchronization: `__dlpack__` ignores the
consumer's stream and `__cuda_array_interface__` names none.
"""
from __future__ import annotations

import weakref
from typing import Optional, Protocol, Sequence

import numpy as np

from aot.errors import RunError
from aot.ir.types import DType
from aot.runtime import dlpack


class DeviceMemory(Protocol):
    """Where a DeviceArray's bytes live: a CUDA context of the runtime (a Session's), or a
    stand-in in tests. `free` is called once per `alloc`."""
    ordinal: int

    def alloc(self, nbytes: int) -> int: ...

    def free(self, address: int) -> None: ...

    def upload(self, address: int, host: int, nbytes: int) -> None: ...

    def download(self, host: int, address: int, nbytes: int) -> None: ...


def numpy_dtype(dtype: DType) -> np.dtype:
    """What the binding gives and takes for `dtype`: without ml_dtypes, bfloat16 and
    float8 tensors are arrays of their raw bits (uint16, uint8)."""
    try:
        return dtype.to_numpy()
    except ImportError:  # pragma: no cover - ml_dtypes ships with onnx
        return np.dtype(f"uint{8 * dtype.itemsize}")


def _element(dtype: object) -> DType:
    if isinstance(dtype, DType):
        return dtype
    try:
        return DType.from_numpy(np.dtype(dtype))
    except Exception:
        raise RunError(f"a DeviceArray cannot hold dtype {dtype!r}") from None


class DeviceArray:
    """A dense row-major tensor in device memory; see the module docstring."""

    __slots__ = ("_memory", "_address", "_shape", "_element", "_finalizer", "__weakref__")

    def __init__(self, memory: DeviceMemory, address: int, shape: Sequence[int], dtype: DType):
        """Own `address` (from `memory.alloc`, freed with `memory.free` when this array and
        every DLPack capsule made from it are gone). Use `empty` or `from_numpy`."""
        self._memory = memory
        self._address = int(address)
        self._shape = tuple(int(s) for s in shape)
        self._element = dtype
        self._finalizer = weakref.finalize(self, memory.free, self._address)
        # at interpreter exit the driver may be gone already; the process frees it all
        self._finalizer.atexit = False

    # -- creating
    @classmethod
    def empty(cls, session_or_memory: object, shape: Sequence[int], dtype: object) -> "DeviceArray":
        """Uninitialized memory for `shape` x `dtype` (a numpy dtype or an aot DType) on a
        CUDA session's device."""
        memory = _memory_of(session_or_memory)
        element = _element(dtype)
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise RunError(f"a DeviceArray's shape cannot be negative: {list(shape)}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * element.itemsize
        return cls(memory, memory.alloc(nbytes), shape, element)

    @classmethod
    def from_numpy(cls, session_or_memory: object, array: object) -> "DeviceArray":
        """A copy of `array` (anything np.asarray takes) on a CUDA session's device."""
        given = np.asarray(array)
        host = np.ascontiguousarray(given).reshape(given.shape)  # ascontiguousarray makes a scalar [1]
        out = cls.empty(session_or_memory, host.shape, host.dtype)
        if host.nbytes:
            out._memory.upload(out._address, host.ctypes.data, host.nbytes)
        return out

    # -- what it is
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self._element)

    @property
    def element(self) -> DType:
        """The aot dtype (`dtype` is its numpy form)."""
        return self._element

    @property
    def nbytes(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64)) * self._element.itemsize

    @property
    def ordinal(self) -> int:
        return self._memory.ordinal

    @property
    def device(self) -> str:
        return f"cuda:{self._memory.ordinal}"

    @property
    def data_ptr(self) -> int:
        """The device address (CUdeviceptr)."""
        return self._address

    def numpy(self) -> np.ndarray:
        """A host copy."""
        host = np.empty(self._shape, numpy_dtype(self._element))
        if host.nbytes:
            self._memory.download(host.ctypes.data, self._address, host.nbytes)
        return host

    def __repr__(self) -> str:
        return f"DeviceArray(shape={list(self._shape)}, dtype={self._element.manifest_name}, device={self.device!r})"

    # -- DLPack and the CUDA array interface
    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.KDL_CUDA, self._memory.ordinal)

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[tuple[int, int]] = None,
                   dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> object:
        """A legacy "dltensor" capsule of this memory, no copy. The capsule keeps the array
        alive until its consumer is done. `stream` needs nothing: the data is ready."""
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"a DeviceArray on {self.device} cannot be exported to DLPack device {dl_device}")
        if copy:
            raise BufferError("a DeviceArray is exported without a copy (copy=True is not supported)")
        return dlpack.export_capsule(self, self._address, self._shape, self._element, self.__dlpack_device__())

    @property
    def __cuda_array_interface__(self) -> dict:
        """Version 3 (CuPy, Numba); not for bfloat16 and float8, which it cannot spell
        (their consumers take `__dlpack__`)."""
        if self._element.needs_ml_dtypes:
            raise AttributeError(f"__cuda_array_interface__ cannot describe {self._element.manifest_name}")
        return {
            "shape": self._shape,
            "typestr": np.dtype(self._element.numpy_type).str,
            "data": (self._address, False),
            "strides": None,
            "version": 3,
            "stream": None,
        }


def _memory_of(session_or_memory: object) -> DeviceMemory:
    """A CUDA Session's device memory (or a DeviceMemory itself)."""
    device_memory = getattr(session_or_memory, "_device_memory", None)
    if device_memory is not None:
        return device_memory()
    if all(hasattr(session_or_memory, a) for a in ("ordinal", "alloc", "free", "upload", "download")):
        return session_or_memory  # type: ignore[return-value]
    raise RunError(f"a DeviceArray needs a CUDA Session, got {type(session_or_memory).__name__}")
