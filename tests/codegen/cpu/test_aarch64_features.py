"""The aarch64 extensions an artifact's code may use (CpuTarget.aarch64_features), asked of
LLVM by what it selects (aot/codegen/cpu/aarch64_features.py), and the runtime's table of
them (runtime_c/src/cpu_features_aarch64.c)."""
from __future__ import annotations

import re

import pytest

from aot.codegen.cpu.aarch64_features import AARCH64_CHECKED_FEATURES
from aot.codegen.cpu.target import CpuTarget, known_cpus
from paths_util import RUNTIME_C

TRIPLE = "aarch64-unknown-linux-gnu"


@pytest.mark.parametrize("cpu,expected", [
    ("generic-aarch64", ()),
    ("cortex-a57", ()),  # Armv8.0: nothing past NEON
    ("neoverse-n1", ("lse", "fullfp16", "dotprod")),
    ("neoverse-v1", ("lse", "fullfp16", "dotprod", "i8mm", "bf16", "sve")),
    ("neoverse-v2", ("lse", "fullfp16", "dotprod", "i8mm", "bf16", "sve", "sve2")),
    ("a64fx", ("lse", "fullfp16", "sve")),
    ("apple-m4", ("lse", "fullfp16", "dotprod", "i8mm", "bf16")),  # Armv9.2 without SVE
])
def test_named_cpus_list_what_llvm_selects_for_them(cpu, expected):
    assert CpuTarget.from_name(cpu).aarch64_features == expected


def test_the_feature_string_adds_and_removes():
    assert "sve" in CpuTarget(TRIPLE, "neoverse-n1", "+sve").aarch64_features
    without = CpuTarget(TRIPLE, "neoverse-v1", "-sve").aarch64_features
    assert "sve" not in without and "bf16" in without
    assert CpuTarget(TRIPLE, "generic", "+mops,+cssc").aarch64_features == ("cssc", "mops")


def test_x86_targets_list_none():
    assert CpuTarget.from_name("znver4").aarch64_features == ()


def test_every_aarch64_cpu_llvm_knows_is_asked_without_failing():
    names = known_cpus(TRIPLE)[0]
    assert "neoverse-v1" in names
    for name in names:
        features = CpuTarget(TRIPLE, name).aarch64_features
        assert features == tuple(f for f in AARCH64_CHECKED_FEATURES if f in features), name
        assert "sve" in features or "sve2" not in features, name


def test_the_runtime_knows_every_name_the_compiler_writes():
    source = (RUNTIME_C / "src" / "cpu_features_aarch64.c").read_text()
    table = source[source.index("kFeatures[] = {"):]
    table = table[:table.index("};")]
    assert tuple(re.findall(r'\{"([^"]+)",', table)) == AARCH64_CHECKED_FEATURES
