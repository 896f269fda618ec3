"""Python binding of the C runtime (ctypes) and an onnxruntime-style Session.

The shared library is found or built on first use:

- ``AOT_RUNTIME_LIB`` (path to ``libaot_runtime.so``) wins when set;
- otherwise the C sources (``aot/_runtime_c`` in an installed wheel,
  ``runtime_c/`` in a source checkout) are built with
  ``make -C <sources> BUILD_DIR=...`` into
  ``$XDG_CACHE_HOME/aot/runtime-<hash of the C sources>`` (default
  ``~/.cache/aot``), under a file lock so parallel processes do not race;
  the build goes to a temporary directory that is renamed into place, so a
  half-built library is never picked up.

Sessions::

    with Session("model.aot", threads=4) as s:
        (y,) = s.run(None, {"x": x})

Threads: ``threads=None`` means 1, the model's entry run on the calling
thread. With more, the runtime splits only the kernels whose compile-time
cost estimate pays for handing work to another core; the rest run on the
calling thread, and a model with none to split starts no threads, so more
threads never cost much, and the results do not depend on the count. A
server that runs many sessions in parallel would still oversubscribe the
machine if each defaulted to all cores; ask for threads explicitly.

A Session is meant for one thread at a time; concurrent ``run`` calls on the
same Session are serialized by a lock. For parallel inference create one
Session per thread (each has its own arena and thread pool). ctypes releases
the GIL during ``aot_run``, so such sessions do run in parallel.

bfloat16 and float8: numpy has no such types. When ``ml_dtypes`` is
importable, such tensors are ``ml_dtypes.bfloat16`` / ``float8_e4m3fn`` /
``float8_e4m3fnuz`` / ``float8_e5m2`` / ``float8_e5m2fnuz`` arrays; otherwise
they are ``uint16`` (bfloat16) or ``uint8`` (float8) arrays holding the raw
bits. Inputs are accepted in either form.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Union

import numpy as np

from aot.errors import ArtifactError, RunError

def _runtime_sources() -> Path:
    """runtime_c/ as installed inside the package (wheel), else beside it (source checkout)."""
    packaged = Path(__file__).resolve().parent / "_runtime_c"
    return packaged if (packaged / "Makefile").is_file() else Path(__file__).resolve().parent.parent / "runtime_c"


RUNTIME_DIR = _runtime_sources()
LIB_NAME = "libaot_runtime.so"
ABI_VERSION = 2  # the oldest C runtime ABI this binding works with (2: AOT_ERR_CHECK_FAILED)
OPTIONS_ABI_VERSION = 3  # the first with aot_model_options_t (Session's max_memory_bytes)

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
AOT_ERR_CHECK_FAILED = 10  # a run-time check of the model failed: RunError with the check's message

# Statuses of aot_model_open_* that mean "this artifact is bad" (ArtifactError);
# the rest (no memory, dlopen failure, ...) are RunError.
_ARTIFACT_STATUSES = {AOT_ERR_IO, AOT_ERR_FORMAT, AOT_ERR_CHECKSUM, AOT_ERR_UNSUPPORTED}

try:  # optional: real bfloat16 and float8 numpy dtypes
    import ml_dtypes as _ml_dtypes

    _BF16: np.dtype = np.dtype(_ml_dtypes.bfloat16)
    _F8 = [np.dtype(getattr(_ml_dtypes, n)) for n in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")]
except ImportError:  # pragma: no cover - depends on the environment
    _BF16 = np.dtype(np.uint16)
    _F8 = [np.dtype(np.uint8)] * 4

# aot_dtype_t -> (numpy dtype, onnxruntime type string)
_DTYPES: dict[int, tuple[np.dtype, str]] = {
    1: (np.dtype(np.float32), "tensor(float)"),
    2: (np.dtype(np.float64), "tensor(double)"),
    3: (np.dtype(np.float16), "tensor(float16)"),
    4: (_BF16, "tensor(bfloat16)"),
    5: (np.dtype(np.int8), "tensor(int8)"),
    6: (np.dtype(np.int16), "tensor(int16)"),
    7: (np.dtype(np.int32), "tensor(int32)"),
    8: (np.dtype(np.int64), "tensor(int64)"),
    9: (np.dtype(np.uint8), "tensor(uint8)"),
    10: (np.dtype(np.bool_), "tensor(bool)"),
    11: (np.dtype(np.uint16), "tensor(uint16)"),
    12: (np.dtype(np.uint32), "tensor(uint32)"),
    13: (np.dtype(np.uint64), "tensor(uint64)"),
    14: (_F8[0], "tensor(float8e4m3fn)"),
    15: (_F8[1], "tensor(float8e4m3fnuz)"),
    16: (_F8[2], "tensor(float8e5m2)"),
    17: (_F8[3], "tensor(float8e5m2fnuz)"),
}
# codes whose arrays may also be given as raw bits of this unsigned type
_RAW_BITS = {4: np.dtype(np.uint16), 14: np.dtype(np.uint8), 15: np.dtype(np.uint8), 16: np.dtype(np.uint8),
             17: np.dtype(np.uint8)}
_NAMES = {4: "bfloat16", 14: "float8e4m3fn", 15: "float8e4m3fnuz", 16: "float8e5m2", 17: "float8e5m2fnuz"}
_ORT_TYPES = {str(dt): ort for dt, ort in _DTYPES.values()}
_ORT_TYPES.update({_NAMES[code]: _DTYPES[code][1] for code in _NAMES})


# ---------------------------------------------------------------- ctypes


class _Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]


class _ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("num_threads", ctypes.c_uint32)]


class _ModelOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("max_memory_bytes", ctypes.c_uint64)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("byte_size", ctypes.c_uint64),
    ]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("byte_size", ctypes.c_uint64),
    ]


_P = ctypes.c_void_p
_ERRP = ctypes.POINTER(_Error)


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    sig = {
        "aot_abi_version": (ctypes.c_uint32, []),
        "aot_status_string": (ctypes.c_char_p, [ctypes.c_int]),
        "aot_model_open_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_P), _ERRP]),
        "aot_model_open_memory": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_P), _ERRP]),
        "aot_model_close": (None, [_P]),
        "aot_model_input_count": (ctypes.c_uint32, [_P]),
        "aot_model_output_count": (ctypes.c_uint32, [_P]),
        "aot_model_input_info": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(_TensorInfo), _ERRP]),
        "aot_model_output_info": (ctypes.c_int, [_P, ctypes.c_uint32, ctypes.POINTER(_TensorInfo), _ERRP]),
        "aot_model_arena_bytes": (ctypes.c_uint64, [_P]),
        "aot_model_name": (ctypes.c_char_p, [_P]),
        "aot_context_create": (ctypes.c_int, [_P, ctypes.POINTER(_ContextOptions), ctypes.POINTER(_P), _ERRP]),
        "aot_context_destroy": (None, [_P]),
        "aot_run": (
            ctypes.c_int,
            [_P, ctypes.POINTER(_Tensor), ctypes.c_uint32, ctypes.POINTER(_Tensor), ctypes.c_uint32, _ERRP],
        ),
    }
    options = ctypes.POINTER(_ModelOptions)
    optional = {  # ABI 3
        "aot_model_open_file_with_options": (ctypes.c_int, [ctypes.c_char_p, options, ctypes.POINTER(_P), _ERRP]),
        "aot_model_open_memory_with_options": (
            ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, options, ctypes.POINTER(_P), _ERRP]),
    }
    sig.update({name: s for name, s in optional.items() if hasattr(lib, name)})
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


# ---------------------------------------------------------------- building


def _source_files(root: Path) -> list[Path]:
    files = [root / "Makefile"]
    for sub in ("include", "src"):
        files.extend(sorted((root / sub).glob("*.[ch]")))
    return files


def source_hash(root: Path = RUNTIME_DIR) -> str:
    """Hash of the files the library is built from (names and contents)."""
    h = hashlib.sha256()
    for f in _source_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aot"


def build_runtime(root: Path = RUNTIME_DIR, cache: Optional[Path] = None) -> Path:
    """Build the C runtime into the cache (once per source hash); return the .so path."""
    if not (root / "Makefile").is_file():
        raise RunError(f"C runtime sources not found at {root}")
    cache = cache or cache_dir()
    out_dir = cache / f"runtime-{source_hash(root)}"
    lib = out_dir / LIB_NAME
    if lib.is_file():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{out_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.is_file():  # another process built it while we waited
            return lib
        tmp = Path(tempfile.mkdtemp(prefix=f"{out_dir.name}.tmp-", dir=cache))
        try:
            proc = subprocess.run(
                ["make", "-C", str(root), f"BUILD_DIR={tmp}", "all"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            if proc.returncode != 0:
                tail = proc.stdout[-4000:]
                raise RunError(f"building the C runtime failed (make exit {proc.returncode}):\n{tail}")
            shutil.rmtree(out_dir, ignore_errors=True)
            os.replace(tmp, out_dir)
        except FileNotFoundError as e:
            raise RunError(f"building the C runtime failed: {e}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return lib


def library_path() -> Path:
    env = os.environ.get("AOT_RUNTIME_LIB")
    if env:
        return Path(env)
    return build_runtime()


@functools.lru_cache(maxsize=None)
def _load(path: str) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise RunError(f"cannot load the C runtime {path}: {e}") from None
    _declare(lib)
    abi = lib.aot_abi_version()
    if abi < ABI_VERSION:  # the ABI is append-only: a newer runtime serves this binding too
        raise RunError(f"C runtime {path} has ABI version {abi}, this binding needs {ABI_VERSION} or later")
    return lib


def load_library() -> ctypes.CDLL:
    """The C runtime, declared for ctypes (found or built on first use)."""
    return _load(str(library_path()))


# ---------------------------------------------------------------- Session


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: list[int]
    dtype: np.dtype

    @property
    def type(self) -> str:
        """onnxruntime-style type string, e.g. 'tensor(float)'."""
        return _ORT_TYPES.get(str(self.dtype), f"tensor({self.dtype})")


@dataclass(frozen=True)
class _Desc:
    info: TensorInfo
    code: int
    shape_arr: "ctypes.Array[ctypes.c_int64]"
    byte_size: int


def _message(err: _Error) -> str:
    return err.message.decode("utf-8", "replace")


class Session:
    """Runs one artifact; see the module docstring for threads and thread-safety."""

    def __init__(self, path_or_bytes: Union[str, os.PathLike, bytes, bytearray, memoryview], *,
                 threads: Optional[int] = None, max_memory_bytes: Optional[int] = None):
        """`max_memory_bytes`: the most the model may take (aot_model_options_t in
        aot_runtime.h: the file's bytes, manifest, code, weights and one arena), counted
        before each is allocated; over it, RunError naming what. None: no limit beyond the
        artifact's own (every section bounded by the manifest and the code)."""
        self._lib = load_library()
        self._model = _P()
        self._ctx = _P()
        self._lock = threading.Lock()
        err = _Error()
        options = None
        if max_memory_bytes is not None:
            if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int) or max_memory_bytes < 1:
                raise RunError(f"max_memory_bytes must be a positive integer, got {max_memory_bytes!r}")
            if self._lib.aot_abi_version() < OPTIONS_ABI_VERSION:
                raise RunError(f"max_memory_bytes needs C runtime ABI {OPTIONS_ABI_VERSION}, "
                               f"this one has {self._lib.aot_abi_version()}")
            options = ctypes.byref(_ModelOptions(ctypes.sizeof(_ModelOptions), 0, min(max_memory_bytes, 2**64 - 1)))
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            where = "<memory>"
            if options is None:
                st = self._lib.aot_model_open_memory(data, len(data), ctypes.byref(self._model), ctypes.byref(err))
            else:
                st = self._lib.aot_model_open_memory_with_options(data, len(data), options, ctypes.byref(self._model),
                                                                  ctypes.byref(err))
        else:
            where = os.fspath(path_or_bytes)
            if options is None:
                st = self._lib.aot_model_open_file(os.fsencode(where), ctypes.byref(self._model), ctypes.byref(err))
            else:
                st = self._lib.aot_model_open_file_with_options(os.fsencode(where), options,
                                                                ctypes.byref(self._model), ctypes.byref(err))
        if st != AOT_OK:
            cls = ArtifactError if st in _ARTIFACT_STATUSES else RunError
            raise cls(f"{where}: {_message(err)}")
        try:
            self._inputs = self._describe(self._lib.aot_model_input_count, self._lib.aot_model_input_info)
            self._outputs = self._describe(self._lib.aot_model_output_count, self._lib.aot_model_output_info)
            n = 1 if threads is None else int(threads)
            if n < 1:
                raise RunError(f"threads must be >= 1, got {threads}")
            opts = _ContextOptions(ctypes.sizeof(_ContextOptions), n)
            st = self._lib.aot_context_create(self._model, ctypes.byref(opts), ctypes.byref(self._ctx),
                                              ctypes.byref(err))
            if st != AOT_OK:
                raise RunError(f"cannot create a context: {_message(err)}")
        except BaseException:
            self.close()
            raise
        self._input_index = {d.info.name: i for i, d in enumerate(self._inputs)}
        self._output_index = {d.info.name: i for i, d in enumerate(self._outputs)}
        self.threads = n
        # Tensor descriptors built once: a run only fills in data pointers (under the lock).
        self._c_in = self._tensor_table(self._inputs)
        self._c_out = self._tensor_table(self._outputs)

    @staticmethod
    def _tensor_table(descs: list[_Desc]) -> ctypes.Array:
        table = (_Tensor * max(len(descs), 1))()
        for i, d in enumerate(descs):
            table[i] = _Tensor(d.code, len(d.info.shape), d.shape_arr, None, d.byte_size)
        return table

    def _describe(self, count_fn, info_fn) -> list[_Desc]:
        out: list[_Desc] = []
        err = _Error()
        for i in range(count_fn(self._model)):
            ti = _TensorInfo()
            if info_fn(self._model, i, ctypes.byref(ti), ctypes.byref(err)) != AOT_OK:
                raise RunError(_message(err))
            shape = [int(ti.shape[k]) for k in range(ti.rank)]
            if ti.dtype not in _DTYPES:
                raise RunError(f"tensor {ti.name!r}: unknown dtype code {ti.dtype}")
            dtype = _DTYPES[ti.dtype][0]
            arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            out.append(_Desc(TensorInfo(ti.name.decode("utf-8", "replace"), shape, dtype), ti.dtype, arr,
                             int(ti.byte_size)))
        return out

    # -- introspection (onnxruntime names)
    def get_inputs(self) -> list[TensorInfo]:
        return [d.info for d in self._inputs]

    def get_outputs(self) -> list[TensorInfo]:
        return [d.info for d in self._outputs]

    @property
    def model_name(self) -> str:
        self._check_open()
        return self._lib.aot_model_name(self._model).decode("utf-8", "replace")

    # -- running
    def _check_open(self) -> None:
        if not self._ctx:
            raise RunError("session is closed")

    def _prepare_input(self, desc: _Desc, value) -> np.ndarray:
        name = desc.info.name
        arr = np.asarray(value)
        want = desc.info.dtype
        if arr.dtype != want:
            if desc.code in _RAW_BITS and arr.dtype == _RAW_BITS[desc.code]:
                arr = arr.view(want)
            else:
                raise RunError(f"input {name!r}: expected dtype {_dtype_name(want, desc.code)}, got {arr.dtype}")
        if list(arr.shape) != desc.info.shape:
            raise RunError(f"input {name!r}: expected shape {_fmt_shape(desc.info.shape)}, "
                           f"got {_fmt_shape(arr.shape)}")
        return np.ascontiguousarray(arr)

    def run(self, output_names: Optional[Iterable[str]], feeds: Mapping[str, object]) -> list[np.ndarray]:
        """Run the model; return the requested outputs (all when None), in order."""
        self._check_open()
        if not isinstance(feeds, Mapping):
            raise RunError(f"feeds must be a dict of name -> array, got {type(feeds).__name__}")
        for name in feeds:
            if name not in self._input_index:
                known = ", ".join(repr(d.info.name) for d in self._inputs) or "none"
                raise RunError(f"unknown input {name!r} (model inputs: {known})")
        names = list(output_names) if output_names is not None else [d.info.name for d in self._outputs]
        for name in names:
            if name not in self._output_index:
                known = ", ".join(repr(d.info.name) for d in self._outputs) or "none"
                raise RunError(f"unknown output {name!r} (model outputs: {known})")
        arrays: list[np.ndarray] = []
        for d in self._inputs:
            if d.info.name not in feeds:
                raise RunError(f"missing input {d.info.name!r}")
            arrays.append(self._prepare_input(d, feeds[d.info.name]))
        outs = [np.empty(d.info.shape, dtype=d.info.dtype) for d in self._outputs]

        err = _Error()
        with self._lock:
            self._check_open()
            for slot, a in zip(self._c_in, arrays):
                slot.data = a.ctypes.data
            for slot, a in zip(self._c_out, outs):
                slot.data = a.ctypes.data
            st = self._lib.aot_run(self._ctx, self._c_in, len(arrays), self._c_out, len(outs), ctypes.byref(err))
        if st != AOT_OK:
            raise RunError(_message(err))
        return [outs[self._output_index[n]] for n in names]

    # -- lifetime
    def close(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            if getattr(self, "_ctx", None):
                self._lib.aot_context_destroy(self._ctx)
                self._ctx = _P()
            if getattr(self, "_model", None):
                self._lib.aot_model_close(self._model)
                self._model = _P()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _dtype_name(dtype: np.dtype, code: int) -> str:
    return _NAMES.get(code, str(dtype))


def _fmt_shape(shape) -> str:
    return "[" + ",".join(str(int(s)) for s in shape) + "]"
