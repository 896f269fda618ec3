"""Run a plan's GPU kernels on the host: the same bodies, realized as loops (nvptx/simt.py HostSimt).

    outputs = emulate(plan, feeds)      # feeds: one array per model input, in order

For testing the GPU kernels' logic without a GPU: each kernel is emitted for the
host with its blocks and threads as loops, phases split at barriers, shared
memory as a per-block array and warp shuffles over the lanes' slots, compiled in
memory (LLVM MCJIT) and run in plan order over an arena, the weights, inputs and
outputs laid out as the launch plan says, then the checks kernel (nvptx/checks.py):
a failing run-time check is a RunError with its message, as from the CPU Session.
What it cannot show: races (a missing sync), and what ptxas and the hardware do to
the PTX (fast-math instructions, occupancy); ptxas and a GPU, where one is lent,
cover those.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from aot.codegen.math import MathLib
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import run_o3
from aot.codegen.nvptx.checks import emit_checks
from aot.codegen.nvptx.kernel import GpuKernel, emit_kernel
from aot.errors import ArgumentError, RunError
from aot.plan import ExecutionPlan


def _aligned(nbytes: int) -> np.ndarray:
    """A zeroed uint8 buffer whose data starts on a 64-byte boundary."""
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes + 64]


def build_host_module(plan: ExecutionPlan, target: CpuTarget,
                      matmul_precision: str = "fp32") -> tuple[ir.Module, list[GpuKernel], GpuKernel | None]:
    module = ir.Module(name="aot_emulated")
    module.triple = target.triple
    lib = MathLib(module, target)
    kernels = [emit_kernel(module, lib, target, plan, kernel, f"aot_kernel_{i}", realization="host",
                           matmul_precision=matmul_precision)
               for i, kernel in enumerate(plan.kernels)]
    return module, kernels, emit_checks(module, plan, realization="host")


class EmulatedKernels:
    """The plan's GPU kernels compiled for this host; call `run(feeds)` as often as needed.
    `matmul_precision` picks the bodies as NvptxTarget.matmul_precision does for the GPU.
    `checks` is the checks kernel (None without run-time checks); `functions` maps every
    symbol, the checks kernel's too, to (its launch, its host function taking the launch's
    addresses then block_begin, block_end)."""

    def __init__(self, plan: ExecutionPlan, matmul_precision: str = "fp32"):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.plan = plan
        target = CpuTarget.host()
        machine = target.jit_target_machine()
        module, self.kernels, self.checks = build_host_module(plan, target, matmul_precision)
        self._module = run_o3(module, machine, vectorize=True, back_end="emulated GPU")
        self._engine = llvm.create_mcjit_compiler(self._module, machine)
        self._engine.finalize_object()
        self.functions: dict[str, tuple[GpuKernel, Callable[..., None]]] = {}
        for kernel in [*self.kernels, *([self.checks] if self.checks else [])]:
            signature = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(kernel.args)), ctypes.c_int64, ctypes.c_int64)
            self.functions[kernel.symbol] = (kernel, signature(self._engine.get_function_address(kernel.symbol)))

    def run(self, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        graph = self.plan.graph
        if len(feeds) != len(graph.inputs):
            raise ArgumentError(f"the model takes {len(graph.inputs)} inputs, got {len(feeds)}")
        inputs = []
        for value, name, feed in zip(graph.inputs, graph.input_names, feeds):
            want = value.type.dtype.to_numpy()
            array = np.asarray(feed)
            if array.dtype != want or array.shape != tuple(value.type.shape):
                raise ArgumentError(f"input '{name}': expected {want.name}{list(value.type.shape)}, "
                                    f"got {array.dtype.name}{list(array.shape)}")
            inputs.append(self._aligned_copy(array))
        outputs = [_aligned(v.type.size * v.type.dtype.itemsize) for v in graph.outputs]
        arena = _aligned(self.plan.arena_bytes)
        weights = _aligned(len(self.plan.weights))
        weights[:len(self.plan.weights)] = np.frombuffer(self.plan.weights, np.uint8)
        status = np.full(1, -1, np.int32)
        bases = {"arena": arena.ctypes.data, "weights": weights.ctypes.data, "status": status.ctypes.data}
        for kernel in [*self.kernels, *([self.checks] if self.checks else [])]:
            pointers = []
            for arg in kernel.args:
                if arg.kind in bases:
                    pointers.append(bases[arg.kind] + arg.offset)
                else:
                    pointers.append((inputs if arg.kind == "input" else outputs)[arg.index].ctypes.data)
            self.functions[kernel.symbol][1](*pointers, 0, kernel.blocks)
        if self.checks:
            failed = int(status[0])
            if not 0 <= failed <= len(self.plan.checks):
                raise RunError(f"the checks kernel answered {failed}, outside 0..{len(self.plan.checks)}")
            if failed:
                raise RunError(self.plan.checks[failed - 1].message)
        return [out[:v.type.size * v.type.dtype.itemsize].view(v.type.dtype.to_numpy()).reshape(v.type.shape).copy()
                for out, v in zip(outputs, graph.outputs)]

    @staticmethod
    def _aligned_copy(array: np.ndarray) -> np.ndarray:
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        buffer = _aligned(flat.size)
        buffer[:flat.size] = flat
        return buffer


def emulate(plan: ExecutionPlan, feeds: Sequence[np.ndarray], matmul_precision: str = "fp32") -> list[np.ndarray]:
    """The model's outputs as the plan's GPU kernels, emulated on the host, compute them."""
    return EmulatedKernels(plan, matmul_precision).run(feeds)
