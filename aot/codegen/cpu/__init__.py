"""CPU code generation: ExecutionPlan -> optimized LLVM module -> ELF shared object.

    target = CpuTarget.host()
    code = emit_cpu(plan, target)
    code.shared_object   # bytes: exports aot_model_entry and aot_kernel_<i> (and aot_model_checks
                         # when the plan has run-time checks), and aot_code_info, what the code
                         # was built for (code_info.py), which the runtime compares with the manifest
    code.kernels         # [(symbol, work items)] in plan order
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.cpu.code_info import emit_code_info
from aot.codegen.cpu.kernel import emit_checks, emit_entry, emit_kernel, kernel_work_items
from aot.codegen.cpu.link import link_shared
from aot.codegen.math import MathLib
from aot.codegen.cpu.symbols import check_module, check_object
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import run_o3
from aot.plan import ExecutionPlan

__all__ = ["CpuCode", "CpuTarget", "emit_cpu", "emit_cpu_variants", "build_module", "optimize"]


@dataclass(frozen=True)
class CpuCode:
    shared_object: bytes
    kernels: list[tuple[str, int]]
    llvm_ir: str
    target: CpuTarget


def build_module(plan: ExecutionPlan, target: CpuTarget) -> tuple[ir.Module, list[tuple[str, int]]]:
    """The unoptimized LLVM module of `plan` and its (symbol, work items) per kernel."""
    module = ir.Module(name="aot")
    module.triple = target.triple
    lib = MathLib(module, target)
    functions = []
    for i, kernel in enumerate(plan.kernels):
        fn = emit_kernel(module, lib, target, plan, kernel, f"aot_kernel_{i}")
        functions.append((fn, kernel_work_items(kernel, target)))
    entry = emit_entry(module, functions)
    checks = emit_checks(module, plan) if plan.checks else None
    emit_code_info(module, plan, entry, checks, functions)
    return module, [(fn.name, items) for fn, items in functions]


def optimize(module: ir.Module, machine: llvm.TargetMachine) -> llvm.ModuleRef:
    """Parse, verify and run the O3 pipeline (loop/SLP vectorization, unrolling)."""
    return run_o3(module, machine, vectorize=True, back_end="CPU")


def emit_cpu(plan: ExecutionPlan, target: CpuTarget) -> CpuCode:
    machine = target.target_machine()
    module, kernels = build_module(plan, target)
    optimized = optimize(module, machine)
    check_module(optimized)
    obj = machine.emit_object(optimized)
    check_object(obj)  # instruction selection can add libcalls the module does not show
    return CpuCode(link_shared(obj, target), kernels, str(optimized), target)


def emit_cpu_variants(plan: ExecutionPlan, targets: Sequence[CpuTarget]) -> list[CpuCode]:
    """One CpuCode per target, in `targets` order, all over the same plan (one weights section)."""
    return [emit_cpu(plan, target) for target in targets]
