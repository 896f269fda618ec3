"""The Python side of the C runtime (runtime_c/), in three modules:

- `aot.runtime.abi`: the ctypes mirror of runtime_c/include/aot_runtime.h (status codes,
  structs, function signatures);
- `aot.runtime.library`: finding or building libaot_runtime.so (under a file lock) and
  loading it;
- `aot.runtime.session`: `Session`, an onnxruntime-style way to run an artifact
  (also `aot.Session`).
"""
