"""Run an artifact's GPU launch plan on a device, from a bundle, and compare with its CPU outputs.

    python3 benchmarks/gpu_launch.py BUNDLES_DIR [--sm sm_90] [--runs 20]   # on a machine with a GPU

A bundle (benchmarks/gpu_bundle.py writes them where the compiler runs) is a
folder holding what a device run needs and nothing that needs aot, LLVM or zstd:
manifest.json (the artifact's manifest: the launch plan under "cuda"),
weights.bin, ptx.<sm> and cubin.<sm> (the artifact's code sections), inputs.npz
and cpu_outputs.npz (what the artifact's CPU code returned on those inputs).

For each bundle and each code variant the device can load (the cubin for its own
SM; the PTX of every SM, JIT-compiled by the driver), this allocates the device
arena, uploads weights and inputs, launches every kernel in plan order as the
launch plan says (grid, block, dynamic shared memory, each argument the arena or
weights at an offset, or an input / output), then the run-time checks' launch where
there is one (its last argument a 4-byte status word; a failing check is reported
by its message, as the CPU runtime reports it), reads the outputs back and prints
their largest difference from the CPU artifact's, and the median time of the
whole launch sequence over --runs runs (CUDA events). Needs numpy and CuPy.

The launch-plan logic (`run_plan`) takes any `Device`; the tests drive it with
the host-emulated kernels (aot/codegen/nvptx/emulate.py), so a wrong reading of
the launch plan fails in CI, not on the GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int8": np.int8, "int16": np.int16,
          "int32": np.int32, "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
          "uint64": np.uint64, "bool": np.bool_}
ALIGNMENT = 256  # what cudaMalloc gives; the kernels need 16


class Device(Protocol):
    def upload(self, data: bytes | np.ndarray) -> int: ...
    def alloc(self, nbytes: int) -> int: ...
    def download(self, address: int, nbytes: int) -> bytes: ...
    def launch(self, kernel: dict[str, Any], pointers: list[int]) -> None: ...
    def synchronize(self) -> None: ...


def output_specs(manifest: dict[str, Any]) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    specs = []
    for spec in manifest["outputs"]:
        if spec["dtype"] not in DTYPES:
            raise SystemExit(f"output {spec['name']}: dtype {spec['dtype']} is not handled by this script")
        specs.append((spec["name"], tuple(spec["shape"]), np.dtype(DTYPES[spec["dtype"]])))
    return specs


class Buffers:
    """The device buffers of one run: arena, weights, inputs, outputs, and the checks launch's
    int32 status word where the manifest has checks."""

    def __init__(self, device: Device, manifest: dict[str, Any], weights: bytes, inputs: list[np.ndarray]):
        cuda = manifest["cuda"]
        self.arena = device.alloc(max(cuda["arena"]["bytes"], 1))
        self.weights = device.upload(weights or b"\0")
        self.inputs = [device.upload(np.ascontiguousarray(x)) for x in inputs]
        self.specs = output_specs(manifest)
        self.outputs = [device.alloc(max(int(np.prod(shape)) * dtype.itemsize, 1)) for _, shape, dtype in self.specs]
        self.messages = [check["message"] for check in manifest.get("checks") or []]
        self.status = device.alloc(4) if self.messages else None

    def pointer(self, arg: dict[str, Any]) -> int:
        kind = arg["kind"]
        if kind == "arena":
            return self.arena + arg["offset"]
        if kind == "weights":
            return self.weights + arg["offset"]
        if kind == "input":
            return self.inputs[arg["index"]]
        if kind == "output":
            return self.outputs[arg["index"]]
        if kind == "status" and self.status is not None:
            return self.status
        raise ValueError(f"launch argument of unknown kind {kind!r}")


def run_plan(device: Device, kernels: list[dict[str, Any]], buffers: Buffers,
             checks: dict[str, Any] | None = None) -> None:
    """Every kernel of the launch plan, in order, then the checks launch (an SM entry's
    "checks") where given; `raise_failed_check` reads what it found."""
    for kernel in kernels:
        device.launch(kernel, [buffers.pointer(a) for a in kernel["args"]])
    if checks is not None:
        device.launch(checks, [buffers.pointer(a) for a in checks["args"]])


class CheckFailed(Exception):
    """A run-time check of the model failed on the device; the message is the check's."""


def raise_failed_check(device: Device, buffers: Buffers) -> None:
    """After a synchronized run_plan with checks: CheckFailed with the first failing check's
    message if the status word says one failed (packaging/FORMAT.md, "cuda")."""
    if buffers.status is None:
        return
    failed = int(np.frombuffer(device.download(buffers.status, 4), np.int32)[0])
    if not 0 <= failed <= len(buffers.messages):
        raise RuntimeError(f"the checks kernel answered {failed}, outside 0..{len(buffers.messages)}")
    if failed:
        raise CheckFailed(buffers.messages[failed - 1])


def read_outputs(device: Device, buffers: Buffers) -> list[np.ndarray]:
    outputs = []
    for address, (_, shape, dtype) in zip(buffers.outputs, buffers.specs):
        raw = device.download(address, int(np.prod(shape)) * dtype.itemsize)
        outputs.append(np.frombuffer(raw, dtype).reshape(shape).copy())
    return outputs


def load_bundle(folder: Path) -> tuple[dict[str, Any], bytes, list[np.ndarray], list[np.ndarray]]:
    manifest = json.loads((folder / "manifest.json").read_text())
    weights = (folder / "weights.bin").read_bytes()
    inputs_file = np.load(folder / "inputs.npz")
    inputs = [inputs_file[spec["name"]] for spec in manifest["inputs"]]
    cpu_file = np.load(folder / "cpu_outputs.npz")
    cpu = [cpu_file[spec["name"]] for spec in manifest["outputs"]]
    return manifest, weights, inputs, cpu


def largest_error(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float]:
    """(max |got - want|, that over max(1, max |want|)), over every float output; int/bool outputs
    count as 0 when equal and inf when not."""
    worst, relative = 0.0, 0.0
    for g, w in zip(got, want):
        if g.dtype.kind in "f":
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            both_nan = np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
            diff = np.where(both_nan, 0.0, diff)
            if diff.size:
                worst = max(worst, float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))))
                relative = max(relative, worst / max(1.0, float(np.nanmax(np.abs(w.astype(np.float64))))))
        elif not np.array_equal(g, w):
            return float("inf"), float("inf")
    return worst, relative


class CupyDevice:
    """A CUDA device through CuPy: one module (cubin or PTX) loaded per run."""

    def __init__(self, module_path: Path):
        import cupy

        self.cupy = cupy
        self.module = cupy.RawModule(path=str(module_path))
        self._keep: list[Any] = []
        self._functions: dict[str, Any] = {}

    def alloc(self, nbytes: int) -> int:
        array = self.cupy.zeros(nbytes + ALIGNMENT, dtype=self.cupy.uint8)
        self._keep.append(array)
        return int(array.data.ptr)

    def upload(self, data: bytes | np.ndarray) -> int:
        host = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        array = self.cupy.asarray(host)
        self._keep.append(array)
        return int(array.data.ptr)

    def download(self, address: int, nbytes: int) -> bytes:
        host = np.empty(nbytes, np.uint8)
        self.cupy.cuda.runtime.memcpy(host.ctypes.data, address, nbytes, self.cupy.cuda.runtime.memcpyDeviceToHost)
        return host.tobytes()

    def launch(self, kernel: dict[str, Any], pointers: list[int]) -> None:
        function = self._functions.get(kernel["symbol"])
        if function is None:
            function = self._functions[kernel["symbol"]] = self.module.get_function(kernel["symbol"])
        function(tuple(kernel["grid"]), tuple(kernel["block"]), tuple(np.uint64(p) for p in pointers),
                 shared_mem=kernel["shared_bytes"])

    def synchronize(self) -> None:
        self.cupy.cuda.Device().synchronize()

    def time_ms(self, body: Any, runs: int) -> float:
        start, stop = self.cupy.cuda.Event(), self.cupy.cuda.Event()
        times = []
        for _ in range(runs):
            start.record()
            body()
            stop.record()
            stop.synchronize()
            times.append(self.cupy.cuda.get_elapsed_time(start, stop))
        return float(np.median(times))


def device_sm() -> str:
    import cupy

    major, minor = cupy.cuda.Device().compute_capability[:1], cupy.cuda.Device().compute_capability[1:]
    return f"sm_{major}{minor}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundles", type=Path, help="a folder of bundles (one folder each)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tolerance", type=float, default=1e-3, help="largest error relative to max(1, |cpu|)")
    args = parser.parse_args(argv)
    own_sm = device_sm()
    print(f"device {own_sm}")
    print("| model | code | kernels | max abs err vs CPU | relative | median ms | status |")
    print("|---|---|---|---|---|---|---|")
    failures = 0
    for folder in sorted(p for p in args.bundles.iterdir() if (p / "manifest.json").exists()):
        manifest, weights, inputs, cpu = load_bundle(folder)
        for entry in manifest["cuda"]["sms"]:
            variants = [("ptx", entry["ptx"])]
            if entry.get("cubin") and entry["sm"] == own_sm:
                variants.insert(0, ("cubin", entry["cubin"]))
            for kind, section in variants:
                label = f"{kind} {entry['sm']}"
                try:
                    device = CupyDevice(folder / section)
                    buffers = Buffers(device, manifest, weights, inputs)
                    checks = entry.get("checks")
                    run_plan(device, entry["kernels"], buffers, checks)
                    device.synchronize()
                    raise_failed_check(device, buffers)  # the CPU code passed these inputs
                    got = read_outputs(device, buffers)
                    worst, relative = largest_error(got, cpu)
                    ms = device.time_ms(lambda: run_plan(device, entry["kernels"], buffers, checks), args.runs)
                    status = "ok" if relative <= args.tolerance else "MISMATCH"
                except Exception as err:  # report and go on to the next
                    worst = relative = float("nan")
                    ms, status = float("nan"), f"ERROR {type(err).__name__}: {str(err).splitlines()[0][:120]}"
                failures += status != "ok"
                print(f"| {folder.name} | {label} | {len(entry['kernels'])} | {worst:.3g} | {relative:.3g} | {ms:.3f} | "
                      f"{status} |", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
