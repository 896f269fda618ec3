"""--cpu as the compiler reads it (aot/codegen/cpu/targets.py): portable, native, one CPU, a comma
list of variants; AOT_CPU as the default; what each variant's manifest entry holds."""
from __future__ import annotations

import platform

import pytest
from onnx import TensorProto, helper

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.targets import CPU_ENV, default_cpu, plan_lanes, resolve_cpu_targets, section_name
from aot.driver import compile_model
from aot.errors import ArgumentError

needs_x86 = pytest.mark.skipif(platform.machine() != "x86_64", reason="portable means x86-64 levels on x86-64 hosts")


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_x86
def test_portable_is_avx512_then_avx2():
    assert [t.cpu for t in resolve_cpu_targets("portable")] == ["x86-64-v4", "x86-64-v3"]


def test_portable_arch_names_that_row_whatever_the_host():
    assert [t.cpu for t in resolve_cpu_targets("portable-x86_64")] == ["x86-64-v4", "x86-64-v3"]
    assert [(t.arch, t.cpu) for t in resolve_cpu_targets("portable-aarch64")] == [
        ("aarch64", "neoverse-v1"), ("aarch64", "neoverse-n1"), ("aarch64", "generic")]
    assert len(resolve_cpu_targets("portable-x86_64,portable-aarch64")) == 5
    with pytest.raises(ArgumentError, match="'portable' is defined for x86_64, aarch64.*not riscv64"):
        resolve_cpu_targets("portable-riscv64")


def test_a_list_keeps_its_order_and_may_mix_architectures():
    targets = resolve_cpu_targets("x86-64-v3, x86-64-v4,neoverse-n1")
    assert [(t.arch, t.cpu) for t in targets] == [("x86_64", "x86-64-v3"), ("x86_64", "x86-64-v4"),
                                                  ("aarch64", "neoverse-n1")]


def test_native_is_this_machine():
    assert resolve_cpu_targets("native") == [CpuTarget.host()]


@pytest.mark.parametrize("spec, message", [
    ("x86-64-v3,,x86-64-v4", "has an empty item"),
    ("x86-64-v3,", "has an empty item"),
    ("", "has an empty item"),
    ("x86-64-v3,x86-64-v3", "names 'x86-64-v3' twice"),
    pytest.param("portable,x86-64-v3", r"names 'x86-64-v3' twice \(portable is x86-64-v4,x86-64-v3\)", marks=needs_x86),
    ("znver4,x86_64-unknown-linux-gnu:znver4:-avx512f", "are both znver4 code for x86_64"),
    ("x86-64-v3,not-a-cpu", "unknown CPU 'not-a-cpu'"),
])
def test_a_wrong_list_is_refused_before_any_work(spec, message):
    with pytest.raises(ArgumentError, match=message):
        resolve_cpu_targets(spec)
    with pytest.raises(ArgumentError, match=message):
        compile_model("no-such-model.onnx", cpu=spec)  # refused before the model is read


@needs_x86
def test_aot_cpu_gives_the_default(monkeypatch):
    monkeypatch.setenv(CPU_ENV, "x86-64-v3")
    assert default_cpu() == "x86-64-v3"
    assert [c["cpu"] for c in compile_model(_model()).manifest["cpu"]] == ["x86-64-v3"]
    monkeypatch.delenv(CPU_ENV)
    assert default_cpu() == "portable"
    monkeypatch.setenv(CPU_ENV, " ")  # blank: unset
    assert default_cpu() == "portable"


def test_the_plan_has_one_layout_for_every_variant():
    assert plan_lanes([CpuTarget.from_name("x86-64-v4")]) == 16
    assert plan_lanes(resolve_cpu_targets("x86-64-v4,x86-64-v3,neoverse-n1")) == 16


def test_section_names_fit_the_section_table():
    assert section_name(CpuTarget.from_name("x86-64-v4"), 0) == "cpu.x86_64.x86-64-v4"
    assert section_name(CpuTarget.from_name("neoverse-n1"), 1) == "cpu.aarch64.neoverse-n1"
    assert section_name(CpuTarget.from_name("graniterapids-d"), 2) == "cpu.x86_64.2"  # 26 characters


def test_each_variant_has_its_entry_and_section_over_one_weights_section():
    result = compile_model(_model(), cpu="x86-64-v4,x86-64-v3,neoverse-n1")
    cpus = result.manifest["cpu"]
    assert [(c["arch"], c["cpu"], c["section"]) for c in cpus] == [
        ("x86_64", "x86-64-v4", "cpu.x86_64.x86-64-v4"), ("x86_64", "x86-64-v3", "cpu.x86_64.x86-64-v3"),
        ("aarch64", "neoverse-n1", "cpu.aarch64.neoverse-n1")]
    assert "avx512f" in cpus[0]["x86_features"] and "avx512f" not in cpus[1]["x86_features"]
    assert "x86_features" not in cpus[2]
    # the top-level kernels are the first variant's; every other lists its own
    assert "kernels" not in cpus[0]
    for entry in cpus[1:]:
        assert [k["symbol"] for k in entry["kernels"]] == [k["symbol"] for k in result.manifest["kernels"]]
    names = [name for name, _ in _sections(result.artifact)]
    assert names.count("weights") == 1 and all(c["section"] in names for c in cpus)
    assert [c["triple"].split("-")[0] for c in result.tooling["cpu"]] == ["x86_64", "x86_64", "aarch64"]


def _sections(artifact: bytes) -> list[tuple[str, int]]:
    from aot.artifact import read_artifact

    return [(s.name, s.raw_size) for s in read_artifact(artifact).table]
