"""The C runtime and artifacts with GPU code: one with CPU code too runs on the CPU exactly as a
CPU-only one (the cuda sections are not decoded); a GPU-only one opens, and a CPU context of it
is refused with a message that says so, never a crash."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from aot.cli import EXIT_FAILED, main
from aot.driver import compile_model
from aot.errors import RunError
from aot.runtime.session import Session
from gpu_util import dense_softmax_model, feeds

ort = pytest.importorskip("onnxruntime")


def test_cpu_and_cuda_artifact_runs_on_the_cpu_and_matches_onnxruntime():
    model = dense_softmax_model()
    inputs = feeds()
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    both = compile_model(model, target="cpu,cuda")
    cpu_only = compile_model(model, target="cpu")
    got = Session(both.artifact).run(None, inputs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got, Session(cpu_only.artifact).run(None, inputs)[0])


def test_a_cpu_session_of_a_gpu_only_artifact_is_refused(tmp_path):
    path = tmp_path / "m.aot"
    compile_model(dense_softmax_model(), path, target="cuda")
    with pytest.raises(RunError, match=r"the artifact holds GPU code only \(cuda: sm_80, sm_90\): create the "
                                       r"context with device AOT_DEVICE_CUDA"):
        Session(path)
    with pytest.raises(RunError, match=r"the artifact holds GPU code only \(cuda: sm_90\)"):
        Session(compile_model(dense_softmax_model(), target="cuda", sm="sm_90").artifact)


def test_aot_run_on_a_gpu_only_artifact_fails_with_the_message(tmp_path):
    path = tmp_path / "m.aot"
    compile_model(dense_softmax_model(), path, target="cuda", sm="sm_80")
    result = CliRunner().invoke(main, ["run", str(path)])
    assert result.exit_code == EXIT_FAILED
    assert "error: " in result.output and "holds GPU code only (cuda: sm_80)" in result.output
    assert "Traceback" not in result.output
