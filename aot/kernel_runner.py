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


def pick_variant(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest's CPU variant (cpu entry) the C runtime would load here: the one
    AOT_CPU_VARIANT names, else the first of this architecture whose x86_features this CPU has
    (LLVM's view of it: CPUID and XGETBV, as the runtime's)."""
    import llvmlite.binding as llvm

    arch = llvm.get_process_triple().split("-", 1)[0]
    entries = [c for c in manifest["cpu"] if c.get("arch") == arch]
    forced = os.environ.get("AOT_CPU_VARIANT", "")
    if forced:
        entries = [c for c in entries if c.get("cpu") == forced]
    has = dict(llvm.get_host_cpu_features()) if arch == "x86_64" else {}
    for entry in entries:
        if all(has.get(f, False) for f in entry.get("x86_features") or []):
            return entry
    names = ", ".join(str(c.get("cpu")) for c in manifest["cpu"])
    raise RunError(f"none of the artifact's CPU code variants ({names or 'none'}) runs on this machine"
                   + (f" as AOT_CPU_VARIANT={forced}" if forced else ""))


def load_code(artifact: bytes | Path, inputs: Sequence[np.ndarray] | None = None, seed: int = 0) -> LoadedCode:
    """Load the artifact's CPU code; `inputs` (in manifest order) default to aot verify's seeded inputs."""
    parsed = read_artifact(artifact if isinstance(artifact, Path) else bytes(artifact))
    manifest = parsed.annotated
    variant = pick_variant(manifest)
    if "kernels" in variant:  # this variant's own symbols and work, under the manifest's names
        manifest = dict(manifest, kernels=[{**k, **own} for k, own in zip(manifest["kernels"], variant["kernels"])])
    section = variant["section"]
    fd, so_path = tempfile.mkstemp(suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(parsed.sections[section])
    try:
        lib = ctypes.CDLL(so_path)
    except OSError as err:
        raise RunError(f"cannot load the artifact's CPU code ({variant.get('cpu', '?')}): {err}") from None
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
