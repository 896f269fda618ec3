"""The command line with GPU code: aot-compile --target/--sm, `aot inspect` listing the GPU
kernels per SM (launch, registers, spills, shared memory), --extract, --explain fusion and the
usage errors of the new options."""
from __future__ import annotations

import json

import onnx
import pytest
from click.testing import CliRunner

from aot.cli import EXIT_USAGE, compile_main, main
from gpu_util import dense_softmax_model, needs_ptxas


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "m.onnx"
    onnx.save(dense_softmax_model(), path)
    return path


def _compile(args):
    result = CliRunner().invoke(compile_main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def artifact(model):
    path = model.with_name("both.aot")
    output = _compile([model, "--target", "cpu,cuda", "-o", path])
    assert f"wrote {path}:" in output and "2 kernels (x86_64, sm_80, sm_90)" in output
    return path


def test_inspect_lists_gpu_kernels_per_sm(artifact):
    result = CliRunner().invoke(main, ["inspect", str(artifact)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "gpu code: device arena 256 B (lower bound 256 B), weights from section 'weights'" in text
    for sm in ("sm_80", "sm_90"):
        assert f"  {sm}: ptx ptx.{sm}, " in text
    header = next(line for line in text.splitlines() if "symbol" in line and "regs" in line)
    assert header.split() == ["symbol", "kernel", "body", "grid", "block", "regs", "spills", "shared"]
    rows = [line.split() for line in text.splitlines() if line.strip().startswith("aot_kernel_")]
    assert [r[:2] for r in rows] == [["aot_kernel_0", "k0_max"], ["aot_kernel_1", "k1_mul"]] * 2


@needs_ptxas
def test_inspect_shows_what_ptxas_reported(artifact):
    text = CliRunner().invoke(main, ["inspect", str(artifact)]).output
    assert "cubin cubin.sm_80 (ptxas " in text
    rows = [line.split() for line in text.splitlines() if line.strip().startswith("aot_kernel_")]
    assert all(int(r[5]) > 0 and r[6].count("/") == 1 for r in rows)  # registers, spill stores/loads


def test_inspect_json_and_extract(artifact, tmp_path):
    info = json.loads(CliRunner().invoke(main, ["inspect", str(artifact), "--json"]).output)
    assert [s["sm"] for s in info["cuda"]["sms"]] == ["sm_80", "sm_90"]
    assert info["cuda"]["sms"][0]["kernels"][0]["body"]  # annotated with the tooling section
    assert "ptx.sm_80" in info["code_bytes"]
    result = CliRunner().invoke(main, ["inspect", str(artifact), "--extract", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert ".target sm_90" in (tmp_path / "ptx.sm_90.ptx").read_text()


def test_inspect_gpu_only_artifact(model, tmp_path):
    path = tmp_path / "gpu.aot"
    _compile([model, "--target", "cuda", "--sm", "sm_90", "-o", path])
    text = CliRunner().invoke(main, ["inspect", str(path)]).output
    assert "cpu code:" not in text and "(GPU only)" in text and "  sm_90: ptx ptx.sm_90" in text


def test_explain_fusion_says_the_gpu_runs_the_same_kernels(model, tmp_path):
    output = _compile([model, "--target", "cuda", "--explain", "fusion", "-o", tmp_path / "m.aot"])
    lines = output.splitlines()
    assert lines[0] == "target cuda: the GPU runs these same kernels (one plan for every target)"
    assert lines[1].startswith("k0_max: ")


@pytest.mark.parametrize("args, message", [
    (["--target", "gpu"], "error: target 'gpu' is not supported; choose one of cpu, cuda, cpu,cuda"),
    (["--target", "cuda", "--sm", "sm_70"], "error: GPU architecture 'sm_70' is not supported; choose from sm_80, sm_90"),
    (["--sm", "sm_80"], "error: --sm sm_80 needs GPU code: add cuda to --target"),
    (["--target", "cuda", "--cpu", "znver4"], "error: --cpu znver4 needs CPU code: add cpu to --target"),
])
def test_wrong_target_options_are_usage_errors(model, tmp_path, args, message):
    out = tmp_path / "m.aot"
    result = CliRunner().invoke(compile_main, [str(model), "-o", str(out), *args])
    assert result.exit_code == EXIT_USAGE and message in result.output, result.output
    assert not out.exists() and "Traceback" not in result.output


def test_verify_refuses_a_gpu_only_artifact(model, tmp_path):
    path = tmp_path / "gpu.aot"
    _compile([model, "--target", "cuda", "-o", path])
    result = CliRunner().invoke(main, ["verify", str(model), "--artifact", str(path)])
    assert result.exit_code == 1 and "holds GPU code only (cuda: sm_80, sm_90): verify runs CPU code" in result.output
    assert "Traceback" not in result.output
