"""The test stand-in for libcuda.so.1 (runtime_c/tests/fake_cuda.c), for tests without a GPU.

    driver = fake_cuda_driver()            # built once per source hash, cached like the runtime
    fake_cuda_env(monkeypatch, host_dir)   # the runtime opens the stand-in; its kernels in host_dir
    with fake_cuda_env(None, host_dir, devices=2, fail="cuLaunchKernel:1=719"):
        ...
    fake_cuda_stat("cuGraphLaunch"), fake_cuda_last_rejection()

Host code for an artifact's modules: aot.codegen.nvptx.host_library.artifact_host_libraries.

The stand-in reads its settings from the environment at every call that uses them (never
once at load: the runtime dlopens it once per process, and tests change them between
runs), so fake_cuda_env may change them at any time. Settings, as keyword arguments:
devices (AOT_FAKE_CUDA_DEVICES, default 1), sm (AOT_FAKE_CUDA_SM, "90"), memory
(AOT_FAKE_CUDA_MEMORY, bytes per device, 80 GiB), fail (AOT_FAKE_CUDA_FAIL,
"cuSymbol:N=CODE,..."), verbose (AOT_FAKE_CUDA_VERBOSE: every rejection on stderr).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from aot.runtime.library import RUNTIME_DIR, build_cached

SOURCES = ("Makefile", "src/cuda_api.h", "tests/fake_cuda.c", "tests/fake_cuda.h")
SETTINGS = {"devices": "AOT_FAKE_CUDA_DEVICES", "sm": "AOT_FAKE_CUDA_SM", "memory": "AOT_FAKE_CUDA_MEMORY",
            "fail": "AOT_FAKE_CUDA_FAIL", "verbose": "AOT_FAKE_CUDA_VERBOSE"}


def _source_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def fake_cuda_driver(root: Path = RUNTIME_DIR) -> Path:
    """The stand-in's libcuda.so.1, built by `make fake-cuda` into the cache (once per hash of its
    sources), as aot/runtime/library.py builds the runtime."""
    return build_cached(root, "fake-cuda", f"fake-cuda-{_source_hash(root)}", "fake_cuda/libcuda.so.1",
                        "the stand-in CUDA driver")


@functools.lru_cache(maxsize=None)
def _library(path: str) -> ctypes.CDLL:
    """The stand-in as loaded in this process: the runtime's dlopen of the same path gets the same copy."""
    lib = ctypes.CDLL(path)
    lib.aot_fake_cuda_stat.restype = ctypes.c_uint64
    lib.aot_fake_cuda_stat.argtypes = [ctypes.c_char_p]
    lib.aot_fake_cuda_reset_faults.restype = None
    lib.aot_fake_cuda_reset_faults.argtypes = []
    lib.aot_fake_cuda_last_rejection.restype = ctypes.c_size_t
    lib.aot_fake_cuda_last_rejection.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def fake_cuda_library() -> ctypes.CDLL:
    """The stand-in loaded through ctypes (for tests that call the driver API themselves)."""
    return _library(str(fake_cuda_driver()))


def fake_cuda_stat(what: str) -> int:
    """A counter of the stand-in (fake_cuda.h): calls of an entry point by name ("cuLaunchKernel"),
    "live_allocations", "live_modules", "live_functions", "live_streams", "live_graphs", "live_execs",
    "primary_retains", "used_bytes", "kernel_runs", "broken_contexts", "destroyed_with_context"."""
    value = fake_cuda_library().aot_fake_cuda_stat(what.encode())
    if value == (1 << 64) - 1:
        raise KeyError(f"the stand-in CUDA driver has no counter {what!r}")
    return int(value)


def fake_cuda_last_rejection() -> str:
    """Why the stand-in's last failing call failed ("cuLaunchKernel: aot_kernel_0 launched with ...")."""
    text = ctypes.create_string_buffer(1024)
    fake_cuda_library().aot_fake_cuda_last_rejection(text, len(text))
    return text.value.decode(errors="replace")


class fake_cuda_env:  # noqa: N801 - used as a function
    """Point the runtime at the stand-in (AOT_CUDA_DRIVER) with its kernels in `host_dir`
    (AOT_FAKE_CUDA_HOST_DIR) and `settings` (module docstring; the ones not given are unset).
    It takes effect when called, through `monkeypatch` where one is given (undone at the test's
    teardown), so `fake_cuda_env(monkeypatch, folder)` alone serves a fixture; as a context
    manager it also puts the previous values back at exit. The AOT_FAKE_CUDA_FAIL call counts
    restart. `driver` is the stand-in's path."""

    def __init__(self, monkeypatch: Any | None, host_dir: str | os.PathLike, **settings: object):
        unknown = sorted(set(settings) - set(SETTINGS))
        if unknown:
            raise TypeError(f"unknown stand-in settings {unknown}; known: {sorted(SETTINGS)}")
        self.driver = fake_cuda_driver()
        values: dict[str, str | None] = {"AOT_CUDA_DRIVER": str(self.driver),
                                         "AOT_FAKE_CUDA_HOST_DIR": str(host_dir)}
        for name, variable in SETTINGS.items():
            value = settings.get(name)
            values[variable] = None if value is None or value is False else "1" if value is True else str(value)
        self._monkeypatch = monkeypatch
        self._previous = {name: os.environ.get(name) for name in values}
        self._apply(values)
        _library(str(self.driver)).aot_fake_cuda_reset_faults()

    def _apply(self, values: dict[str, str | None]) -> None:
        for name, value in values.items():
            if self._monkeypatch is not None:
                if value is None:
                    self._monkeypatch.delenv(name, raising=False)
                else:
                    self._monkeypatch.setenv(name, value)
            elif value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def __enter__(self) -> Path:
        return self.driver

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._apply(self._previous)
