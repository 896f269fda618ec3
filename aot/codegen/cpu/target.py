"""CpuTarget: the LLVM triple, CPU name and features code is generated for.

A target also says which instructions it can rely on, so emission can avoid
operations LLVM would otherwise lower to libm/libgcc calls (the generated
shared object links against nothing): rounding without SSE4.1 becomes
`floorf`, half conversion without F16C becomes `__extendhfsf2`.
"""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.binding as llvm

from aot.errors import CodegenError

_X86_TRIPLE = "x86_64-unknown-linux-gnu"
_AARCH64_TRIPLE = "aarch64-unknown-linux-gnu"

# x86 CPUs (LLVM names) that have SSE4.1 and F16C; anything not listed is assumed
# to lack them unless its feature string says otherwise (slower, never wrong).
_X86_MODERN = frozenset({
    "x86-64-v3", "x86-64-v4", "haswell", "broadwell", "skylake", "skylake-avx512", "cascadelake",
    "cooperlake", "cannonlake", "icelake-client", "icelake-server", "rocketlake", "tigerlake",
    "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "alderlake", "raptorlake",
    "meteorlake", "arrowlake", "arrowlake-s", "lunarlake", "pantherlake", "gracemont", "diamondrapids",
    "znver1", "znver2", "znver3", "znver4", "znver5", "ivybridge",
})
_X86_AVX512 = frozenset({
    "x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client", "icelake-server",
    "rocketlake", "tigerlake", "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
    "diamondrapids", "znver4", "znver5",
})
_X86_SSE41_ONLY = frozenset({"x86-64-v2", "nehalem", "westmere", "sandybridge", "silvermont", "goldmont", "tremont", "btver2", "bdver1", "bdver2", "bdver3", "bdver4"})
_AARCH64_NAMES = ("neoverse", "cortex-a", "apple-", "ampere", "a64fx", "thunderx", "generic-arm", "aarch64", "oryon", "grace")


@dataclass(frozen=True)
class CpuTarget:
    """What the CPU backend emits code for. `features` is an LLVM feature string ("+avx2,-avx512f")."""

    triple: str
    cpu: str
    features: str = ""

    @property
    def arch(self) -> str:
        return self.triple.split("-", 1)[0]

    @staticmethod
    def host() -> CpuTarget:
        """The machine the compiler runs on, with its exact features (sorted, so output is deterministic)."""
        features = llvm.get_host_cpu_features().flatten()
        ordered = ",".join(sorted(f for f in features.split(",") if f))
        return CpuTarget(llvm.get_process_triple(), llvm.get_host_cpu_name(), ordered)

    @staticmethod
    def from_name(name: str) -> CpuTarget:
        """"native" (the host), "generic" (baseline x86-64), an LLVM CPU name ("znver4",
        "x86-64-v3", "neoverse-v1"), or "triple:cpu[:features]"."""
        if name in ("native", "host"):
            return CpuTarget.host()
        if ":" in name:
            parts = name.split(":")
            return CpuTarget(parts[0], parts[1], parts[2] if len(parts) > 2 else "")
        if name in ("generic", "x86-64"):
            return CpuTarget(_X86_TRIPLE, "x86-64")
        if name == "generic-aarch64":
            return CpuTarget(_AARCH64_TRIPLE, "generic")
        if name.startswith(_AARCH64_NAMES):
            return CpuTarget(_AARCH64_TRIPLE, name)
        return CpuTarget(_X86_TRIPLE, name)

    # -- capabilities --------------------------------------------------------
    def _feature(self, flag: str) -> bool | None:
        for item in self.features.split(","):
            if item == f"+{flag}":
                return True
            if item == f"-{flag}":
                return False
        return None

    def _x86_has(self, flag: str, known_cpus: frozenset[str]) -> bool:
        """x86 feature `flag`: as the feature string says, else whether the CPU name is one known to have it."""
        explicit = self._feature(flag)
        return explicit if explicit is not None else self.cpu in known_cpus

    @property
    def native_rounding(self) -> bool:
        """floor/ceil/roundeven lower to instructions (not libm calls)."""
        return self.arch == "aarch64" or self._x86_has("sse4.1", _X86_MODERN | _X86_SSE41_ONLY)

    @property
    def native_f16(self) -> bool:
        """fpext/fptrunc between half and float lower to instructions."""
        return self.arch == "aarch64" or self._x86_has("f16c", _X86_MODERN)

    @property
    def avx512(self) -> bool:
        """32 vector registers of 16 floats (AVX-512F): room for the wider conv register tiles."""
        return self.arch == "x86_64" and self._x86_has("avx512f", _X86_AVX512)

    @property
    def vector_lanes(self) -> int:
        """f32 lanes of the packed dot/conv layouts (the layout pass's `lanes`): one
        register per vector on AVX-512 (16) and AVX2 (8). Other targets keep 16, a
        vector of several registers (not tuned: NEON would want 4)."""
        if self.avx512:
            return 16
        if self.arch == "x86_64" and self._x86_has("avx2", _X86_MODERN - {"ivybridge"}):
            return 8
        return 16

    def runs_on(self, machine: CpuTarget) -> bool:
        """Whether code for this target runs on `machine` (x86 only: an AVX-512 machine runs
        AVX2 and AVX-512 code, an AVX2 machine AVX2 code; other pairs are not judged)."""
        if machine.arch != "x86_64" or self.arch != "x86_64":
            return False
        return machine.avx512 or (not self.avx512 and machine.vector_lanes == 8)

    @property
    def code_path(self) -> str:
        """Which of the x86 code generation paths this target takes: "avx512", "avx2"
        (8-lane packing, 16-lane vectors split in two) or "narrow" (SSE4 or other ISAs)."""
        if self.avx512:
            return "avx512"
        return "avx2" if self.vector_lanes == 8 else "narrow"

    def target_machine(self) -> llvm.TargetMachine:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        try:
            target = llvm.Target.from_triple(self.triple)
        except RuntimeError as err:
            raise CodegenError(f"LLVM has no target for {self.triple}: {err}") from None
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="default")

    def __str__(self) -> str:
        return f"{self.triple}:{self.cpu}" + (f":{self.features}" if self.features else "")


# one CPU per x86 code generation path (CpuTarget.code_path)
_PATH_CPUS = ("skylake-avx512", "haswell", "x86-64-v2")


def runnable_code_paths(machine: CpuTarget) -> list[CpuTarget]:
    """`machine`, then one target for each other x86 code path it can run: a kernel that is
    right on one instruction set can be wrong on another (issue 9's max pool was, on AVX2 only)."""
    others = [CpuTarget.from_name(name) for name in _PATH_CPUS]
    return [machine, *(t for t in others if t.runs_on(machine) and t.code_path != machine.code_path)]
