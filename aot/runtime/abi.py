"""The ctypes mirror of the C runtime's ABI (runtime_c/include/aot_runtime.h).

Status codes, the structs the calls take, and each function's signature, as the header
declares them; tests/project/test_shared_tables.py checks the status codes against the header.
The dtype codes (`aot_dtype_t`) are `aot.ir.types.DType.abi_code`.
"""
from __future__ import annotations

import ctypes

# the oldest C runtime ABI this binding works with (2: AOT_ERR_CHECK_FAILED, dtypes 11-17)
ABI_VERSION = 2
# the first with aot_model_options_t (Session's max_memory_bytes)
OPTIONS_ABI_VERSION = 3
# the first with GPU execution (Session's device="cuda", aot_run_device, aot_device_*)
DEVICE_ABI_VERSION = 4
# the first that tells a model's donated pairs (aot_model_donation*)
DONATION_ABI_VERSION = 5
# the first that tells which CPU code variant a model loaded (aot_model_cpu_variant)
CPU_VARIANT_ABI_VERSION = 6

# aot_status_t
AOT_OK = 0
AOT_ERR_INVALID_ARGUMENT = 1
AOT_ERR_IO = 2
AOT_ERR_FORMAT = 3
AOT_ERR_CHECKSUM = 4
AOT_ERR_UNSUPPORTED = 5
AOT_ERR_NO_MEMORY = 6
AOT_ERR_SHAPE_MISMATCH = 7
AOT_ERR_DTYPE_MISMATCH = 8
AOT_ERR_INTERNAL = 9
AOT_ERR_CHECK_FAILED = 10  # a run-time check of the model failed
AOT_ERR_NO_DEVICE = 11  # ABI 4: no CUDA driver, no such device, or no GPU code for it
AOT_ERR_DEVICE = 12  # ABI 4: the CUDA driver failed a call

# Statuses of aot_model_open_* that mean "this artifact is bad" (ArtifactError);
# the rest (no memory, dlopen failure, ...) are RunError.
ARTIFACT_STATUSES = frozenset({AOT_ERR_IO, AOT_ERR_FORMAT, AOT_ERR_CHECKSUM, AOT_ERR_UNSUPPORTED})


class CError(ctypes.Structure):  # aot_error_t
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]

    def text(self) -> str:
        return self.message.decode("utf-8", "replace")


# aot_device_kind_t and the aot_context_options_t.flags bits (ABI 4). Not spelled AOT_...:
# every AOT_ name here is a status code (tests/project/test_shared_tables.py).
DEVICE_CPU = 0
DEVICE_CUDA = 1
CONTEXT_NO_CUDA_GRAPH = 1


class CContextOptions(ctypes.Structure):  # aot_context_options_t
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_threads", ctypes.c_uint32),
        # ABI 4: a runtime reads them only when struct_size covers them
        ("device", ctypes.c_uint32),
        ("device_ordinal", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


# struct_size for a runtime older than DEVICE_ABI_VERSION (struct_size and num_threads only)
CONTEXT_OPTIONS_V1_SIZE = CContextOptions.device.offset


class CModelOptions(ctypes.Structure):  # aot_model_options_t (ABI 3)
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("max_memory_bytes", ctypes.c_uint64)]


class CTensorInfo(ctypes.Structure):  # aot_tensor_info_t
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("byte_size", ctypes.c_uint64),
    ]


class CTensor(ctypes.Structure):  # aot_tensor_t
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("byte_size", ctypes.c_uint64),
    ]


_P = ctypes.c_void_p
_ERRP = ctypes.POINTER(CError)
_OPTIONS = ctypes.POINTER(CModelOptions)

_SIGNATURES = {
    "aot_abi_version": (ctypes.c_uint32, []),
    "aot_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "aot_dtype_size": (ctypes.c_uint32, [ctypes.c_int]),
    "aot_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "aot_model_open_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P), _ERRP]),
    "aot_model_open_memory": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_P), _ERRP]),
    "aot_model_close": (None, [_P]),
    "aot_model_input_count": (ctypes.c_uint32, [_P]),
    "aot_model_output_count": (ctypes.c_uint32, [_P]),
    "aot_model_input_info": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(CTensorInfo), _ERRP]),
    "aot_model_output_info": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(CTensorInfo), _ERRP]),
    "aot_model_arena_bytes": (ctypes.c_uint64, [_P]),
    "aot_model_name": (ctypes.c_char_p, [_P]),
    "aot_context_create": (ctypes.c_int, [_P, ctypes.POINTER(CContextOptions), ctypes.POINTER(_P), _ERRP]),
    "aot_context_destroy": (None, [_P]),
    "aot_run": (ctypes.c_int, [_P, ctypes.POINTER(CTensor), ctypes.c_uint32, ctypes.POINTER(CTensor),
                               ctypes.c_uint32, _ERRP]),
}
_TENSORS = ctypes.POINTER(CTensor)
# appended in ABI 3 to 6: declared where the library has them
_OPTIONAL_SIGNATURES = {
    "aot_model_open_file_with_options": (ctypes.c_int, [ctypes.c_char_p, _OPTIONS, ctypes.POINTER(_P), _ERRP]),
    "aot_model_open_memory_with_options": (
        ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, _OPTIONS, ctypes.POINTER(_P), _ERRP]),
    # ABI 4
    "aot_context_device": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int32)]),
    "aot_context_cuda_stream": (ctypes.c_void_p, [_P]),
    "aot_run_device": (ctypes.c_int, [_P, _TENSORS, ctypes.c_uint32, _TENSORS, ctypes.c_uint32, _P, _ERRP]),
    "aot_device_alloc": (ctypes.c_int, [_P, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), _ERRP]),
    "aot_device_free": (ctypes.c_int, [_P, ctypes.c_uint64, _ERRP]),
    "aot_device_upload": (ctypes.c_int, [_P, ctypes.c_uint64, _P, ctypes.c_uint64, _ERRP]),
    "aot_device_download": (ctypes.c_int, [_P, _P, ctypes.c_uint64, ctypes.c_uint64, _ERRP]),
    # ABI 5
    "aot_model_donation_count": (ctypes.c_uint32, [_P]),
    "aot_model_donation": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32),
                                          ctypes.POINTER(ctypes.c_uint32), _ERRP]),
    # ABI 6
    "aot_model_cpu_variant": (ctypes.c_char_p, [_P]),
}


def declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Give `lib`'s functions their C signatures; returns `lib`."""
    signatures = dict(_SIGNATURES)
    signatures.update({name: s for name, s in _OPTIONAL_SIGNATURES.items() if hasattr(lib, name)})
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib
