"""--gpu-matmul-precision (compile_model(gpu_matmul_precision=...)): fp32 by default, where f32
dots keep the SIMT bodies; tf32 puts them on tensor cores (nvptx/mma.py); the manifest's cuda
entry records which; a wrong value, or one without GPU code, is refused before any work."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from aot.artifact import read_artifact
from aot.cli import EXIT_USAGE, main
from aot.driver import compile_model
from aot.errors import ArgumentError
from onnx_util import make_model, vinfo


def _matmul_model():
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32), "w")
    return make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [vinfo("x", TensorProto.FLOAT, (40, 64))],
                      [vinfo("y", TensorProto.FLOAT, (40, 48))], [w])


def _bodies(result):
    return {k["body"] for entry in result.tooling["cuda"]["sms"] for k in entry["kernels"]}


def test_fp32_is_the_default_and_keeps_f32_dots_off_tensor_cores():
    result = compile_model(_matmul_model(), target="cuda", sm="sm_90")
    assert result.manifest["cuda"]["matmul_precision"] == "fp32"
    assert _bodies(result) == {"gemm"}
    ptx = read_artifact(result.artifact).sections["ptx.sm_90"]
    assert b"mma.sync" not in ptx


def test_tf32_runs_f32_dots_on_tensor_cores():
    result = compile_model(_matmul_model(), target="cpu,cuda", gpu_matmul_precision="tf32")
    assert result.manifest["cuda"]["matmul_precision"] == "tf32"
    assert _bodies(result) == {"mma_tf32"}
    sections = read_artifact(result.artifact).sections
    for sm in ("sm_80", "sm_90"):
        assert b"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in sections[f"ptx.{sm}"]
        assert b"cvt.rna.tf32.f32" in sections[f"ptx.{sm}"]


@pytest.mark.parametrize("kwargs, message", [
    ({"target": "cuda", "gpu_matmul_precision": "fp16"},
     "GPU matmul precision 'fp16' is not supported; choose one of fp32, tf32"),
    ({"target": "cuda", "gpu_matmul_precision": None}, "GPU matmul precision None is not supported"),
    ({"target": "cpu", "gpu_matmul_precision": "tf32"}, "target 'cpu' has no GPU"),
])
def test_wrong_precision_is_refused_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(ArgumentError, match=message):
        compile_model(tmp_path / "missing.onnx", **kwargs)


@pytest.mark.parametrize("args, message", [
    (["--target", "cuda", "--gpu-matmul-precision", "bf16"], "--gpu-matmul-precision bf16: choose one of fp32, tf32"),
    (["--gpu-matmul-precision", "tf32"], "--gpu-matmul-precision tf32 needs GPU code"),
])
def test_cli_usage_errors_name_the_choices(tmp_path, args, message):
    result = CliRunner().invoke(main, ["compile", str(tmp_path / "missing.onnx"), *args])
    assert result.exit_code == EXIT_USAGE
    assert message in result.output


def test_cli_tf32(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(_matmul_model().SerializeToString())
    result = CliRunner().invoke(main, ["compile", str(path), "--target", "cuda", "--sm", "sm_80",
                                       "--gpu-matmul-precision", "tf32"])
    assert result.exit_code == 0, result.output
    assert b"m16n8k8.row.col.f32.tf32" in read_artifact((tmp_path / "m.aot").read_bytes()).sections["ptx.sm_80"]
