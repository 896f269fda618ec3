"""Which CPU targets' code this host can run (for tests that build for another CPU)."""
from aot.codegen.cpu import CpuTarget

HOST = CpuTarget.host()


def host_runs(target: CpuTarget) -> bool:
    """x86 only: an AVX-512 host runs AVX2 and AVX-512 code, an AVX2 host AVX2 code."""
    if HOST.arch != "x86_64" or target.arch != "x86_64":
        return False
    return HOST.avx512 or (not target.avx512 and HOST.vector_lanes == 8)
