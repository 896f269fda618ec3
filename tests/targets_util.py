"""Which CPU targets' code this host can run (for tests that build for another CPU)."""
from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.target import runnable_code_paths

HOST = CpuTarget.host()


def host_runs(target: CpuTarget) -> bool:
    return target.runs_on(HOST)


def cpus_to_check() -> list[CpuTarget]:
    """The host, then one target for each other x86 code path this host can run."""
    return runnable_code_paths(HOST)
