"""The runtime's CUDA path on a real NVIDIA GPU, where this machine has one (skipped where it
has no CUDA driver or no GPU, as on CI; the stand-in driver's tests run everywhere). The
artifacts' cubins and PTX go through the real driver: outputs against the CPU artifact,
the GPU run-time checks, DLPack tensors of torch in place."""
from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from aot.driver import compile_model
from aot.errors import RunError
from aot.runtime.device_array import DeviceArray
from aot.runtime.session import Session
from gpu_util import dense_softmax_model, feeds, gather_check_model


def _gpu_count() -> int:
    """GPUs the real driver sees (0 without a driver): asked of libcuda.so.1 itself, so a
    runtime bug cannot turn into a skip."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


pytestmark = pytest.mark.skipif(_gpu_count() == 0, reason="no CUDA driver or no GPU on this machine")


@pytest.fixture(autouse=True)
def real_driver(monkeypatch):
    monkeypatch.delenv("AOT_CUDA_DRIVER", raising=False)  # never the stand-in


@pytest.mark.parametrize("cuda_graph", [True, False])
def test_gpu_outputs_match_the_cpu_artifact(cuda_graph):
    artifact = compile_model(dense_softmax_model(), target="cpu,cuda").artifact
    with Session(artifact) as cpu, Session(artifact, device="cuda", cuda_graph=cuda_graph) as gpu:
        want = cpu.run(None, feeds())[0]
        for _ in range(3):
            np.testing.assert_allclose(gpu.run(None, feeds())[0], want, rtol=1e-4, atol=1e-6)
        inputs = {name: DeviceArray.from_numpy(gpu, value) for name, value in feeds().items()}
        (y,) = gpu.run(None, inputs)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-6)


def test_gpu_run_time_checks_fail_with_the_cpu_message():
    artifact = compile_model(gather_check_model(), target="cpu,cuda").artifact
    good = {"i": np.array([1, -2, 9], np.int64), "j": np.array([0, 3, -10], np.int64)}
    bad = dict(good, j=np.array([1, 10, 9], np.int64))
    with Session(artifact) as cpu, Session(artifact, device="cuda") as gpu:
        np.testing.assert_array_equal(gpu.run(None, good)[0], cpu.run(None, good)[0])
        with pytest.raises(RunError) as on_cpu:
            cpu.run(None, bad)
        with pytest.raises(RunError, match=re.escape(str(on_cpu.value))):
            gpu.run(None, bad)


def test_torch_cuda_tensors_in_and_out_in_place():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    artifact = compile_model(dense_softmax_model(), target="cpu,cuda").artifact
    with Session(artifact) as cpu, Session(artifact, device="cuda") as gpu:
        want = cpu.run(None, feeds())[0]
        x = {name: torch.from_numpy(value).cuda() for name, value in feeds().items()}
        y = torch.empty(want.shape, device="cuda")
        stream = torch.cuda.current_stream()
        (out,) = gpu.run(None, x, outputs={"y": y}, stream=stream.cuda_stream)
        assert out is y
        np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-6)
        (z,) = gpu.run(None, x)
        np.testing.assert_allclose(torch.from_dlpack(z).cpu().numpy(), want, rtol=1e-4, atol=1e-6)
