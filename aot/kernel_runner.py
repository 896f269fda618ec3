"""An artifact's CPU code loaded into this process with ctypes, to run whole or kernel by kernel.

For tools, not for serving: `aot verify` bisects a mismatch to the first kernel
whose result diverges, the kernel profiler times kernels one by one. The C runtime
(aot.runtime.session.Session) is what runs artifacts; this skips its thread pool and its
run-time checks, and the host must be able to run the code's CPU.

    code = load_code(artifact_bytes, feeds)      # feeds: one array per model input, in order
    code.run_entry()                             # the whole model
    code.run_kernel(i)                           # kernel i over all its work items
    code.read(plan.slices[name], value_type)     # a materialized value, as numpy
"""
from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aot.artifact import read_artifact
from aot.errors import RunError
from aot.feeds import manifest_specs, seeded_inputs


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed uint8 buffer whose data starts on a 64-byte boundary (arena and weights alignment)."""
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes + 64]


@dataclass
class LoadedCode:
    """`args` is what the entry and every kernel take first (inputs, outputs, arena, weights)."""

    manifest: dict[str, Any]  # annotated with the tooling section (kernels' ops)
    lib: ctypes.CDLL
    args: tuple[Any, ...]
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    arena: np.ndarray
    weights: np.ndarray

    def run_entry(self) -> None:
        self.lib.aot_model_entry(*self.args)

    def run_kernel(self, index: int) -> None:
        kernel = self.manifest["kernels"][index]
        getattr(self.lib, kernel["symbol"])(*self.args, ctypes.c_int64(0), ctypes.c_int64(kernel["work"]))

    def read(self, kind: str, index: int, offset: int, size: int, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
        """A copy of the value stored at (kind, index, offset, size), e.g. a plan Slice's fields."""
        if kind == "input":
            raw = self.inputs[index].reshape(-1).view(np.uint8)
        elif kind == "output":
            raw = self.outputs[index].reshape(-1).view(np.uint8)
        elif kind == "arena":
            raw = self.arena
        else:
            raw = self.weights
        return raw[offset:offset + size].view(dtype).reshape(tuple(shape)).copy()


def load_code(artifact: bytes | Path, inputs: Sequence[np.ndarray] | None = None, seed: int = 0) -> LoadedCode:
    """Load the artifact's CPU code; `inputs` (in manifest order) default to aot verify's seeded inputs."""
    parsed = read_artifact(artifact if isinstance(artifact, Path) else bytes(artifact))
    manifest = parsed.annotated
    section = manifest["cpu"][0]["section"]
    fd, so_path = tempfile.mkstemp(suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(parsed.sections[section])
    try:
        lib = ctypes.CDLL(so_path)
    except OSError as err:
        raise RunError(f"cannot load the artifact's CPU code ({manifest['cpu'][0].get('cpu', '?')}): {err}") from None
    finally:
        os.unlink(so_path)
    if inputs is None:
        specs = manifest_specs(manifest["inputs"])
        feeds, _ = seeded_inputs(specs, seed)
        inputs = [feeds[name] for name, _, _ in specs]
    ins = [np.ascontiguousarray(a) for a in inputs]
    outs = [np.zeros(shape, dtype) for _, shape, dtype in manifest_specs(manifest["outputs"])]
    for pair in manifest.get("donations", []):  # the code reads a donated input from its output
        outs[pair["output"]][...] = ins[pair["input"]]
    arena = _aligned(manifest["arena"]["bytes"])
    weight_bytes = parsed.sections.get("weights", b"")
    weights = _aligned(len(weight_bytes))
    weights[:len(weight_bytes)] = np.frombuffer(weight_bytes, np.uint8)
    args = ((ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins]),
            (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs]),
            ctypes.c_void_p(arena.ctypes.data), ctypes.c_void_p(weights.ctypes.data))
    return LoadedCode(manifest, lib, args, ins, outs, arena, weights)
