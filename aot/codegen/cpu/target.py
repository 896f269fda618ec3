"""CpuTarget: the LLVM triple, CPU name and features code is generated for.

A target also says which instructions it can rely on, so emission can avoid
operations LLVM would otherwise lower to libm/libgcc calls (the generated
shared object links against nothing): rounding without SSE4.1 becomes
`floorf`, half conversion without F16C becomes `__extendhfsf2`.
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm

from aot.codegen.cpu.aarch64_features import aarch64_features
from aot.errors import ArgumentError, CodegenError

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
_TRIPLES = {"x86_64": _X86_TRIPLE, "aarch64": _AARCH64_TRIPLE}
# x86 CPUs that LLVM knows but that cannot run 64-bit code: asked for x86-64 code for one,
# LLVM aborts the whole process ("64-bit code requested on a subtarget that doesn't support
# it"), so they are refused by name first. Each was seen to abort LLVM 22; the tests check
# that every other x86 CPU LLVM lists emits code.
_X86_32BIT_ONLY = frozenset({
    "i386", "i486", "i586", "i686", "pentium", "pentium-mmx", "pentium_mmx", "pentiumpro", "pentium_pro",
    "pentium2", "pentium_ii", "pentium3", "pentium3m", "pentium_iii", "pentium_iii_no_xmm_regs", "pentium-m",
    "pentium_m", "pentium4", "pentium4m", "pentium_4", "pentium_4_sse3", "prescott", "yonah", "lakemont",
    "k6", "k6-2", "k6-3", "athlon", "athlon-tbird", "athlon-xp", "athlon-mp", "athlon-4", "c3", "c3-2",
    "geode", "winchip-c6", "winchip2",
})


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
        "x86-64-v3", "neoverse-v1"), or "triple:cpu[:features]". A name LLVM does not know,
        or an x86 CPU without 64-bit mode, is an ArgumentError that lists the names it knows."""
        if not isinstance(name, str):
            raise ArgumentError(f"cpu must be a str such as 'native' or 'znver4', got {type(name).__name__} {name!r}")
        if name in ("native", "host"):
            return CpuTarget.host()
        if ":" in name:
            parts = name.split(":")
            if len(parts) > 3 or not all(parts[:2]):
                raise ArgumentError(f"CPU '{name}' is not NAME or TRIPLE:CPU[:FEATURES] like x86_64-unknown-linux-gnu:znver4:-avx512f")
            target = CpuTarget(parts[0], parts[1], parts[2] if len(parts) > 2 else "")
        elif name in ("generic", "x86-64"):
            return CpuTarget(_X86_TRIPLE, "x86-64")
        elif name == "generic-aarch64":
            return CpuTarget(_AARCH64_TRIPLE, "generic")
        elif name.startswith(_AARCH64_NAMES):
            target = CpuTarget(_AARCH64_TRIPLE, name)
        else:  # x86 unless only aarch64 knows the name ("cortex-x4", "kryo")
            target = CpuTarget(_X86_TRIPLE, name)
            if _llvm_warnings(target) and not _llvm_warnings(CpuTarget(_AARCH64_TRIPLE, name)):
                target = CpuTarget(_AARCH64_TRIPLE, name)
        target.check()
        return target

    def check(self) -> None:
        """Raise ArgumentError unless LLVM can emit code for this target that runs in a 64-bit
        process. LLVM itself only warns about an unknown CPU or feature and then emits for a
        baseline, or aborts the process (a 32-bit CPU, a feature without its + or -)."""
        if self.arch not in _TRIPLES:
            raise ArgumentError(f"CPU '{self}': aot generates code for {' and '.join(_TRIPLES)}, not {self.arch}")
        malformed = [f for f in self.features.split(",") if f and f[0] not in "+-"]
        if malformed:
            raise ArgumentError(f"CPU '{self}': features are +NAME or -NAME, separated by commas; "
                                f"got {', '.join(repr(f) for f in malformed)}")
        if self.arch == "x86_64" and self.cpu in _X86_32BIT_ONLY:
            raise ArgumentError(f"CPU '{self.cpu}' cannot run 64-bit code, and aot generates x86-64 code only"
                                f"{_known_cpus_text(self)}")
        if self.arch == "x86_64" and self._feature("64bit") is False:
            raise ArgumentError(f"CPU '{self}': '-64bit' turns off 64-bit mode, and aot generates x86-64 code only")
        warnings = _llvm_warnings(self)
        if warnings is None:
            raise ArgumentError(f"CPU '{self}': LLVM has no target for the triple {self.triple}")
        if self.cpu in warnings:
            raise ArgumentError(f"unknown CPU '{self.cpu}' for {self.arch}{_known_cpus_text(self)}")
        if warnings:
            names = known_cpus(self.triple)[1]
            raise ArgumentError(f"unknown CPU feature(s) {', '.join(repr(w) for w in warnings)} for {self.arch}; "
                                f"LLVM knows: {', '.join(names) if names else '(it did not say)'}")

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
    def select_bounded_minmax(self) -> bool:
        """x86's maxps/minps are the compare and select (aarch64's fmax/fmin propagate NaN
        themselves: llvm.maximum is one instruction there)."""
        return self.arch == "x86_64"

    @property
    def avx512(self) -> bool:
        """32 vector registers of 16 floats (AVX-512F): room for the wider conv register tiles."""
        return self.arch == "x86_64" and self._x86_has("avx512f", _X86_AVX512)

    @property
    def avx2(self) -> bool:
        """AVX2 and FMA (x86-64-v3 and up): 16 ymm registers of 8 floats."""
        return self.arch == "x86_64" and self._x86_has("avx2", _X86_MODERN - {"ivybridge"})

    @property
    def register_lanes(self) -> int:
        """f32 lanes of one vector register: 16 on AVX-512, 8 on AVX/AVX2, 4 on SSE and NEON."""
        if self.avx512:
            return 16
        if self.arch == "x86_64" and self._x86_has("avx", _X86_MODERN):
            return 8
        return 4

    @property
    def vector_registers(self) -> int:
        """Vector registers the code may use: 32 on AVX-512 and aarch64, 16 on other x86."""
        return 32 if self.avx512 or self.arch == "aarch64" else 16

    @property
    def broadcast_operands(self) -> bool:
        """An FMA can read its broadcast scalar straight from memory (AVX-512's embedded
        broadcast), so a broadcast input takes no register of its own."""
        return self.avx512

    @property
    def vector_lanes(self) -> int:
        """f32 lanes of the packed dot/conv layouts (the layout pass's `lanes`): 16 on every
        target, so code for several targets shares one plan and one weights section. A
        vector is 1 register on AVX-512, 2 on AVX2, 4 on SSE and NEON; the microkernels
        size their tiles by registers (vector.accumulator_budget), not by vectors."""
        return 16

    def runs_on(self, machine: CpuTarget) -> bool:
        """Whether code for this target runs on `machine` (x86 only: an AVX-512 machine runs
        AVX2 and AVX-512 code, an AVX2 machine AVX2 code; other pairs are not judged)."""
        if machine.arch != "x86_64" or self.arch != "x86_64":
            return False
        return machine.avx512 or (not self.avx512 and machine.avx2)

    @property
    def code_path(self) -> str:
        """Which of the x86 code generation paths this target takes: "avx512", "avx2"
        (16-lane vectors as two ymm registers) or "narrow" (SSE4 or other ISAs)."""
        if self.avx512:
            return "avx512"
        return "avx2" if self.avx2 else "narrow"

    @property
    def x86_features(self) -> tuple[str, ...]:
        """The X86_CHECKED_FEATURES code for this target may use, in that order (the manifest's
        cpu[].x86_features, which the runtime checks before it loads the code): the CPU's own
        as LLVM defines them, then the feature string's +NAME and -NAME in order, with what
        each implies. () off x86; a CPU name missing from the table counts only its +NAMEs."""
        if self.arch != "x86_64":
            return ()
        have = _x86_closure(_X86_CPU_FEATURES.get(self.cpu, ()))
        for item in self.features.split(","):
            if item.startswith("+"):
                have |= _x86_closure((item[1:],))
            elif item.startswith("-"):  # and everything that needs it: -avx2 takes AVX-512 too
                have = {f for f in have if item[1:] not in _x86_closure((f,))}
        return tuple(f for f in X86_CHECKED_FEATURES if f in have)

    @property
    def aarch64_features(self) -> tuple[str, ...]:
        """The AARCH64_CHECKED_FEATURES code for this target may use (the manifest's
        cpu[].aarch64_features, which the runtime looks up in the kernel's hardware
        capabilities before it loads the code), as LLVM selects them for this CPU and
        feature string (aot/codegen/cpu/aarch64_features.py). () off aarch64."""
        if self.arch != "aarch64":
            return ()
        return aarch64_features(self.cpu, self.features)

    def target_machine(self) -> llvm.TargetMachine:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        try:
            target = llvm.Target.from_triple(self.triple)
        except RuntimeError as err:
            raise CodegenError(f"LLVM has no target for {self.triple}: {err}") from None
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=3, reloc="pic", codemodel="default")

    def jit_target_machine(self) -> llvm.TargetMachine:
        """The machine for code run in this process by MCJIT (the emulated GPU kernels): LLVM's JIT
        code model (large on x86-64), since MCJIT maps each section where the allocator finds room
        and a small-model 32-bit relocation between them overflows, aborting the process, once
        the address space is spread (seen with torch and JAX loaded)."""
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=3, reloc="default",
                                            codemodel="jitdefault")

    def __str__(self) -> str:
        return f"{self.triple}:{self.cpu}" + (f":{self.features}" if self.features else "")


# -- the x86 features the runtime checks (CpuTarget.x86_features) ----------------

# The x86 instruction set extensions generated code may use: the runtime looks each up with
# CPUID (and XGETBV, for the register state the OS must save) before it loads the code, so
# an artifact built for an AVX-512 machine is refused on an AVX2 one instead of dying with
# SIGILL (runtime_c/src/cpu_features.c knows the same names, LLVM's). Only extensions LLVM
# selects for plain IR: those reached through intrinsics alone (aes, sha, amx, ...) never
# appear in this compiler's code, and listing them would refuse machines that run it.
X86_CHECKED_FEATURES = (
    "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "lzcnt", "bmi", "bmi2", "movbe",
    "avx", "avx2", "fma", "f16c", "fma4", "xop", "tbm",
    "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512vbmi2",
    "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512bf16", "avx512fp16",
    "avxvnni", "avxifma", "avxvnniint8", "avxvnniint16", "avxneconvert", "gfni",
    "avx10.1", "avx10.2", "egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu",
)

# what a feature implies, as far as it reaches X86_CHECKED_FEATURES (LLVM's X86.td)
_X86_IMPLIES: dict[str, tuple[str, ...]] = {
    "ssse3": ("sse3",), "sse4.1": ("ssse3",), "sse4.2": ("sse4.1",), "avx": ("sse4.2",),
    "avx2": ("avx",), "fma": ("avx",), "f16c": ("avx",), "fma4": ("avx",), "xop": ("fma4",),
    "vaes": ("avx",), "vpclmulqdq": ("avx",),
    "avx512f": ("avx2", "fma", "f16c"),
    **{f: ("avx512f",) for f in ("avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vnni",
                                 "avx512vpopcntdq", "avx512vp2intersect")},
    **{f: ("avx512bw",) for f in ("avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512bf16")},
    "avx512fp16": ("avx512bw", "avx512dq", "avx512vl"),
    **{f: ("avx2",) for f in ("avxvnni", "avxifma", "avxvnniint8", "avxvnniint16", "avxneconvert")},
    "avx10.1": ("avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512vbmi2",
                "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512bf16", "avx512fp16"),
    "avx10.2": ("avx10.1",),
}


def _x86_closure(features: tuple[str, ...] | list[str]) -> set[str]:
    """`features` and all they imply, kept to X86_CHECKED_FEATURES."""
    seen: set[str] = set()
    todo = list(features)
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.add(f)
            todo.extend(_X86_IMPLIES.get(f, ()))
    return seen & set(X86_CHECKED_FEATURES)


# Each x86 CPU's checked features, from LLVM's processor definitions (X86.td; implied
# features follow from _X86_IMPLIES). tests/codegen/cpu/test_cpu_features.py compares the host's row
# with LLVM's own view of the host.
_V2 = ("sse4.2", "popcnt")
_V3 = (*_V2, "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe")
_V4 = (*_V3, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_ICL = (*_V4, "avx512vbmi", "avx512ifma", "avx512bitalg", "avx512vbmi2", "avx512vnni", "avx512vpopcntdq", "gfni")
_SPR = (*_ICL, "avx512bf16", "avx512fp16", "avxvnni")
_ADL = (*_V3, "gfni", "avxvnni")
_SRF = (*_ADL, "avxifma", "avxneconvert", "avxvnniint8")
_BDVER2 = ("xop", "lzcnt", "popcnt", "f16c", "bmi", "tbm", "fma")
_APX = ("egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu")
_X86_CPU_ROWS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("x86-64", "generic", "k8", "opteron", "athlon64", "athlon-fx"), ()),
    (("nocona", "k8-sse3", "opteron-sse3", "athlon64-sse3"), ("sse3",)),
    (("core2", "core_2_duo_ssse3"), ("ssse3",)),
    (("penryn", "core_2_duo_sse4_1"), ("sse4.1",)),
    (("x86-64-v2", "nehalem", "corei7", "core_i7_sse4_2", "westmere", "core_aes_pclmulqdq"), _V2),
    (("sandybridge", "corei7-avx", "core_2nd_gen_avx"), (*_V2, "avx")),
    (("ivybridge", "core-avx-i", "core_3rd_gen_avx"), (*_V2, "avx", "f16c")),
    (("x86-64-v3", "haswell", "core-avx2", "core_4th_gen_avx", "core_4th_gen_avx_tsx", "broadwell",
      "core_5th_gen_avx", "core_5th_gen_avx_tsx", "skylake", "znver1", "znver2", "znver3"), _V3),
    (("x86-64-v4", "skylake-avx512", "skx", "skylake_avx512"), _V4),
    (("cascadelake",), (*_V4, "avx512vnni")),
    (("cooperlake",), (*_V4, "avx512vnni", "avx512bf16")),
    (("cannonlake",), (*_V4, "avx512vbmi", "avx512ifma")),
    (("icelake-client", "icelake_client", "rocketlake", "icelake-server", "icelake_server", "tigerlake"), _ICL),
    (("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "graniterapids_d"), _SPR),
    # LLVM's definition was not at hand for diamondrapids: Granite Rapids' plus what Intel
    # lists (AVX10.2, APX, the AVX-VNNI-INT and IFMA extensions)
    (("diamondrapids",), (*_SPR, "avxifma", "avxneconvert", "avxvnniint8", "avxvnniint16", "avx10.2", *_APX)),
    (("bonnell", "atom"), ("ssse3", "movbe")),
    (("silvermont", "slm", "atom_sse4_2", "atom_sse4_2_movbe", "goldmont", "goldmont-plus", "goldmont_plus"),
     (*_V2, "movbe")),
    (("tremont",), (*_V2, "movbe", "gfni")),
    (("alderlake", "raptorlake", "meteorlake", "gracemont"), _ADL),
    (("sierraforest", "grandridge", "arrowlake"), _SRF),
    (("arrowlake-s", "arrowlake_s", "lunarlake", "pantherlake", "clearwaterforest"), (*_SRF, "avxvnniint16")),
    (("knl", "mic_avx512"), (*_V3, "avx512f", "avx512cd")),
    (("knm",), (*_V3, "avx512f", "avx512cd", "avx512vpopcntdq")),
    (("amdfam10", "barcelona"), ("sse3", "lzcnt", "popcnt")),
    (("btver1",), ("ssse3", "lzcnt", "popcnt")),
    (("btver2",), ("ssse3", "lzcnt", "popcnt", "avx", "bmi", "f16c", "movbe")),
    (("bdver1",), ("xop", "lzcnt", "popcnt")),
    (("bdver2", "bdver3"), _BDVER2),
    (("bdver4",), (*_BDVER2, "avx2", "bmi2", "movbe")),
    (("znver4",), (*_ICL, "avx512bf16")),
    (("znver5",), (*_ICL, "avx512bf16", "avxvnni")),
)
_X86_CPU_FEATURES: dict[str, tuple[str, ...]] = {name: row for names, row in _X86_CPU_ROWS for name in names}


# one CPU per x86 code generation path (CpuTarget.code_path)
_PATH_CPUS = ("skylake-avx512", "haswell", "x86-64-v2")


def runnable_code_paths(machine: CpuTarget) -> list[CpuTarget]:
    """`machine`, then one target for each other x86 code path it can run: a kernel that is
    right on one instruction set can be wrong on another (issue 9's max pool was, on AVX2 only)."""
    others = [CpuTarget.from_name(name) for name in _PATH_CPUS]
    return [machine, *(t for t in others if t.runs_on(machine) and t.code_path != machine.code_path)]


def known_cpus(triple: str) -> tuple[list[str], list[str]]:
    """(CPU names, feature names) LLVM knows for `triple`, as `llc -mcpu=help` lists them.

    Asked in a child process: LLVM prints that list once per process, to its stderr."""
    script = ("import sys, llvmlite.binding as llvm; llvm.initialize_all_targets(); "
              "llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu='help')")
    try:
        listing = subprocess.run([sys.executable, "-c", script, triple], capture_output=True, text=True, timeout=120).stderr
    except (OSError, subprocess.SubprocessError):
        return [], []
    cpus, features, section = [], [], None
    for line in listing.splitlines():
        if line.startswith("Available CPUs"):
            section = cpus
        elif line.startswith("Available features"):
            section = features
        elif section is not None and line.startswith("  ") and line.split():
            section.append(line.split()[0])
    return sorted(set(cpus)), sorted(set(features))


def _known_cpus_text(target: CpuTarget) -> str:
    """" (did you mean ...?); use 'native' ... or one of ..." to end an error about `target.cpu`."""
    names = known_cpus(target.triple)[0]
    if target.arch == "x86_64":
        names = [n for n in names if n not in _X86_32BIT_ONLY]
    close = difflib.get_close_matches(target.cpu, names, n=3)
    guess = f" (did you mean {' or '.join(close)}?)" if close else ""
    if not names:
        return f"{guess}; use 'native' for this machine (LLVM did not list the CPUs it knows)"
    return f"{guess}; use 'native' for this machine, or one of the {target.arch} CPUs LLVM knows: {', '.join(names)}"


_UNRECOGNIZED = re.compile(r"^'(.*)' is not a recognized (?:processor|feature) for this target")


def _llvm_warnings(target: CpuTarget) -> list[str] | None:
    """The CPU and feature names of `target` that LLVM does not recognize (it only warns about
    them, on its own stderr), or None when LLVM has no target for the triple."""
    llvm.initialize_all_targets()
    try:
        llvm_target = llvm.Target.from_triple(target.triple)
    except RuntimeError:
        return None
    printed = _stderr_of(lambda: llvm_target.create_target_machine(cpu=target.cpu, features=target.features, opt=3,
                                                                   reloc="pic", codemodel="default"))
    names = [m.group(1) for m in map(_UNRECOGNIZED.match, printed.splitlines()) if m]
    return list(dict.fromkeys(names))


def _stderr_of(fn: Callable[[], object]) -> str:
    """What `fn` writes to file descriptor 2, where LLVM prints, past Python's sys.stderr.

    Output of other threads during the call lands there too (and is dropped): it is brief,
    and only compile-time target checks use it."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        try:
            saved: int | None = os.dup(2)
        except OSError:  # no descriptor 2 (a daemon): lend it the sink, then close it again
            saved = None
        os.dup2(sink.fileno(), 2)
        try:
            fn()
        finally:
            if saved is None:
                os.close(2)
            else:
                os.dup2(saved, 2)
                os.close(saved)
        sink.seek(0)
        return sink.read().decode(errors="replace")
