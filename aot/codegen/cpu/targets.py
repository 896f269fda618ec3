"""Which CPU variants one artifact carries: `--cpu` (or `AOT_CPU`) -> [CpuTarget], best first.

An artifact may hold code for several CPUs over one plan (one weights section, one
arena, one kernel list); the runtime loads the first variant for its architecture whose
features the machine has (packaging/FORMAT.md, `cpu`). What `--cpu` accepts:

    portable        the default on a host with a PORTABLE row: on x86-64, x86-64-v4 (AVX-512)
                    then x86-64-v3 (AVX2, FMA), so one artifact runs well on every x86 server;
                    on aarch64, neoverse-v1 (SVE), neoverse-n1, generic-aarch64
    portable-ARCH   that row whatever the host (portable-aarch64 built on an x86 machine)
    native          one variant for this machine (the default on a host without a row)
    znver4          one CPU name, or TRIPLE:CPU[:FEATURES] (CpuTarget.from_name)
    a,b,c           several, in the order given (the runtime takes the first that runs);
                    names of two architectures may mix (x86-64-v3,neoverse-n1)
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import llvmlite.binding as llvm

from aot.codegen.cpu.target import CpuTarget
from aot.errors import ArgumentError

# the environment variable that gives the default for --cpu (tests pin it to "native": a
# portable default compiles every model twice)
CPU_ENV = "AOT_CPU"
PORTABLE = "portable"
# per host architecture, what `portable` means, best first (x86: AVX-512 before AVX2)
PORTABLE_VARIANTS: dict[str, tuple[str, ...]] = {
    "x86_64": ("x86-64-v4", "x86-64-v3"),
    # SVE (Graviton3, Grace), then Armv8.2 with dot products (Graviton2, Ampere Altra), then
    # any Armv8.0 (Cortex-A72 boards): the runtime checks each one's aarch64_features
    "aarch64": ("neoverse-v1", "neoverse-n1", "generic-aarch64"),
}
# the f32 lanes of the packed dot/conv layouts every variant shares: one plan, one weights
# section, so every target reads the same layout (issue 16: 16 lanes everywhere, a vector of
# two ymm registers on AVX2)
PLAN_LANES = 16
# a code section's name holds at most 23 characters (FORMAT.md, the section table)
_MAX_SECTION_NAME = 23


def host_arch() -> str:
    return llvm.get_process_triple().split("-", 1)[0]


def default_cpu() -> str:
    """What a compile without --cpu builds: `AOT_CPU` when set, else portable where this host
    has a PORTABLE row, else native."""
    configured = os.environ.get(CPU_ENV, "").strip()
    if configured:
        return configured
    return PORTABLE if host_arch() in PORTABLE_VARIANTS else "native"


def resolve_cpu_targets(spec: str | None) -> list[CpuTarget]:
    """The variants `spec` names, best first (None: default_cpu()). An empty item, a name given
    twice, two variants with one CPU name, or `portable` on a host without a row is an
    ArgumentError."""
    if spec is None:
        spec = default_cpu()
    if not isinstance(spec, str):
        raise ArgumentError(f"cpu must be a str such as 'portable', 'native' or 'x86-64-v3,x86-64-v4', "
                            f"got {type(spec).__name__} {spec!r}")
    items = [item.strip() for item in spec.split(",")]
    if any(not item for item in items):
        raise ArgumentError(f"cpu {spec!r} has an empty item; give names separated by commas, like x86-64-v4,x86-64-v3")
    if len(set(items)) != len(items):
        twice = next(item for item in items if items.count(item) > 1)
        raise ArgumentError(f"cpu {spec!r} names {twice!r} twice")
    names: list[str] = []
    for item in items:
        if item == PORTABLE:
            names.extend(_portable_names(spec, host_arch()))
        elif item.startswith(f"{PORTABLE}-"):
            names.extend(_portable_names(spec, item[len(PORTABLE) + 1:]))
        else:
            names.append(item)
    targets = [CpuTarget.from_name(name) for name in names]
    seen: dict[tuple[str, str], str] = {}
    for name, target in zip(names, targets):
        key = (target.arch, target.cpu)
        if key in seen and seen[key] == name:  # through portable
            raise ArgumentError(f"cpu {spec!r} names {name!r} twice (portable is {','.join(_portable_names(spec, host_arch()))})")
        if key in seen:  # the runtime and AOT_CPU_VARIANT tell variants apart by CPU name
            raise ArgumentError(f"cpu {spec!r}: {seen[key]!r} and {name!r} are both {target.cpu} code for "
                                f"{target.arch}; one artifact holds one variant per CPU name")
        seen[key] = name
    return targets


def _portable_names(spec: str, arch: str) -> tuple[str, ...]:
    if arch not in PORTABLE_VARIANTS:
        raise ArgumentError(f"cpu {spec!r}: 'portable' is defined for {', '.join(PORTABLE_VARIANTS)} "
                            f"(portable-{' or portable-'.join(PORTABLE_VARIANTS)}), not {arch}; name the CPUs (e.g. native)")
    return PORTABLE_VARIANTS[arch]


def plan_lanes(targets: Sequence[CpuTarget]) -> int:
    """The packed layouts' f32 lanes for a plan that every target in `targets` runs: the
    lanes they agree on, else PLAN_LANES, which every target's code reads (a vector of
    several registers where the target's are narrower)."""
    lanes = {target.vector_lanes for target in targets}
    return lanes.pop() if len(lanes) == 1 else PLAN_LANES


def section_name(target: CpuTarget, index: int) -> str:
    """The code section of variant `index`: cpu.<arch>.<cpu> (cpu.x86_64.x86-64-v4), or
    cpu.<arch>.<index> where that is longer than a section name may be."""
    named = f"cpu.{target.arch}.{target.cpu}"
    if len(named) <= _MAX_SECTION_NAME and all(0x21 <= ord(ch) <= 0x7E for ch in named):
        return named
    return f"cpu.{target.arch}.{index}"
