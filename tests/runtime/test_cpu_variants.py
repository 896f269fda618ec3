"""One portable artifact (the default --cpu on x86-64: x86-64-v4 and x86-64-v3 code over one plan)
runs on AVX-512 and AVX2 machines: each variant forced with AOT_CPU_VARIANT against onnxruntime,
and the runtime's choice (runtime_c/src/model.c) with manifests edited to say what a CPU lacks."""
from __future__ import annotations

import platform

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.artifact import pack_artifact, read_artifact
from aot.codegen.cpu import CpuTarget
from aot.driver import compile_model
from aot.errors import ArtifactError
from aot.runtime.session import Session

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the portable variants are x86-64 levels")

HOST = CpuTarget.host()
FORCE = "AOT_CPU_VARIANT"


def _model():
    """conv + relu + max pool + dense: packed layouts whose work items follow the target's tiles."""
    rng = np.random.default_rng(0)
    k = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.2, "k")
    w = numpy_helper.from_array(rng.standard_normal((16 * 7 * 7, 10)).astype(np.float32) * 0.05, "w")
    nodes = [helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "w"], ["y"])]
    graph = helper.make_graph(nodes, "convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 14, 14])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], [k, w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def portable():
    model = _model()
    result = compile_model(model, cpu="portable")
    x = np.random.default_rng(1).standard_normal((2, 3, 14, 14)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return result, x, want


def _reseal(artifact: bytes, edit) -> bytes:
    """The artifact with its manifest edited by `edit` (in place), checksums recomputed."""
    art = read_artifact(artifact)
    manifest = {k: v for k, v in art.manifest.items()}
    manifest["cpu"] = [dict(c) for c in manifest["cpu"]]
    edit(manifest)
    return pack_artifact(manifest, [(n, d) for n, d in art.sections.items() if n != "manifest"])


def _run(artifact: bytes, x: np.ndarray) -> tuple[str, np.ndarray]:
    with Session(artifact, threads=2) as session:
        return session.cpu_variant, session.run(None, {"x": x})[0]


def test_portable_is_the_default_and_holds_both_levels(portable, monkeypatch):
    result, _, _ = portable
    assert [c["cpu"] for c in result.manifest["cpu"]] == ["x86-64-v4", "x86-64-v3"]
    monkeypatch.delenv("AOT_CPU", raising=False)
    assert [c["cpu"] for c in compile_model(_model()).manifest["cpu"]] == ["x86-64-v4", "x86-64-v3"]


@pytest.mark.parametrize("variant", ["x86-64-v3", "x86-64-v4"])
def test_each_variant_runs_and_matches_onnxruntime(portable, monkeypatch, variant):
    if not CpuTarget.from_name(variant).runs_on(HOST):
        pytest.skip(f"this CPU ({HOST.cpu}) cannot run {variant} code")
    result, x, want = portable
    monkeypatch.setenv(FORCE, variant)
    chosen, got = _run(result.artifact, x)
    assert chosen == variant
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_best_variant_this_cpu_runs_is_chosen(portable, monkeypatch):
    result, x, want = portable
    monkeypatch.delenv(FORCE, raising=False)
    chosen, got = _run(result.artifact, x)
    assert chosen == ("x86-64-v4" if HOST.avx512 else "x86-64-v3")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_variant_whose_features_the_cpu_lacks_is_passed_over(portable, monkeypatch):
    result, x, want = portable
    monkeypatch.delenv(FORCE, raising=False)
    # a feature no CPU has (unknown to the runtime counts as missing): the next variant runs
    edited = _reseal(result.artifact, lambda m: m["cpu"][0].update(x86_features=["avx2", "avx9000"]))
    chosen, got = _run(edited, x)
    assert chosen == "x86-64-v3"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_when_no_variant_runs_the_error_names_each_and_what_it_lacks(portable, monkeypatch):
    result, _, _ = portable
    monkeypatch.delenv(FORCE, raising=False)

    def lacking(m):
        m["cpu"][0]["x86_features"] = ["avx9000"]
        m["cpu"][1]["x86_features"] = ["avx2", "sse9"]

    with pytest.raises(ArtifactError, match=r"none of the artifact's 2 x86_64 code variants runs on this CPU: "
                                            r"x86-64-v4 lacks avx9000 \(unknown to this runtime\); "
                                            r"x86-64-v3 lacks sse9 \(unknown to this runtime\)"):
        Session(_reseal(result.artifact, lacking))


def test_a_forced_variant_the_cpu_cannot_run_is_refused_naming_what_it_lacks(portable, monkeypatch):
    result, _, _ = portable
    monkeypatch.setenv(FORCE, "x86-64-v4")
    edited = _reseal(result.artifact, lambda m: m["cpu"][0].update(x86_features=["avx2", "avx9000"]))
    with pytest.raises(ArtifactError, match=r"AOT_CPU_VARIANT=x86-64-v4: this CPU lacks 1 feature the code needs "
                                            r"\(built for x86-64-v4\): avx9000"):
        Session(edited)


def test_a_forced_variant_the_artifact_lacks_is_refused_listing_the_variants(portable, monkeypatch):
    result, _, _ = portable
    monkeypatch.setenv(FORCE, "znver9")
    with pytest.raises(ArtifactError, match=r"AOT_CPU_VARIANT=znver9: the artifact has no x86_64 code for that CPU "
                                            r"\(its x86_64 variants: x86-64-v4, x86-64-v3\)"):
        Session(result.artifact)


def test_each_variant_is_held_to_its_own_kernels(portable, monkeypatch):
    """The second variant's work items are its own: edited, the code's description refuses them."""
    result, _, _ = portable
    monkeypatch.setenv(FORCE, "x86-64-v3")

    def more_work(m):
        m["cpu"][1]["kernels"] = [dict(k) for k in m["cpu"][1]["kernels"]]
        m["cpu"][1]["kernels"][0]["work"] += 1

    with pytest.raises(ArtifactError, match=r"kernels\[0\] .*: work is \d+, the code was built for \d+"):
        Session(_reseal(result.artifact, more_work))
    top = result.manifest["kernels"]
    v3 = result.manifest["cpu"][1]["kernels"]
    assert [k["symbol"] for k in v3] == [k["symbol"] for k in top]


def test_an_unnamed_single_entry_from_an_older_compiler_still_loads(portable, monkeypatch):
    """Artifacts from before variants: one entry, section cpu.x86_64, kernels at the top level only."""
    result, x, want = portable
    monkeypatch.delenv(FORCE, raising=False)
    art = read_artifact(result.artifact)
    manifest = dict(art.manifest)
    v3 = dict(manifest["cpu"][1], section="cpu.x86_64")
    manifest["kernels"] = [{"name": k["name"], **own} for k, own in zip(manifest["kernels"], v3.pop("kernels"))]
    del v3["cpu"]
    manifest["cpu"] = [v3]
    sections = [("cpu.x86_64" if n == "cpu.x86_64.x86-64-v3" else n, d) for n, d in art.sections.items()
                if n not in ("manifest", "cpu.x86_64.x86-64-v4")]
    chosen, got = _run(pack_artifact(manifest, sections), x)
    assert chosen == ""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
