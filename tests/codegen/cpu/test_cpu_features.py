"""The x86 features an artifact's code needs: written by the compiler (manifest
cpu[].x86_features, from the CpuTarget used), checked by the C runtime at open
against CPUID and XGETBV (runtime_c/src/cpu_features.c), issue 11.

LLVM's own view of this machine (llvm.get_host_cpu_features, also CPUID and
XGETBV) is the reference for both sides: the compiler's table row for the
host's CPU name, and which features the runtime finds missing."""
from __future__ import annotations

import platform

import llvmlite.binding as llvm
import numpy as np
import pytest
from onnx import TensorProto, helper

from aot.artifact import pack_artifact, read_artifact
from aot.codegen.cpu.target import X86_CHECKED_FEATURES, CpuTarget
from aot.driver import compile_model
from aot.errors import ArtifactError
from aot.runtime.session import Session

X86 = platform.machine() == "x86_64"
needs_x86 = pytest.mark.skipif(not X86, reason="x86-64 features are checked on x86-64 machines")

V3 = ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "lzcnt", "bmi", "bmi2", "movbe", "avx", "avx2", "fma", "f16c")
V4 = (*V3, "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")


def _host_has() -> dict[str, bool]:
    return dict(llvm.get_host_cpu_features())


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "twice", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def native():
    return compile_model(_model(), cpu="native")


def _with_features(artifact: bytes, features: list[str] | None) -> bytes:
    """The artifact with its cpu entry's x86_features replaced (None: removed), CRCs recomputed."""
    art = read_artifact(artifact)
    manifest = dict(art.manifest)
    entry = {k: v for k, v in manifest["cpu"][0].items() if k != "x86_features"}
    if features is not None:
        entry["x86_features"] = features
    manifest["cpu"] = [entry]
    return pack_artifact(manifest, [(n, d) for n, d in art.sections.items() if n != "manifest"])


def _runs(artifact: bytes) -> None:
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    with Session(artifact) as session:
        np.testing.assert_array_equal(session.run(None, {"x": x})[0], x + x)


def test_named_cpus_list_what_llvm_defines_for_them():
    assert CpuTarget.from_name("x86-64").x86_features == ()
    assert CpuTarget.from_name("x86-64-v3").x86_features == V3
    assert CpuTarget.from_name("haswell").x86_features == V3
    assert CpuTarget.from_name("skylake-avx512").x86_features == V4
    zen4 = CpuTarget.from_name("znver4").x86_features
    assert set(V4) < set(zen4) and {"avx512bf16", "avx512vnni", "gfni"} <= set(zen4)
    assert "avx512fp16" not in zen4 and "avxvnni" not in zen4
    assert CpuTarget.from_name("neoverse-v1").x86_features == ()


def test_the_feature_string_adds_and_removes_with_what_each_implies():
    triple = "x86_64-unknown-linux-gnu"
    assert CpuTarget(triple, "x86-64", "+avx2").x86_features == ("sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2")
    no_avx2 = CpuTarget(triple, "znver4", "-avx2").x86_features
    assert "avx2" not in no_avx2 and not any(f.startswith("avx512") for f in no_avx2)
    assert {"avx", "fma", "f16c"} <= set(no_avx2)  # they do not need AVX2
    assert CpuTarget(triple, "x86-64-v3", "-avx2,+avx2").x86_features == V3


@needs_x86
def test_the_table_row_of_this_cpu_matches_llvms_view_of_it():
    host = CpuTarget.host()
    by_name = CpuTarget(host.triple, host.cpu)
    if not by_name.x86_features and host.x86_features:
        pytest.skip(f"no table row for this CPU ({host.cpu})")
    assert by_name.x86_features == host.x86_features
    has = _host_has()
    assert host.x86_features == tuple(f for f in X86_CHECKED_FEATURES if has.get(f))


@needs_x86
def test_the_compiler_writes_the_features_of_the_target_it_used(native):
    assert native.manifest["cpu"][0]["x86_features"] == list(CpuTarget.host().x86_features)
    assert read_artifact(native.artifact).manifest["cpu"][0]["x86_features"] == list(CpuTarget.host().x86_features)
    _runs(native.artifact)
    v3 = compile_model(_model(), cpu="x86-64-v3")
    assert v3.manifest["cpu"][0]["x86_features"] == list(V3)
    assert compile_model(_model(), cpu="x86-64").manifest["cpu"][0]["x86_features"] == []


@needs_x86
def test_the_runtime_names_every_feature_this_cpu_lacks(native):
    has = _host_has()
    lacking = [f for f in X86_CHECKED_FEATURES if not has.get(f)]
    assert lacking  # fma4, xop, tbm (AMD Bulldozer only) at least
    with pytest.raises(ArtifactError) as failure:
        Session(_with_features(native.artifact, list(X86_CHECKED_FEATURES)))
    message = str(failure.value)
    head = f"this CPU lacks {len(lacking)} feature{'s' if len(lacking) > 1 else ''} the code needs (built for {native.manifest['cpu'][0]['cpu']}): "
    assert head in message
    named = [item.split(" (")[0] for item in message.split(head, 1)[1].split(", ")]
    assert named == lacking  # every one the runtime finds missing is one LLVM finds missing, and no other


@needs_x86
def test_an_artifact_that_needs_one_missing_feature_fails_naming_it(native):
    missing = next(f for f in X86_CHECKED_FEATURES if not _host_has().get(f))
    demands = [*CpuTarget.host().x86_features, missing]
    with pytest.raises(ArtifactError, match=f"lacks 1 feature the code needs .*: {missing}$"):
        Session(_with_features(native.artifact, demands))


@needs_x86
def test_artifacts_without_the_field_or_with_what_this_cpu_has_still_open(native):
    _runs(_with_features(native.artifact, None))  # an older compiler's artifact
    _runs(_with_features(native.artifact, []))
    _runs(_with_features(native.artifact, list(CpuTarget.host().x86_features)))


@pytest.mark.skipif(X86, reason="on x86-64 the list is checked feature by feature")
def test_other_architectures_refuse_any_x86_list(native):
    with pytest.raises(ArtifactError, match="not an x86-64 machine"):
        Session(_with_features(native.artifact, ["avx2"]))
