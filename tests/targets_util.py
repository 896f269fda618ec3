"""Which CPU targets' code this host can run (for tests that build for another CPU)."""
from aot.codegen.cpu import CpuTarget

HOST = CpuTarget.host()


def host_runs(target: CpuTarget) -> bool:
    """x86 only: an AVX-512 host runs AVX2 and AVX-512 code, an AVX2 host AVX2 code."""
    if HOST.arch != "x86_64" or target.arch != "x86_64":
        return False
    return HOST.avx512 or (not target.avx512 and HOST.vector_lanes == 8)


# one CPU per x86 code generation path: AVX-512, AVX2 (8-lane packing, 16-lane vectors split
# in two), SSE4 (no masked loads, no FMA)
OTHER_X86_CPUS = ("skylake-avx512", "haswell", "x86-64-v2")


def cpus_to_check() -> list[CpuTarget]:
    """The host, then every other x86 code path this host can run: a kernel that is right
    on one instruction set can be wrong on another (issue 9's max pool was, on AVX2 only)."""
    others = [CpuTarget.from_name(name) for name in OTHER_X86_CPUS]
    return [HOST, *(t for t in others if host_runs(t) and _code_path(t) != _code_path(HOST))]


def _code_path(target: CpuTarget) -> str:
    if target.avx512:
        return "avx512"
    return "avx2" if target.vector_lanes == 8 else "narrow"
