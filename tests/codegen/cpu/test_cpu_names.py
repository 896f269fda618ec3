"""--cpu names: what LLVM knows is accepted, anything else is an ArgumentError that lists the
known names, and LLVM never warns on stderr or aborts the process (issue 11)."""
import subprocess
import sys

import pytest

from aot.codegen.cpu.target import _X86_32BIT_ONLY, CpuTarget, known_cpus
from aot.errors import ArgumentError

X86 = "x86_64-unknown-linux-gnu"


@pytest.mark.parametrize("name, triple, cpu", [
    ("znver4", X86, "znver4"),
    ("x86-64-v3", X86, "x86-64-v3"),
    ("generic", X86, "x86-64"),
    ("neoverse-v1", "aarch64-unknown-linux-gnu", "neoverse-v1"),
    ("cortex-x4", "aarch64-unknown-linux-gnu", "cortex-x4"),  # only aarch64 knows it: no prefix list needed
    (f"{X86}:haswell:-fma,+avx2", X86, "haswell"),
])
def test_known_names(name, triple, cpu):
    target = CpuTarget.from_name(name)
    assert (target.triple, target.cpu) == (triple, cpu)


def test_unknown_cpu_lists_the_known_names_and_llvm_prints_nothing(capfd):
    with pytest.raises(ArgumentError) as info:
        CpuTarget.from_name("pentium9")
    message = str(info.value)
    assert message.startswith("unknown CPU 'pentium9' for x86_64; use 'native' for this machine, or one of the x86_64 CPUs")
    assert all(name in message for name in ("znver4", "skylake-avx512", "x86-64-v3"))
    assert "pentium4" not in message  # known to LLVM, but no x86-64 code runs on it
    assert capfd.readouterr().err == ""  # LLVM's "not a recognized processor" warnings were caught


def test_unknown_cpu_suggests_close_names():
    with pytest.raises(ArgumentError, match=r"unknown CPU 'znver9' for x86_64 \(did you mean znver5 or znver4"):
        CpuTarget.from_name("znver9")
    with pytest.raises(ArgumentError, match=r"unknown CPU 'neoverse-v9' for aarch64 \(did you mean neoverse-v"):
        CpuTarget.from_name("neoverse-v9")


@pytest.mark.parametrize("name", ["pentium4", "i686", "athlon-xp", f"{X86}:prescott"])
def test_32bit_only_cpus_are_refused(name):
    with pytest.raises(ArgumentError, match=r"cannot run 64-bit code, and aot generates x86-64 code only.*; use 'native' .*znver4"):
        CpuTarget.from_name(name)


@pytest.mark.parametrize("name, message", [
    (f"{X86}:znver4:+bogus", r"unknown CPU feature\(s\) '\+bogus' for x86_64; LLVM knows: .*avx512f"),
    (f"{X86}:znver4:avx2", r"features are \+NAME or -NAME.*got 'avx2'"),  # LLVM asserts on a flag without its sign
    (f"{X86}:x86-64:-64bit", r"'-64bit' turns off 64-bit mode"),
    (f"{X86}:bogus", r"unknown CPU 'bogus' for x86_64"),
    ("riscv64-unknown-linux-gnu:generic-rv64", r"aot generates code for x86_64 and aarch64, not riscv64"),
    ("x86_64:znver4:+avx2:extra", r"is not NAME or TRIPLE:CPU\[:FEATURES\]"),
])
def test_malformed_targets(name, message):
    with pytest.raises(ArgumentError, match=message):
        CpuTarget.from_name(name)


def test_every_32bit_only_name_is_one_llvm_knows():
    cpus, features = known_cpus(X86)
    assert "znver4" in cpus and "avx2" in features
    assert _X86_32BIT_ONLY <= set(cpus)


def test_every_other_x86_cpu_llvm_lists_emits_64bit_code():
    """The 32-bit list is complete: a CPU missing from it would abort LLVM, and this process."""
    names = [n for n in known_cpus(X86)[0] if n not in _X86_32BIT_ONLY]
    script = """
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
target = llvm.Target.from_triple(sys.argv[1])
module = llvm.parse_assembly("define float @f(float %x) {\\n  %y = fadd float %x, 1.0\\n  ret float %y\\n}\\n")
for name in sys.argv[2:]:
    print(name, flush=True)
    target.create_target_machine(cpu=name, opt=2, reloc="pic", codemodel="default").emit_object(module)
print("done")
"""
    proc = subprocess.run([sys.executable, "-c", script, X86, *names], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.endswith("done\n"), \
        f"LLVM failed on CPU {proc.stdout.split()[-1:]}: {proc.stderr[-500:]}"
    assert len(names) > 50


def test_names_are_checked_in_a_process_without_stderr():
    """A daemon may have no descriptor 2: the check lends LLVM one and closes it again."""
    script = """
import os
os.close(2)
from aot.codegen.cpu.target import CpuTarget
from aot.errors import ArgumentError
try:
    CpuTarget.from_name("pentium9")
except ArgumentError as err:
    print(str(err)[:26])
print(CpuTarget.from_name("znver4").cpu)
try:
    os.fstat(2)
except OSError:
    print("closed")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines() == ["unknown CPU 'pentium9' for", "znver4", "closed"], proc.stdout
