"""compile_model(target="cuda" | "cpu,cuda", sm=...): PTX per SM (cubin where ptxas is installed)
from the same plan as the CPU code; the manifest's launch plan points into that plan's arena,
weights and model inputs/outputs; arguments are checked before any work."""
from __future__ import annotations

import pytest

from aot.artifact import read_artifact
from aot.codegen.nvptx import ptxas, ptxas_path
from aot.driver import compile_model
from aot.errors import ArgumentError, CodegenError
from gpu_util import dense_softmax_model, needs_ptxas


@pytest.fixture(scope="module")
def both():
    return compile_model(dense_softmax_model(), target="cpu,cuda")


@pytest.fixture(scope="module")
def gpu_only():
    return compile_model(dense_softmax_model(), target="cuda", sm="sm_90")


def test_launch_plan_arguments_are_the_plans_slices(both):
    plan, cuda = both.plan, both.manifest["cuda"]
    assert [s["sm"] for s in cuda["sms"]] == ["sm_80", "sm_90"]
    assert cuda["arena"] == {"bytes": plan.arena_bytes, "alignment": 64} and cuda["weights"] == "weights"
    kinds = set()
    for entry in cuda["sms"]:
        assert [k["name"] for k in entry["kernels"]] == [k.name for k in plan.kernels]
        for launch, kernel in zip(entry["kernels"], plan.kernels):
            values = list(dict.fromkeys([p.name for p in kernel.params] + [kernel.root.name]))
            want = []
            for name in values:
                where = plan.slices[name]
                kinds.add(where.kind)
                want.append({"kind": where.kind, "offset": where.offset} if where.kind in ("arena", "weights")
                            else {"kind": where.kind, "index": where.index})
            assert launch["args"] == want
            assert launch["grid"][1:] == [1, 1] and launch["block"][0] % 32 == 0
    assert kinds == {"input", "output", "arena", "weights"}  # the model exercises every kind


def test_cpu_and_gpu_share_one_plan(both):
    assert both.manifest["cpu"][0]["section"].startswith("cpu.x86_64.")
    assert [k["symbol"] for k in both.manifest["kernels"]] == [k["symbol"] for k in both.manifest["cuda"]["sms"][0]["kernels"]]
    assert both.manifest["arena"]["bytes"] == both.manifest["cuda"]["arena"]["bytes"]
    assert both.tooling["cuda"]["arena"]["lower_bound_bytes"] == both.plan.arena_lower_bound


def test_gpu_only_artifact_has_no_cpu_code(gpu_only):
    sections = list(read_artifact(gpu_only.artifact).sections)
    assert not any(name.startswith("cpu.") for name in sections)
    assert gpu_only.manifest["cpu"] == [] and gpu_only.tooling["cpu"] == []
    assert gpu_only.manifest["kernels"] == [{"name": k.name} for k in gpu_only.plan.kernels]
    assert [s["sm"] for s in gpu_only.manifest["cuda"]["sms"]] == ["sm_90"]
    assert "ptx.sm_90" in sections and "ptx.sm_80" not in sections


def test_ptx_sections_hold_the_ptx_compressed(both):
    artifact = read_artifact(both.artifact)
    by_name = {s.name: s for s in artifact.table}
    for sm in ("sm_80", "sm_90"):
        text = artifact.sections[f"ptx.{sm}"].decode()
        assert f".target {sm}" in text and ".entry aot_kernel_0(" in text
        assert by_name[f"ptx.{sm}"].codec == "zstd"


@needs_ptxas
def test_cubin_and_ptxas_report_where_ptxas_is_installed(both):
    artifact = read_artifact(both.artifact)
    for entry, notes in zip(both.manifest["cuda"]["sms"], both.tooling["cuda"]["sms"]):
        assert entry["cubin"] == f"cubin.{entry['sm']}"
        assert artifact.sections[entry["cubin"]][:4] == b"\x7fELF"
        assert notes["ptxas"] == ptxas.ptxas_version()
        for kernel in notes["kernels"]:
            assert kernel["body"] and kernel["ptxas"]["registers"] > 0
            assert set(kernel["ptxas"]) == {"registers", "stack_bytes", "spill_store_bytes", "spill_load_bytes",
                                            "shared_bytes"}


def test_without_ptxas_the_artifact_holds_ptx_only(monkeypatch):
    monkeypatch.setattr(ptxas, "ptxas_path", lambda: None)
    result = compile_model(dense_softmax_model(), target="cuda", sm="sm_80")
    assert "cubin" not in result.manifest["cuda"]["sms"][0]
    assert not any(name.startswith("cubin.") for name in read_artifact(result.artifact).sections)
    notes = result.tooling["cuda"]["sms"][0]
    assert "ptxas" not in notes and all("ptxas" not in k for k in notes["kernels"])
    read_artifact(result.artifact).tooling  # still a valid tooling section


def test_compile_output_is_deterministic():
    first = compile_model(dense_softmax_model(), target="cpu,cuda", cpu="x86-64-v3").artifact
    assert compile_model(dense_softmax_model(), target="cpu,cuda", cpu="x86-64-v3").artifact == first


def test_dump_ir_and_log_cover_the_gpu_path(tmp_path):
    lines = []
    compile_model(dense_softmax_model(), target="cuda", dump_ir=tmp_path, log=lines.append)
    for sm in ("sm_80", "sm_90"):
        assert "nvptx64-nvidia-cuda" in (tmp_path / f"gpu.{sm}.ll").read_text()
        assert f".target {sm}" in (tmp_path / f"gpu.{sm}.ptx").read_text()
        assert any(line.startswith(f"gpu {sm}") for line in lines)
        if ptxas_path() is not None:
            assert any(line.startswith(f"ptxas {sm}") for line in lines)
    if ptxas_path() is None:
        assert any(line.startswith("ptxas") and "not installed" in line for line in lines)
    assert not (tmp_path / "cpu.ll").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"target": "gpu"}, "target 'gpu' is not supported; choose one of cpu, cuda, cpu,cuda"),
    ({"target": "cpu,cpu"}, "target 'cpu,cpu' is not supported"),
    ({"target": "cuda", "sm": "sm_75"}, "GPU architecture 'sm_75' is not supported; choose from sm_80, sm_90"),
    ({"target": "cuda", "sm": "sm_80,sm_80"}, "'sm_80' is given twice"),
    ({"target": "cuda", "sm": ""}, "GPU architecture '' is not supported"),
    ({"target": "cpu", "sm": "sm_80"}, "target 'cpu' has no GPU"),
    ({"target": "cuda", "cpu": "znver4"}, "target 'cuda' has no CPU"),
])
def test_wrong_target_arguments_are_refused_before_any_work(tmp_path, kwargs, message):
    # the model does not exist: an argument error first shows that nothing was read
    with pytest.raises(ArgumentError, match=message.replace("(", r"\(")):
        compile_model(tmp_path / "missing.onnx", **kwargs)


def test_sm_accepts_a_list():
    result = compile_model(dense_softmax_model(), target="cuda", sm=["sm_90", "sm_80"])
    assert [s["sm"] for s in result.manifest["cuda"]["sms"]] == ["sm_90", "sm_80"]


def test_a_kernel_without_gpu_body_is_a_compile_error(monkeypatch):
    from aot.codegen.nvptx import bodies

    monkeypatch.setattr(bodies, "BODIES", ())
    with pytest.raises(CodegenError, match=r"kernel k0_\w+ \(root op \w+\): no GPU body"):
        compile_model(dense_softmax_model(), target="cpu,cuda")
