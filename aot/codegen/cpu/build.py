"""Object files for a plan's CPU code: one LLVM module per kernel, plus one for the entry.

Each kernel is its own module, optimized and compiled on its own, so the kernels of
every variant build in parallel over the cores and each object can come from the
per-kernel cache (cache.py). The entry module holds aot_model_entry, aot_model_checks
and aot_code_info, and calls the kernels as external functions; link.py links the
objects, in plan order, into one shared object per variant.

Why processes and not threads: llvmlite serializes every call into LLVM behind one
lock (llvmlite.binding.ffi), so threads would run LLVM one at a time. The workers are
forked once the plan exists, so they read it from memory; a job names a variant and a
kernel, and comes back as object bytes. The result does not depend on which process
compiled what: same plan, same bytes (tests/codegen/cpu/test_parallel_build.py).
"""
from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.cpu.cache import ObjectCache, object_key
from aot.codegen.cpu.code_info import emit_code_info
from aot.codegen.cpu.kernel import KERNEL_TYPE, emit_checks, emit_entry, emit_kernel, kernel_work_items
from aot.codegen.cpu.symbols import check_module, check_object
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import module_text, parse_verified, run_passes
from aot.codegen.math import MathLib
from aot.plan import ExecutionPlan


def kernel_symbol(index: int) -> str:
    return f"aot_kernel_{index}"


def kernel_module(plan: ExecutionPlan, target: CpuTarget, index: int) -> ir.Module:
    """The module of kernel `index` alone (its math functions and constants private to it)."""
    module = ir.Module(name=kernel_symbol(index))
    module.triple = target.triple
    emit_kernel(module, MathLib(module, target), target, plan, plan.kernels[index], kernel_symbol(index))
    return module


def entry_module(plan: ExecutionPlan, target: CpuTarget, kernels: Sequence[tuple[str, int]]) -> ir.Module:
    """aot_model_entry, aot_model_checks (when the plan has checks) and aot_code_info, calling
    and naming the kernels (`(symbol, work items)` in plan order) that other modules define."""
    module = ir.Module(name="aot_entry")
    module.triple = target.triple
    functions = [(ir.Function(module, KERNEL_TYPE, name=symbol), items) for symbol, items in kernels]
    entry = emit_entry(module, functions)
    checks = emit_checks(module, plan) if plan.checks else None
    emit_code_info(module, plan, entry, checks, functions)
    return module


@dataclass(frozen=True)
class Job:
    """One object to build: kernel `kernel` of variant `variant`, or its entry (kernel None)."""

    variant: int
    kernel: int | None


@dataclass(frozen=True)
class Built:
    obj: bytes
    cached: bool


class ObjectBuilder:
    """Builds one job's object; the state a forked worker inherits."""

    def __init__(self, plan: ExecutionPlan, targets: Sequence[CpuTarget], cache: ObjectCache | None):
        self.plan = plan
        self.targets = list(targets)
        self.cache = cache
        self.kernels = [[(kernel_symbol(i), kernel_work_items(k, t)) for i, k in enumerate(plan.kernels)]
                        for t in self.targets]
        self._machines: dict[CpuTarget, llvm.TargetMachine] = {}

    def machine(self, target: CpuTarget) -> llvm.TargetMachine:
        if target not in self._machines:
            self._machines[target] = target.target_machine()
        return self._machines[target]

    def module(self, job: Job) -> ir.Module:
        target = self.targets[job.variant]
        if job.kernel is None:
            return entry_module(self.plan, target, self.kernels[job.variant])
        return kernel_module(self.plan, target, job.kernel)

    def text(self, job: Job) -> str:
        """The job's unoptimized LLVM assembly (what the cache keys on)."""
        return module_text(self.module(job), self.machine(self.targets[job.variant]))

    def build(self, job: Job) -> Built:
        target = self.targets[job.variant]
        machine = self.machine(target)
        text = self.text(job)
        key = object_key(text, target) if self.cache is not None else ""
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return Built(hit, True)
        # the entry calls the kernels, which the other objects define
        linked = frozenset(symbol for symbol, _ in self.kernels[job.variant]) if job.kernel is None else frozenset()
        optimized = run_passes(parse_verified(text, "CPU"), machine, vectorize=True)
        check_module(optimized, linked)
        obj = machine.emit_object(optimized)
        check_object(obj, linked)  # instruction selection can add libcalls the module does not show
        if self.cache is not None:
            self.cache.put(key, obj)
        return Built(obj, False)


def default_jobs() -> int:
    """Worker processes: $AOT_JOBS, else the cores this process may run on."""
    asked = os.environ.get("AOT_JOBS", "")
    if asked.isdigit() and int(asked) > 0:
        return int(asked)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_WORKER: ObjectBuilder | None = None  # set in each forked worker by _install


def _install(builder: ObjectBuilder) -> None:
    global _WORKER
    _WORKER = builder


def _build_in_worker(job: Job) -> Built:
    assert _WORKER is not None
    return _WORKER.build(job)


def _can_fork() -> bool:
    # a daemonic process (a multiprocessing pool's worker) may not have children
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def build_objects(builder: ObjectBuilder, jobs: Sequence[Job], workers: int,
                  done: Callable[[Job, Built], None] | None = None) -> list[Built]:
    """Every job's object, in `jobs` order; `done` is called as each finishes (any order).
    With `workers` > 1 the jobs run in that many forked processes, else here."""
    results: dict[Job, Built] = {}
    if workers <= 1 or len(jobs) <= 1 or not _can_fork():
        for job in jobs:
            results[job] = builder.build(job)
            if done:
                done(job, results[job])
        return [results[job] for job in jobs]
    context = multiprocessing.get_context("fork")  # the workers read the plan from memory
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context,
                             initializer=_install, initargs=(builder,)) as pool:
        futures = {pool.submit(_build_in_worker, job): job for job in _largest_first(builder, jobs)}
        try:
            for future in as_completed(futures):
                job = futures[future]
                results[job] = future.result()
                if done:
                    done(job, results[job])
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)  # the first error is the answer
            raise
    return [results[job] for job in jobs]


def _largest_first(builder: ObjectBuilder, jobs: Sequence[Job]) -> list[Job]:
    """The slowest jobs first, so that no long one starts last while the other cores idle.
    A kernel's node count times its vector work is a rough stand-in for its LLVM time."""
    def weight(job: Job) -> int:
        if job.kernel is None:
            return 0
        kernel = builder.plan.kernels[job.kernel]
        return len(kernel.nodes) + (1000 if _is_microkernel(kernel, builder.targets[job.variant]) else 0)
    return sorted(jobs, key=weight, reverse=True)


def _is_microkernel(kernel: object, target: CpuTarget) -> bool:
    from aot.codegen.cpu.bodies import body_emitter

    return body_emitter(kernel, target) is not None  # type: ignore[arg-type]
