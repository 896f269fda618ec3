"""CPU code generation: ExecutionPlan -> optimized LLVM modules -> ELF shared object.

    target = CpuTarget.host()
    code = emit_cpu(plan, target)
    code.shared_object   # bytes: exports aot_model_entry and aot_kernel_<i> (and aot_model_checks
                         # when the plan has run-time checks), and aot_code_info, what the code
                         # was built for (code_info.py), which the runtime compares with the manifest
    code.kernels         # [(symbol, work items)] in plan order
    codes = emit_cpu_variants(plan, [CpuTarget.from_name("x86-64-v4"), CpuTarget.from_name("x86-64-v3")])

Each distinct kernel body is a module of its own, compiled once, in parallel processes,
and cached on disk (build.py, cache.py); the objects of one target link into its shared
object.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.cpu.build import ObjectBuilder, VariantObjects, build_variants, default_jobs, entry_module, kernel_body
from aot.codegen.cpu.cache import ObjectCache
from aot.codegen.cpu.code_info import emit_code_info
from aot.codegen.cpu.kernel import emit_checks, emit_entry, emit_kernel, kernel_work_items
from aot.codegen.cpu.link import link_shared
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import optimize_text, run_o3
from aot.codegen.math import MathLib
from aot.plan import ExecutionPlan
from aot import progress

__all__ = ["CpuCode", "CpuTarget", "emit_cpu", "emit_cpu_variants", "build_module", "entry_module", "kernel_body",
           "optimize"]


@dataclass(frozen=True)
class CpuCode:
    shared_object: bytes
    kernels: list[tuple[str, int]]
    target: CpuTarget
    # the optimized LLVM assembly of every module, printed only when asked for (--dump-ir, tests):
    # printing and re-optimizing cost as much as a tenth of the compile
    optimized_ir: Callable[[], str] = field(repr=False, compare=False)

    @cached_property
    def llvm_ir(self) -> str:
        return self.optimized_ir()


def build_module(plan: ExecutionPlan, target: CpuTarget) -> tuple[ir.Module, list[tuple[str, int]]]:
    """The whole plan as one unoptimized LLVM module, and its (symbol, work items) per kernel:
    what the per-kernel modules hold together, for reading and tests."""
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


def emit_cpu(plan: ExecutionPlan, target: CpuTarget, *, jobs: int | None = None,
             cache: ObjectCache | None | bool = True) -> CpuCode:
    return emit_cpu_variants(plan, [target], jobs=jobs, cache=cache)[0]


def emit_cpu_variants(plan: ExecutionPlan, targets: Sequence[CpuTarget], *, jobs: int | None = None,
                      cache: ObjectCache | None | bool = True) -> list[CpuCode]:
    """One CpuCode per target, in `targets` order, all over the same plan (one weights section).

    `jobs`: worker processes (default: AOT_JOBS, else the usable cores). `cache`: True for the
    one the environment names (ObjectCache.from_environment: off with AOT_NO_CACHE=1), False
    or None for none, or an ObjectCache. Reports the kernels built to aot.progress."""
    if cache is True:
        cache = ObjectCache.from_environment()
    builder = ObjectBuilder(plan, targets, cache or None)
    reporter = progress.current()
    reporter.phase("codegen", total=len(targets) * len(plan.kernels))
    variants = build_variants(builder, jobs or default_jobs(), reporter.advance)
    if cache:
        cache.evict_if_due()
    return [CpuCode(link_shared(built.objects, target), builder.kernels[v], target, _printer(builder, v, built))
            for v, (target, built) in enumerate(zip(targets, variants))]


def _printer(builder: ObjectBuilder, variant: int, built: VariantObjects) -> Callable[[], str]:
    def optimized_ir() -> str:
        machine = builder.machine(builder.targets[variant])
        return "".join(str(optimize_text(text, machine, "CPU"))
                       for text in built.texts(builder, variant))
    return optimized_ir
