"""Session: run an artifact through the C runtime, onnxruntime-style.

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
import os
import threading
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Union

import numpy as np

from aot.errors import ArtifactError, RunError
from aot.ir.types import DType
from aot.runtime.abi import (AOT_OK, ARTIFACT_STATUSES, OPTIONS_ABI_VERSION, CContextOptions, CError,
                             CModelOptions, CTensor, CTensorInfo)
from aot.runtime.library import load_library


def _numpy_dtype(dtype: DType) -> np.dtype:
    """What a Session gives and takes for `dtype`: without ml_dtypes, bfloat16 and float8
    tensors are arrays of their raw bits (uint16, uint8)."""
    try:
        return dtype.to_numpy()
    except ImportError:  # pragma: no cover - ml_dtypes ships with onnx
        return np.dtype(f"uint{8 * dtype.itemsize}")


def _raw_bits(dtype: DType) -> np.dtype | None:
    """The unsigned type whose arrays an input of `dtype` may also be given as (its bits)."""
    return np.dtype(f"uint{8 * dtype.itemsize}") if dtype.needs_ml_dtypes else None


def _ort_type(dtype: DType) -> str:
    """onnxruntime's type string, e.g. 'tensor(float)'."""
    return f"tensor({dtype.onnx_name.lower()})"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: list[int]
    dtype: np.dtype
    element: DType  # the artifact's dtype; `dtype` is its numpy form

    @property
    def type(self) -> str:
        """onnxruntime-style type string, e.g. 'tensor(float)'."""
        return _ort_type(self.element)


@dataclass(frozen=True)
class _Desc:
    info: TensorInfo
    shape_arr: "ctypes.Array[ctypes.c_int64]"
    byte_size: int


class Session:
    """Runs one artifact; see the module docstring for threads and thread-safety."""

    def __init__(self, path_or_bytes: Union[str, os.PathLike, bytes, bytearray, memoryview], *,
                 threads: Optional[int] = None, max_memory_bytes: Optional[int] = None):
        """`max_memory_bytes`: the most the model may take (aot_model_options_t in
        aot_runtime.h: the file's bytes, manifest, code, weights and one arena), counted
        before each is allocated; over it, RunError naming what. None: no limit beyond the
        artifact's own (every section bounded by the manifest and the code)."""
        self._lib = load_library()
        self._model = ctypes.c_void_p()
        self._ctx = ctypes.c_void_p()
        self._lock = threading.Lock()
        err = CError()
        options = None
        if max_memory_bytes is not None:
            if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int) or max_memory_bytes < 1:
                raise RunError(f"max_memory_bytes must be a positive integer, got {max_memory_bytes!r}")
            if self._lib.aot_abi_version() < OPTIONS_ABI_VERSION:
                raise RunError(f"max_memory_bytes needs C runtime ABI {OPTIONS_ABI_VERSION}, "
                               f"this one has {self._lib.aot_abi_version()}")
            options = ctypes.byref(CModelOptions(ctypes.sizeof(CModelOptions), 0, min(max_memory_bytes, 2**64 - 1)))
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
            cls = ArtifactError if st in ARTIFACT_STATUSES else RunError
            raise cls(f"{where}: {err.text()}")
        try:
            self._inputs = self._describe(self._lib.aot_model_input_count, self._lib.aot_model_input_info)
            self._outputs = self._describe(self._lib.aot_model_output_count, self._lib.aot_model_output_info)
            n = 1 if threads is None else int(threads)
            if n < 1:
                raise RunError(f"threads must be >= 1, got {threads}")
            opts = CContextOptions(ctypes.sizeof(CContextOptions), n)
            st = self._lib.aot_context_create(self._model, ctypes.byref(opts), ctypes.byref(self._ctx),
                                              ctypes.byref(err))
            if st != AOT_OK:
                raise RunError(f"cannot create a context: {err.text()}")
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
        table = (CTensor * max(len(descs), 1))()
        for i, d in enumerate(descs):
            table[i] = CTensor(d.info.element.abi_code, len(d.info.shape), d.shape_arr, None, d.byte_size)
        return table

    def _describe(self, count_fn, info_fn) -> list[_Desc]:
        out: list[_Desc] = []
        err = CError()
        for i in range(count_fn(self._model)):
            ti = CTensorInfo()
            if info_fn(self._model, i, ctypes.byref(ti), ctypes.byref(err)) != AOT_OK:
                raise RunError(err.text())
            shape = [int(ti.shape[k]) for k in range(ti.rank)]
            element = DType.from_abi_code(ti.dtype)
            if element is None:
                raise RunError(f"tensor {ti.name!r}: unknown dtype code {ti.dtype}")
            arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            info = TensorInfo(ti.name.decode("utf-8", "replace"), shape, _numpy_dtype(element), element)
            out.append(_Desc(info, arr, int(ti.byte_size)))
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
            bits = _raw_bits(desc.info.element)
            if bits is not None and arr.dtype == bits:  # a dtype compares equal to None when it is float64
                arr = arr.view(want)
            else:
                raise RunError(f"input {name!r}: expected dtype {desc.info.element.manifest_name}, got {arr.dtype}")
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

        err = CError()
        with self._lock:
            self._check_open()
            for slot, a in zip(self._c_in, arrays):
                slot.data = a.ctypes.data
            for slot, a in zip(self._c_out, outs):
                slot.data = a.ctypes.data
            st = self._lib.aot_run(self._ctx, self._c_in, len(arrays), self._c_out, len(outs), ctypes.byref(err))
        if st != AOT_OK:
            raise RunError(err.text())
        return [outs[self._output_index[n]] for n in names]

    # -- lifetime
    def close(self) -> None:
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            if getattr(self, "_ctx", None):
                self._lib.aot_context_destroy(self._ctx)
                self._ctx = ctypes.c_void_p()
            if getattr(self, "_model", None):
                self._lib.aot_model_close(self._model)
                self._model = ctypes.c_void_p()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _fmt_shape(shape) -> str:
    return "[" + ",".join(str(int(s)) for s in shape) + "]"
