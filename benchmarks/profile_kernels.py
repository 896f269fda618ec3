"""Per-kernel times of a compiled artifact, slowest first.

    python benchmarks/profile_kernels.py MODEL.aot [--runs 30] [--top 20]
    python benchmarks/profile_kernels.py MODEL.onnx [...]   # compiles it first (to a temporary file)

Loads the artifact's CPU shared object with ctypes, runs the whole model once
(so every arena value holds real data), then times each kernel alone over all
of its work items, single-threaded. Prints per kernel: median time, share of
the summed kernel times, the work items, the fused ops. The sum is what one
single-threaded run costs without the runtime's dispatch.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aot.artifact import read_artifact


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed uint8 buffer whose data starts on a 64-byte boundary (arena and weights alignment)."""
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes + 64]


def _tensor(spec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 4, shape).astype(dtype)


def _load(artifact_path: Path) -> tuple[dict[str, Any], ctypes.CDLL, bytes]:
    artifact = read_artifact(artifact_path)
    manifest = artifact.manifest
    section = manifest["cpu"][0]["section"]
    fd, so_path = tempfile.mkstemp(suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(artifact.sections[section])
    lib = ctypes.CDLL(so_path)
    os.unlink(so_path)
    return manifest, lib, artifact.sections.get("weights", b"")


@dataclass
class LoadedCode:
    """An artifact's CPU code loaded with ctypes, with seeded inputs and its own
    arena and weights: `args` is what the entry and every kernel take first."""

    manifest: dict[str, Any]
    lib: ctypes.CDLL
    args: tuple[Any, ...]
    buffers: tuple[Any, ...]  # the arrays `args` points into, kept alive here

    def run_entry(self) -> None:
        self.lib.aot_model_entry(*self.args)


def load_code(artifact_path: Path) -> LoadedCode:
    manifest, lib, weight_bytes = _load(artifact_path)
    rng = np.random.default_rng(0)
    ins = [_tensor(spec, rng) for spec in manifest["inputs"]]
    outs = [np.zeros(spec["shape"], np.dtype(spec["dtype"])) for spec in manifest["outputs"]]
    arena = _aligned(manifest["arena"]["bytes"])
    weights = _aligned(len(weight_bytes))
    weights[:len(weight_bytes)] = np.frombuffer(weight_bytes, np.uint8)
    args = ((ctypes.c_void_p * max(len(ins), 1))(*[a.ctypes.data for a in ins]),
            (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs]),
            ctypes.c_void_p(arena.ctypes.data), ctypes.c_void_p(weights.ctypes.data))
    return LoadedCode(manifest, lib, args, (ins, outs, arena, weights))


def profile(artifact_path: Path, runs: int) -> list[tuple[float, dict[str, Any]]]:
    """(median seconds, manifest kernel entry) per kernel, in plan order."""
    code = load_code(artifact_path)
    manifest, lib, args = code.manifest, code.lib, code.args
    code.run_entry()
    results = []
    for kernel in manifest["kernels"]:
        fn = getattr(lib, kernel["symbol"])
        end = ctypes.c_int64(kernel["work"])
        fn(*args, ctypes.c_int64(0), end)  # warm caches
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            fn(*args, ctypes.c_int64(0), end)
            times.append(time.perf_counter() - start)
        results.append((statistics.median(times), kernel))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="an .aot artifact, or an ONNX model to compile first")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--top", type=int, default=0, help="print only the N slowest kernels (0: all)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if path.suffix != ".aot":
            import aot

            artifact = Path(tmp) / f"{path.stem}.aot"
            aot.compile(path, artifact)
            path = artifact
        results = profile(path, args.runs)
    total = sum(t for t, _ in results)
    ranked = sorted(results, key=lambda r: -r[0])
    shown = ranked[:args.top] if args.top else ranked
    print(f"{'kernel':<12} {'ms':>8} {'share':>6} {'work':>6}  ops")
    for seconds, kernel in shown:
        print(f"{kernel['name']:<12} {seconds * 1e3:8.3f} {seconds / total:6.1%} {kernel['work']:>6}  {'+'.join(kernel['ops'])}")
    print(f"{'sum':<12} {total * 1e3:8.3f}  ({len(results)} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
