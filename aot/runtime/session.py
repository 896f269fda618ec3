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

GPU sessions (a C runtime of ABI 4 and an artifact compiled for cuda)::

    s = Session("model.aot", device="cuda")         # or "cuda:1"; "cpu" is the default
    (y,) = s.run(None, {"x": x_numpy})              # numpy in, numpy out (copied in and out)
    (y,) = s.run(None, {"x": x_torch_cuda})         # CUDA tensor in place; y a DeviceArray
    s.run(None, {"x": x}, outputs={"y": y_cupy})    # written into y_cupy; returned as given

``Session(path_or_bytes, *, threads=None, max_memory_bytes=None, device="cpu",
cuda_graph=True)``: ``device`` is ``"cpu"``, ``"cuda"`` (GPU 0) or ``"cuda:N"``;
``session.device`` says which. ``cuda_graph=False`` launches the kernels one by one on
every run instead of replaying one CUDA graph of them (same outputs). A machine without
a CUDA driver, a missing GPU or an artifact without GPU code for it is a RunError with
the runtime's message ("no CUDA driver ...").

``run(output_names, feeds, *, outputs=None, stream=None)`` on a CUDA session:

- Host feeds only (numpy, or anything np.asarray takes, or a CPU DLPack tensor), no
  ``outputs``: the runtime copies the inputs in and the outputs out; numpy out.
- Any feed a CUDA tensor (``__dlpack_device__`` kDLCUDA: torch and CuPy tensors,
  DeviceArray): it is read in place, never copied; host feeds are uploaded first; the
  run goes through aot_run_device and every output is a DeviceArray, or the object
  ``outputs`` gives for it (a CUDA DLPack tensor or DeviceArray written in place).
  Device tensors must be on the session's GPU, of the input's dtype and shape, dense
  row-major and 16-byte aligned; anything else is a RunError naming the tensor.
- ``stream``: the caller's CUstream (an int, a torch stream's ``.cuda_stream`` or a
  CuPy stream's ``.ptr``) to order the run on; None: the session's own stream. Either
  is the stream handed to each producer's ``__dlpack__(stream=...)``, so the producer's
  pending work on its tensors comes first. The run has finished when ``run`` returns.

A CPU session refuses CUDA tensors (open it with device="cuda"). DeviceArrays belong to
their session's context, which lives as long as any of them does (aot/runtime/device_array.py).

Donated buffers (a model compiled with donations, ``aot-compile --donate past_keys=present_keys``
or inferred from such names; a C runtime of ABI 5): ``session.donations`` maps each donated
input to the output that takes over its buffer. A decode loop passes one array as both, and
the step updates it in place, copying nothing::

    past = np.zeros(cache_shape, np.float32)
    for step in range(steps):
        logits, past = s.run(["logits", "present_keys"], {"input_ids": ids, "position": pos,
                             "past_keys": past}, outputs={"present_keys": past})

- ``outputs=`` on a CPU session: numpy arrays to write outputs into (C-contiguous, writable,
  of the output's dtype and shape), returned as given. On a CUDA session, CUDA tensors, as
  above; the same DeviceArray or CUDA tensor as feed and output serves a decode loop there.
- An output may share memory with an input only as the very buffer of its donated input;
  anything else that overlaps is a RunError. A donated output given another buffer (or none)
  gets a copy of the input first, and the input's buffer is left as it was.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from dataclasses import dataclass
from collections.abc import Iterable, Mapping
from typing import Optional, Union

import numpy as np

from aot.errors import ArtifactError, RunError
from aot.ir.types import DType
from aot.runtime import dlpack
from aot.runtime.abi import (AOT_OK, ARTIFACT_STATUSES, CONTEXT_NO_CUDA_GRAPH, CONTEXT_OPTIONS_V1_SIZE,
                             CPU_VARIANT_ABI_VERSION, DEVICE_ABI_VERSION, DEVICE_CPU, DEVICE_CUDA, DONATION_ABI_VERSION,
                             OPTIONS_ABI_VERSION, CContextOptions, CError, CModelOptions, CTensor, CTensorInfo)
from aot.runtime.device_array import DeviceArray, numpy_dtype
from aot.runtime.library import load_library

_CUDA_DEVICE = re.compile(r"cuda(?::(\d{1,10}))?")
_CU_STREAM_LEGACY = 1  # the driver's handle for the legacy default stream (DLPack's stream 1 too)


def _raw_bits(dtype: DType) -> np.dtype | None:
    """The unsigned type whose arrays an input of `dtype` may also be given as (its bits)."""
    return np.dtype(f"uint{8 * dtype.itemsize}") if dtype.needs_ml_dtypes else None


def _ort_type(dtype: DType) -> str:
    """onnxruntime's type string, e.g. 'tensor(float)'."""
    return f"tensor({dtype.onnx_name.lower()})"


def _parse_device(device: object) -> tuple[int, int]:
    """"cpu" -> (DEVICE_CPU, -1); "cuda" -> (DEVICE_CUDA, 0); "cuda:N" -> (DEVICE_CUDA, N)."""
    if device == "cpu":
        return DEVICE_CPU, -1
    match = _CUDA_DEVICE.fullmatch(device) if isinstance(device, str) else None
    if match is None or int(match.group(1) or 0) > 2**31 - 1:
        raise RunError(f"device must be 'cpu', 'cuda' or 'cuda:N' (N a GPU ordinal), got {device!r}")
    return DEVICE_CUDA, int(match.group(1) or 0)


def _stream_handle(stream: object) -> Optional[int]:
    """A CUstream as an int: an int, a torch stream's .cuda_stream, a CuPy stream's .ptr.
    0, the legacy default stream, is the driver's CU_STREAM_LEGACY (NULL would mean the
    session's own stream to aot_run_device)."""
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    if isinstance(stream, bool) or not isinstance(stream, int) or not 0 <= stream < 2**64:
        raise RunError(f"stream must be a CUstream (an int, a torch stream or a CuPy stream), got {stream!r}")
    return stream or _CU_STREAM_LEGACY


def _dlpack_device(value: object) -> Optional[tuple[int, int]]:
    """`value.__dlpack_device__()` for a DLPack producer other than a numpy array, else None."""
    if isinstance(value, np.ndarray) or not (hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__")):
        return None
    kind, ordinal = value.__dlpack_device__()
    return int(kind), int(ordinal)


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


class _Native:
    """A Session's model and context in the runtime, and the device memory allocated on
    that context (a DeviceArray's `DeviceMemory`). The runtime frees device memory through
    a live context before the model closes, so once the Session is closed, the context
    and model go with the last DeviceArray."""

    def __init__(self, lib: ctypes.CDLL):
        self.lib = lib
        self.model = ctypes.c_void_p()
        self.ctx = ctypes.c_void_p()
        # re-entrant: a DeviceArray may be collected (and freed) on a thread that holds it
        self.lock = threading.RLock()
        self.ordinal = -1
        self.closed = False
        self.allocations = 0

    def _call(self, fn, *args) -> None:
        err = CError()
        with self.lock:
            if not self.ctx:
                raise RunError("session is closed")
            st = fn(self.ctx, *args, ctypes.byref(err))
        if st != AOT_OK:
            raise RunError(f"{fn.__name__}: {err.text()}")

    def alloc(self, nbytes: int) -> int:
        address = ctypes.c_uint64()
        with self.lock:
            if self.closed:
                raise RunError("session is closed")
            self._call(self.lib.aot_device_alloc, nbytes, ctypes.byref(address))
            self.allocations += 1
        return address.value

    def free(self, address: int) -> None:
        with self.lock:
            self.allocations -= 1
            try:
                self._call(self.lib.aot_device_free, address)
            finally:
                if self.closed and not self.allocations:
                    self._destroy()

    def upload(self, address: int, host: int, nbytes: int) -> None:
        self._call(self.lib.aot_device_upload, address, host, nbytes)

    def download(self, host: int, address: int, nbytes: int) -> None:
        self._call(self.lib.aot_device_download, host, address, nbytes)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if not self.allocations:
                self._destroy()

    def _destroy(self) -> None:
        if self.ctx:
            self.lib.aot_context_destroy(self.ctx)
            self.ctx = ctypes.c_void_p()
        if self.model:
            self.lib.aot_model_close(self.model)
            self.model = ctypes.c_void_p()


class Session:
    """Runs one artifact; see the module docstring for threads, thread-safety and GPUs."""

    def __init__(self, path_or_bytes: Union[str, os.PathLike, bytes, bytearray, memoryview], *,
                 threads: Optional[int] = None, max_memory_bytes: Optional[int] = None,
                 device: str = "cpu", cuda_graph: bool = True):
        """`max_memory_bytes`: the most the model may take (aot_model_options_t in
        aot_runtime.h: the file's bytes, manifest, code, weights and one arena), counted
        before each is allocated; over it, RunError naming what. None: no limit beyond the
        artifact's own (every section bounded by the manifest and the code); device memory
        is not counted. `device`, `cuda_graph`: see the module docstring."""
        kind, ordinal = _parse_device(device)
        self._lib = load_library()
        self._native = _Native(self._lib)
        abi = self._lib.aot_abi_version()
        if kind == DEVICE_CUDA and abi < DEVICE_ABI_VERSION:
            raise RunError(f"device={device!r} needs C runtime ABI {DEVICE_ABI_VERSION}, this one has {abi}")
        err = CError()
        options = None
        if max_memory_bytes is not None:
            if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int) or max_memory_bytes < 1:
                raise RunError(f"max_memory_bytes must be a positive integer, got {max_memory_bytes!r}")
            if abi < OPTIONS_ABI_VERSION:
                raise RunError(f"max_memory_bytes needs C runtime ABI {OPTIONS_ABI_VERSION}, this one has {abi}")
            options = ctypes.byref(CModelOptions(ctypes.sizeof(CModelOptions), 0, min(max_memory_bytes, 2**64 - 1)))
        model = self._native.model
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            data = bytes(path_or_bytes)
            where = "<memory>"
            if options is None:
                st = self._lib.aot_model_open_memory(data, len(data), ctypes.byref(model), ctypes.byref(err))
            else:
                st = self._lib.aot_model_open_memory_with_options(data, len(data), options, ctypes.byref(model),
                                                                  ctypes.byref(err))
        else:
            where = os.fspath(path_or_bytes)
            if options is None:
                st = self._lib.aot_model_open_file(os.fsencode(where), ctypes.byref(model), ctypes.byref(err))
            else:
                st = self._lib.aot_model_open_file_with_options(os.fsencode(where), options, ctypes.byref(model),
                                                                ctypes.byref(err))
        if st != AOT_OK:
            cls = ArtifactError if st in ARTIFACT_STATUSES else RunError
            raise cls(f"{where}: {err.text()}")
        try:
            self._inputs = self._describe(self._lib.aot_model_input_count, self._lib.aot_model_input_info)
            self._outputs = self._describe(self._lib.aot_model_output_count, self._lib.aot_model_output_info)
            self._donated = self._donations(abi)
            n = 1 if threads is None else int(threads)
            if n < 1:
                raise RunError(f"threads must be >= 1, got {threads}")
            # an older runtime reads only what its struct_size covers: give it only that
            size = ctypes.sizeof(CContextOptions) if abi >= DEVICE_ABI_VERSION else CONTEXT_OPTIONS_V1_SIZE
            flags = 0 if cuda_graph else CONTEXT_NO_CUDA_GRAPH
            opts = CContextOptions(size, n, kind, max(ordinal, 0), flags, 0)
            st = self._lib.aot_context_create(model, ctypes.byref(opts), ctypes.byref(self._native.ctx),
                                              ctypes.byref(err))
            if st != AOT_OK:
                raise RunError(f"cannot create a context: {err.text()}")
            self._cuda_stream: Optional[int] = None
            if kind == DEVICE_CUDA:
                self._open_cuda(ordinal)
        except BaseException:
            self.close()
            raise
        self._input_index = {d.info.name: i for i, d in enumerate(self._inputs)}
        self._output_index = {d.info.name: i for i, d in enumerate(self._outputs)}
        self.threads = n
        self.cuda_graph = bool(cuda_graph) if kind == DEVICE_CUDA else False
        # Tensor descriptors built once: a run only fills in data pointers (under the lock).
        self._c_in = self._tensor_table(self._inputs)
        self._c_out = self._tensor_table(self._outputs)
        # what a plain run checks its feeds against, and makes its outputs of
        self._input_specs = [(d.info.name, d.info.dtype, tuple(d.info.shape)) for d in self._inputs]
        self._output_specs = [(tuple(d.info.shape), d.info.dtype) for d in self._outputs]

    def _open_cuda(self, ordinal: int) -> None:
        got = ctypes.c_int32(-1)
        kind = self._lib.aot_context_device(self._native.ctx, ctypes.byref(got))
        if kind != DEVICE_CUDA or got.value != ordinal:
            raise RunError(f"asked for a context on cuda:{ordinal}, the runtime made one on "
                           f"{'cuda' if kind == DEVICE_CUDA else 'cpu'}:{got.value}")
        self._native.ordinal = ordinal
        stream = self._lib.aot_context_cuda_stream(self._native.ctx)
        if not stream:
            raise RunError(f"the runtime's CUDA context on cuda:{ordinal} has no stream")
        self._cuda_stream = int(stream)

    @staticmethod
    def _tensor_table(descs: list[_Desc]) -> ctypes.Array:
        table = (CTensor * max(len(descs), 1))()
        for i, d in enumerate(descs):
            table[i] = CTensor(d.info.element.abi_code, len(d.info.shape), d.shape_arr, None, d.byte_size)
        return table

    def _donations(self, abi: int) -> dict[int, int]:
        """output index -> the index of the input it takes over (none before ABI 5: a model with
        donations then fails to open, its code description being one that runtime cannot read)."""
        if abi < DONATION_ABI_VERSION:
            return {}
        model = self._native.model
        pairs: dict[int, int] = {}
        err = CError()
        for i in range(self._lib.aot_model_donation_count(model)):
            j, k = ctypes.c_uint32(), ctypes.c_uint32()
            if self._lib.aot_model_donation(model, i, ctypes.byref(j), ctypes.byref(k), ctypes.byref(err)) != AOT_OK:
                raise RunError(err.text())
            pairs[k.value] = j.value
        return pairs

    def _describe(self, count_fn, info_fn) -> list[_Desc]:
        out: list[_Desc] = []
        err = CError()
        model = self._native.model
        for i in range(count_fn(model)):
            ti = CTensorInfo()
            if info_fn(model, i, ctypes.byref(ti), ctypes.byref(err)) != AOT_OK:
                raise RunError(err.text())
            shape = [int(ti.shape[k]) for k in range(ti.rank)]
            element = DType.from_abi_code(ti.dtype)
            if element is None:
                raise RunError(f"tensor {ti.name!r}: unknown dtype code {ti.dtype}")
            arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            info = TensorInfo(ti.name.decode("utf-8", "replace"), shape, numpy_dtype(element), element)
            out.append(_Desc(info, arr, int(ti.byte_size)))
        return out

    # -- introspection (onnxruntime names)
    def get_inputs(self) -> list[TensorInfo]:
        return [d.info for d in self._inputs]

    def get_outputs(self) -> list[TensorInfo]:
        return [d.info for d in self._outputs]

    @property
    def donations(self) -> dict[str, str]:
        """{donated input name: the output that takes over its buffer}; see the module docstring."""
        return {self._inputs[j].info.name: self._outputs[k].info.name for k, j in sorted(self._donated.items())}

    @property
    def model_name(self) -> str:
        self._check_open()
        return self._lib.aot_model_name(self._native.model).decode("utf-8", "replace")

    @property
    def cpu_variant(self) -> str:
        """The CPU code variant the runtime loaded ("x86-64-v4"): the artifact's first that this
        CPU runs, or the one the environment variable AOT_CPU_VARIANT names; "" for a GPU-only
        artifact (and where the C runtime is older than ABI 6)."""
        self._check_open()
        if self._lib.aot_abi_version() < CPU_VARIANT_ABI_VERSION:
            return ""
        return self._lib.aot_model_cpu_variant(self._native.model).decode("utf-8", "replace")

    @property
    def device(self) -> str:
        """"cpu" or "cuda:N"."""
        return "cpu" if self._cuda_stream is None else f"cuda:{self._native.ordinal}"

    def _device_memory(self) -> _Native:
        """Where this session's DeviceArrays live (DeviceArray.empty / from_numpy)."""
        self._check_open()
        if self._cuda_stream is None:
            raise RunError("a DeviceArray needs a CUDA session (Session(..., device=\"cuda\")); "
                           "this one runs on the CPU")
        return self._native

    # -- running
    def _check_open(self) -> None:
        if self._native.closed or not self._native.ctx:
            raise RunError("session is closed")

    def _prepare_input(self, desc: _Desc, value) -> np.ndarray:
        name = desc.info.name
        device = _dlpack_device(value)
        if device is not None and device[0] not in (dlpack.KDL_CPU, dlpack.KDL_CUDA_HOST):
            raise RunError(f"input {name!r} is on {dlpack.describe_device(device)}, which this session cannot read")
        # a CPU DLPack tensor that numpy cannot take as an array (no __array__): through DLPack
        arr = np.from_dlpack(value) if device is not None and not hasattr(value, "__array__") else np.asarray(value)
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

    def run(self, output_names: Optional[Iterable[str]], feeds: Mapping[str, object], *,
            outputs: Optional[Mapping[str, object]] = None, stream: object = None) -> list:
        """Run the model; return the requested outputs (all when None), in order: numpy
        arrays, or on the device path (see the module docstring) DeviceArrays and the
        objects `outputs` gave."""
        self._check_open()
        plain = (self._plain_arrays(feeds) if output_names is None and outputs is None and stream is None
                 and self._cuda_stream is None and type(feeds) is dict else None)
        if plain is not None:  # the common run: nothing to check beyond what _plain_arrays did
            return self._run_host(plain, [np.empty(shape, dtype=dtype) for shape, dtype in self._output_specs])
        if not isinstance(feeds, Mapping):
            raise RunError(f"feeds must be a dict of name -> array, got {type(feeds).__name__}")
        if outputs is not None and not isinstance(outputs, Mapping):
            raise RunError(f"outputs must be a dict of output name -> array to write, got {type(outputs).__name__}")
        given = dict(outputs or {})
        for name in feeds:
            if name not in self._input_index:
                known = ", ".join(repr(d.info.name) for d in self._inputs) or "none"
                raise RunError(f"unknown input {name!r} (model inputs: {known})")
        names = list(output_names) if output_names is not None else [d.info.name for d in self._outputs]
        for name in [*names, *given]:
            if name not in self._output_index:
                known = ", ".join(repr(d.info.name) for d in self._outputs) or "none"
                raise RunError(f"unknown output {name!r} (model outputs: {known})")
        for d in self._inputs:
            if d.info.name not in feeds:
                raise RunError(f"missing input {d.info.name!r}")
        cuda_feed = next((name for name, value in feeds.items() if _is_cuda(value)), None)
        if self._cuda_stream is None:
            if cuda_feed is not None:
                device = dlpack.describe_device(_dlpack_device(feeds[cuda_feed]) or (dlpack.KDL_CUDA, 0))
                raise RunError(f"input {cuda_feed!r} is a CUDA tensor ({device}) and this session runs on the "
                               "CPU: open it with Session(..., device=\"cuda\") to pass device tensors")
            if stream is not None:
                raise RunError("stream= is for CUDA sessions: open this one with Session(..., device=\"cuda\")")
        elif cuda_feed is not None or given:
            return self._run_device(names, feeds, given, stream)
        arrays = [self._prepare_input(d, feeds[d.info.name]) for d in self._inputs]
        outs = [np.empty(d.info.shape, dtype=d.info.dtype) if d.info.name not in given
                else self._host_output(d, given[d.info.name]) for d in self._outputs]
        self._run_host(arrays, outs)
        return [given.get(n, outs[self._output_index[n]]) for n in names]

    def _plain_arrays(self, feeds: dict) -> Optional[list[np.ndarray]]:
        """The feeds as they are where they are exactly the inputs, each a C-contiguous numpy
        array of its input's dtype and shape (what _prepare_input would pass on unchanged); else
        None, and the run takes the path that checks, converts and names what is wrong."""
        if len(feeds) != len(self._input_specs):
            return None
        arrays = []
        for name, dtype, shape in self._input_specs:
            a = feeds.get(name)
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape or not a.flags.c_contiguous:
                return None
            arrays.append(a)
        return arrays

    def _run_host(self, arrays: list[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        """aot_run on host arrays (checked, in manifest order); returns `outs`, written."""
        err = CError()
        with self._native.lock:
            self._check_open()
            for slot, a in zip(self._c_in, arrays):
                slot.data = _address(a)
            for slot, a in zip(self._c_out, outs):
                slot.data = _address(a)
            st = self._lib.aot_run(self._native.ctx, self._c_in, len(arrays), self._c_out, len(outs),
                                   ctypes.byref(err))
        if st != AOT_OK:
            raise RunError(err.text())
        return outs

    def _host_output(self, desc: _Desc, value: object) -> np.ndarray:
        """The numpy array `outputs=` gives for output `desc` on a CPU session, checked; the run
        writes it in place (a view of it, for an output of raw bits)."""
        name = desc.info.name
        if _is_cuda(value) or not isinstance(value, np.ndarray):
            raise RunError(f"output {name!r}: outputs= on a CPU session takes numpy arrays, got {type(value).__name__}")
        arr = value
        if arr.dtype != desc.info.dtype:
            bits = _raw_bits(desc.info.element)
            if bits is None or arr.dtype != bits:
                raise RunError(f"output {name!r}: expected dtype {desc.info.element.manifest_name}, got {arr.dtype}")
            arr = arr.view(desc.info.dtype)
        if list(arr.shape) != desc.info.shape:
            raise RunError(f"output {name!r}: expected shape {_fmt_shape(desc.info.shape)}, got {_fmt_shape(arr.shape)}")
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            raise RunError(f"output {name!r}: the array must be C-contiguous and writable")
        return arr

    # -- the device path: aot_run_device on device addresses
    def _run_device(self, names: list[str], feeds: Mapping[str, object], given: dict[str, object],
                    stream: object) -> list:
        run_stream = _stream_handle(stream)
        producer_stream = self._cuda_stream if run_stream is None else run_stream
        imported: list[dlpack.ImportedTensor] = []
        keep: list[DeviceArray] = []  # uploads, alive until the run is over
        try:
            spans: list[tuple[str, int, int]] = []  # (what, address, bytes) of inputs, then given outputs
            in_addresses = []
            for d in self._inputs:
                address = self._device_operand(d, feeds[d.info.name], "input", producer_stream, imported, keep)
                spans.append((f"input {d.info.name!r}", address, d.byte_size))
                in_addresses.append(address)
            results: dict[str, object] = {}
            out_addresses = []
            for d in self._outputs:
                value = given.get(d.info.name)
                if value is None:
                    value = DeviceArray.empty(self._native, d.info.shape, d.info.element)
                    address = value.data_ptr
                else:
                    address = self._device_operand(d, value, "output", producer_stream, imported, keep)
                    k = self._output_index[d.info.name]
                    donor = f"input {self._inputs[self._donated[k]].info.name!r}" if k in self._donated else None
                    _check_apart(f"output {d.info.name!r}", address, d.byte_size, spans, donor)
                    spans.append((f"output {d.info.name!r}", address, d.byte_size))
                results[d.info.name] = value
                out_addresses.append(address)
            err = CError()
            with self._native.lock:
                self._check_open()
                for slot, address in zip(self._c_in, in_addresses):
                    slot.data = address
                for slot, address in zip(self._c_out, out_addresses):
                    slot.data = address
                st = self._lib.aot_run_device(self._native.ctx, self._c_in, len(in_addresses), self._c_out,
                                              len(out_addresses), run_stream, ctypes.byref(err))
            if st != AOT_OK:
                raise RunError(err.text())
        finally:
            for tensor in imported:
                tensor.release()
        return [results[n] for n in names]

    def _device_operand(self, desc: _Desc, value: object, kind: str, stream: Optional[int],
                        imported: list[dlpack.ImportedTensor], keep: list[DeviceArray]) -> int:
        """The device address of `value` as the input or output `desc`, checked: a DeviceArray
        or a CUDA DLPack tensor in place, a host input uploaded."""
        what = f"{kind} {desc.info.name!r}"
        if isinstance(value, DeviceArray):
            # ours are dense and 256-byte aligned: only a mismatch needs check()'s message
            if (value.ordinal == self._native.ordinal and value.element is desc.info.element
                    and list(value.shape) == desc.info.shape):
                return value.data_ptr
            tensor = dlpack.ImportedTensor(value.data_ptr, value.__dlpack_device__(), dlpack.dl_dtype(value.element),
                                           value.shape, None, False)
        elif _is_cuda(value):
            tensor = dlpack.take(value, what, stream)
            imported.append(tensor)
        elif kind == "output":
            raise RunError(f"{what}: outputs= takes CUDA tensors to write into (a DeviceArray, or a DLPack "
                           f"tensor on the GPU), got {type(value).__name__}")
        else:
            upload = DeviceArray.from_numpy(self._native, self._prepare_input(desc, value))
            keep.append(upload)
            return upload.data_ptr
        dlpack.check(tensor, what, device=(dlpack.KDL_CUDA, self._native.ordinal), dtype=desc.info.element,
                     shape=desc.info.shape, writable=kind == "output")
        return tensor.address

    # -- lifetime
    def close(self) -> None:
        """Close the session; its context and model go now, or with its last DeviceArray."""
        native = getattr(self, "_native", None)
        if native is not None:
            native.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _address(a: np.ndarray) -> int:
    """The address of `a`'s first element: through the buffer protocol where the array is
    writable, not empty and of a numpy built-in dtype (0.3 us; `a.ctypes.data` builds a ctypes
    helper object, 1 us, twice per run of a one-input model), else through `a.ctypes`: the
    buffer protocol has no format for a user dtype such as ml_dtypes' bfloat16."""
    if a.flags.writeable and a.nbytes and a.dtype.isbuiltin == 1:
        return ctypes.addressof(ctypes.c_byte.from_buffer(a))
    return a.ctypes.data


def _is_cuda(value: object) -> bool:
    if isinstance(value, DeviceArray):
        return True
    device = _dlpack_device(value)
    return device is not None and device[0] == dlpack.KDL_CUDA


def _check_apart(what: str, address: int, nbytes: int, spans: list[tuple[str, int, int]],
                 donor: Optional[str] = None) -> None:
    """An output must overlap no input and no other output (aot_run_device's contract), but
    that a donated output may be its input's very buffer (`donor`: that input's span name)."""
    for other, start, size in spans:
        if other == donor and start == address:
            continue
        if nbytes and size and address < start + size and start < address + nbytes:
            raise RunError(f"{what} overlaps {other}: outputs must not share memory with the inputs "
                           "or with each other (but the buffer of a donated input, whole)")


def _fmt_shape(shape) -> str:
    return "[" + ",".join(str(int(s)) for s in shape) + "]"
