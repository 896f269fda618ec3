"""The GPU half of an artifact: per SM the PTX (and, where ptxas is installed, the cubin),
the manifest's `cuda` entry and the tooling section's (packaging/FORMAT.md, "cuda").

The GPU kernels are the plan's kernels, the CPU path's: same fusion, packed weights and
arena plan, so the launch plan's arguments are offsets into the same arena and weights.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.codegen.nvptx.target import PTX_FEATURES
from aot.errors import ArgumentError
from aot.plan import ExecutionPlan

# what --sm accepts: the SMs the NVPTX back end knows a PTX version for, in order
SMS = tuple(PTX_FEATURES)


@dataclass(frozen=True)
class GpuBuild:
    """One SM's code: the PTX module and, where ptxas ran, its cubin and per-kernel report."""

    sm: str
    code: Any  # nvptx.GpuCode
    assembly: Any | None  # nvptx.ptxas.Assembly; None without ptxas
    ptxas_version: str | None

    @property
    def ptx_section(self) -> str:
        return f"ptx.{self.sm}"

    @property
    def cubin_section(self) -> str:
        return f"cubin.{self.sm}"


def check_sms(sm: str | Sequence[str] | None) -> tuple[str, ...]:
    """`sm` as the API takes it ("sm_80,sm_90", a list, or None for every SM): a tuple of
    distinct known SMs in the order given; anything else is an ArgumentError naming the choices."""
    if sm is None:
        return SMS
    items = sm.split(",") if isinstance(sm, str) else sm
    if isinstance(items, (bytes, bytearray)) or not isinstance(items, Sequence):
        raise ArgumentError(f"sm must be a comma-separated str or a list of {', '.join(SMS)}; got {sm!r}")
    checked: list[str] = []
    for item in items:
        if item not in SMS:
            raise ArgumentError(f"GPU architecture {item!r} is not supported; choose from {', '.join(SMS)}")
        if item in checked:
            raise ArgumentError(f"GPU architecture '{item}' is given twice in {sm!r}")
        checked.append(item)
    if not checked:
        raise ArgumentError(f"no GPU architecture given; choose from {', '.join(SMS)}")
    return tuple(checked)


def build_gpu(plan: ExecutionPlan, sms: Sequence[str], dump_dir: Path | None = None,
              log: Callable[[str], None] | None = None, matmul_precision: str = "fp32") -> list[GpuBuild]:
    """PTX for each SM of `sms`, assembled to a cubin where ptxas is installed. A kernel without
    a GPU body is a CodegenError naming it (nvptx/bodies.py). `matmul_precision`: the f32 matrix
    multiplies' (aot/gpu_options.py MATMUL_PRECISIONS)."""
    from aot.codegen.nvptx import NvptxTarget, emit_gpus
    from aot.codegen.nvptx.ptxas import assemble_cubin, ptxas_version

    version = ptxas_version()
    codes = emit_gpus(plan, [NvptxTarget(sm, matmul_precision) for sm in sms], log)
    for sm, code in zip(sms, codes):
        if dump_dir is not None:
            (dump_dir / f"gpu.{sm}.ll").write_text(code.llvm_ir)
            (dump_dir / f"gpu.{sm}.ptx").write_text(code.ptx)
    assemblies: list[Any] = [None] * len(codes)
    if version is not None:
        # ptxas runs once per SM, side by side (a process each; its time is most of a GPU build's)
        def assemble(code: Any) -> tuple[Any, float]:
            start = time.perf_counter()
            return assemble_cubin(code.ptx, code.target.sm), time.perf_counter() - start

        with ThreadPoolExecutor(max_workers=len(codes)) as pool:
            timed = list(pool.map(assemble, codes))
        assemblies = [assembly for assembly, _ in timed]
        if log:
            for sm, (assembly, seconds) in zip(sms, timed):
                log(f"{'ptxas ' + sm:<14} {seconds * 1000:8.1f} ms  {len(assembly.cubin)} B cubin")
    elif log:
        log(f"{'ptxas':<14} not installed: PTX only (the driver compiles it at load)")
    return [GpuBuild(sm, code, assembly, version) for sm, code, assembly in zip(sms, codes, assemblies)]


def gpu_sections(builds: Sequence[GpuBuild]) -> list[tuple[str, bytes]]:
    sections = []
    for build in builds:
        sections.append((build.ptx_section, build.code.ptx.encode("ascii")))
        if build.assembly is not None:
            sections.append((build.cubin_section, build.assembly.cubin))
    return sections


def gpu_manifest(plan: ExecutionPlan, builds: Sequence[GpuBuild], weights_section: str) -> dict[str, Any]:
    """The manifest's `cuda` entry: the device arena (the plan's), the weights section (the CPU
    path's), the f32 matmul precision the code was built with, and per SM its code sections
    and launch plan, kernels in execution order, then (where the plan has run-time checks)
    the checks kernel's launch, whose last argument is the runtime's status word."""
    sms = []
    for build in builds:
        entry: dict[str, Any] = {"sm": build.sm, "ptx": build.ptx_section}
        if build.assembly is not None:
            entry["cubin"] = build.cubin_section
        entry["kernels"] = [{"name": k.name, **k.launch_json()} for k in build.code.kernels]
        if build.code.checks is not None:
            entry["checks"] = build.code.checks.launch_json()
        sms.append(entry)
    precision = builds[0].code.target.matmul_precision if builds else "fp32"
    return {"arena": {"bytes": plan.arena_bytes, "alignment": 64}, "weights": weights_section,
            "matmul_precision": precision, "sms": sms}


def gpu_tooling(plan: ExecutionPlan, builds: Sequence[GpuBuild]) -> dict[str, Any]:
    """The tooling section's `cuda` entry: the arena's lower bound, and per SM the LLVM target,
    the ptxas version, and per kernel (and for the checks kernel) its GPU body, block count and
    what ptxas reported."""
    sms = []
    for build in builds:
        target = build.code.target
        entry: dict[str, Any] = {"triple": target.triple, "features": target.features}
        if build.assembly is not None:
            entry["ptxas"] = build.ptxas_version
        entry["kernels"] = [_kernel_tooling(build, kernel, name=True) for kernel in build.code.kernels]
        if build.code.checks is not None:
            entry["checks"] = _kernel_tooling(build, build.code.checks, name=False)
        sms.append(entry)
    return {"arena": {"lower_bound_bytes": plan.arena_lower_bound}, "sms": sms}


def _kernel_tooling(build: GpuBuild, kernel: Any, name: bool) -> dict[str, Any]:
    """One launch's tooling entry: its GPU body, block count, declared shared memory and ptxas's
    report; `name` only for plan kernels (the checks launch has none in the manifest)."""
    info: dict[str, Any] = {"name": kernel.name} if name else {}
    info.update({"body": kernel.body, "blocks": kernel.blocks, "static_shared_bytes": kernel.static_shared_bytes})
    report = build.assembly.kernels.get(kernel.symbol) if build.assembly is not None else None
    if report is not None:
        info["ptxas"] = {"registers": report.registers, "stack_bytes": report.stack_bytes,
                         "spill_store_bytes": report.spill_store_bytes,
                         "spill_load_bytes": report.spill_load_bytes, "shared_bytes": report.shared_bytes}
    return info
