"""NVPTX code generation: ExecutionPlan -> LLVM module of ptx_kernel functions -> PTX text.

    code = emit_gpu(plan, NvptxTarget("sm_80"))
    code.ptx                              # PTX text, one .entry aot_kernel_<i> per plan kernel
    code.kernels                          # [GpuKernel(symbol, grid, block, shared bytes, args...)]
    code.checks                           # the run-time checks' launch (nvptx/checks.py), None without
    assemble(code.ptx, "sm_90")           # with ptxas: {symbol: PtxasInfo(registers, spills...)}

The kernels are the plan's (same fusion, layouts, weights and arena); each gets
the first GPU body of bodies.py that takes it, emitted through nvptx/simt.py, so
the same body also runs on the host (nvptx/emulate.py) to be tested without a GPU.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.math import MathLib
from aot.codegen.llvm_pipeline import run_o3
from aot.codegen.nvptx.checks import emit_checks
from aot.codegen.nvptx.kernel import GpuArg, GpuKernel, emit_kernel, with_launch_bounds
from aot.codegen.nvptx.ptxas import PtxasInfo, assemble, ptxas_path
from aot.codegen.nvptx.target import NvptxTarget
from aot.errors import ArgumentError
from aot.plan import ExecutionPlan

__all__ = ["GpuArg", "GpuCode", "GpuKernel", "NvptxTarget", "PtxasInfo", "assemble", "build_module", "emit_gpu",
           "emit_gpus", "emit_ptx", "ptxas_path"]


@dataclass(frozen=True)
class GpuCode:
    ptx: str
    kernels: list[GpuKernel]
    llvm_ir: str
    target: NvptxTarget
    checks: GpuKernel | None = None  # aot_model_checks, launched after the last kernel


def build_module(plan: ExecutionPlan, target: NvptxTarget) -> tuple[ir.Module, list[GpuKernel], GpuKernel | None]:
    """The unoptimized LLVM module of `plan`'s kernels, and of its checks kernel where it has
    run-time checks, for `target`."""
    module = ir.Module(name="aot")
    module.triple = target.triple
    lib = MathLib(module, target)
    emitted: dict[str, str] = {}  # one function per distinct code (kernel.py code_key)
    kernels = [emit_kernel(module, lib, target, plan, kernel, f"aot_kernel_{i}", matmul_precision=target.matmul_precision,
                           emitted=emitted)
               for i, kernel in enumerate(plan.kernels)]
    return module, kernels, emit_checks(module, plan)


def optimize(module: ir.Module, machine: llvm.TargetMachine) -> llvm.ModuleRef:
    """Parse, verify and run the O3 pipeline without vectorization (a GPU thread is scalar)."""
    return run_o3(module, machine, vectorize=False, back_end="NVPTX")


def emit_gpu(plan: ExecutionPlan, target: NvptxTarget) -> GpuCode:
    return emit_gpus(plan, [target])[0]


def emit_gpus(plan: ExecutionPlan, targets: Sequence[NvptxTarget],
              log: Callable[[str], None] | None = None) -> list[GpuCode]:
    """The code of `plan` for each of `targets`: the module is built and optimized once, with
    the oldest SM's machine, and emitted as PTX for each (an SM runs every older SM's code,
    and no body chooses by SM), which halves the LLVM time of --sm sm_80,sm_90."""
    if not targets:
        return []
    if len({t.matmul_precision for t in targets}) != 1:
        raise ArgumentError("one build of GPU code has one matmul precision")
    oldest = min(targets, key=lambda t: int(t.sm.removeprefix("sm_")))
    start = time.perf_counter()
    module, kernels, checks = build_module(plan, oldest)
    optimized = optimize(module, oldest.target_machine())
    llvm_ir = str(optimized)
    if log:
        log(f"{'gpu llvm':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  {len(kernels)} kernels, built and "
            f"optimized once for {oldest.sm}")
    codes = []
    for target in targets:
        start = time.perf_counter()
        ptx = with_launch_bounds(target.target_machine().emit_assembly(optimized), [*kernels, *([checks] if checks else [])])
        codes.append(GpuCode(ptx, kernels, llvm_ir, target, checks))
        if log:
            log(f"{'gpu ' + target.sm:<14} {(time.perf_counter() - start) * 1000:8.1f} ms  {len(codes[-1].ptx)} B of PTX")
    return codes


def emit_ptx(plan: ExecutionPlan, sm: str) -> str:
    """PTX text of every kernel of `plan` for `sm` ("sm_80", "sm_90")."""
    return emit_gpu(plan, NvptxTarget(sm)).ptx
