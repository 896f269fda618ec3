"""The Python side of the C runtime (runtime_c/):

- `aot.runtime.abi`: the ctypes mirror of runtime_c/include/aot_runtime.h (status codes,
  structs, function signatures);
- `aot.runtime.library`: finding or building libaot_runtime.so (under a file lock) and
  loading it;
- `aot.runtime.session`: `Session`, an onnxruntime-style way to run an artifact, on the
  CPU or a GPU (also `aot.Session`);
- `aot.runtime.device_array`: `DeviceArray`, GPU memory of a CUDA Session, with DLPack
  and the CUDA array interface (also `aot.DeviceArray`);
- `aot.runtime.dlpack`: the DLPack structs, taking and making capsules through ctypes.

`Session` and `DeviceArray` are importable from here; they load lazily, so importing
`aot.runtime.abi` stays cheap.
"""

__all__ = ["DeviceArray", "Session"]


def __getattr__(name: str):
    if name == "Session":
        from aot.runtime.session import Session

        return Session
    if name == "DeviceArray":
        from aot.runtime.device_array import DeviceArray

        return DeviceArray
    raise AttributeError(f"module 'aot.runtime' has no attribute {name!r}")
