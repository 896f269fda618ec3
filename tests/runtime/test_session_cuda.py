"""Session(device="cuda") end to end without a GPU: cpu,cuda artifacts run by the C runtime's
CUDA path on the test stand-in for libcuda.so.1 (runtime_c/tests/fake_cuda.c, which runs each
kernel's host build from aot.codegen.nvptx.host_library), against onnxruntime; DeviceArrays
and a third-party DLPack CUDA tensor (a stand-in for torch's) in place, the stand-in's
counters showing what was copied and launched."""
from __future__ import annotations

import gc
import sys
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest

from aot.codegen.nvptx.host_library import artifact_host_libraries
from aot.driver import compile_model
from aot.errors import RunError
from aot.runtime.device_array import DeviceArray
from aot.runtime.session import Session
from fake_cuda_util import fake_cuda_env, fake_cuda_stat
from gpu_util import dense_softmax_model, feeds, gather_check_model

H2D = "cuMemcpyHtoDAsync_v2"


def _compiled(model, folder) -> SimpleNamespace:
    result = compile_model(model, target="cpu,cuda")
    artifact_host_libraries(result, folder)
    return SimpleNamespace(model=model, artifact=result.artifact, host_dir=folder)


@pytest.fixture(scope="module")
def dense(tmp_path_factory) -> SimpleNamespace:
    """y = softmax(relu(x @ w + b)) * x2, x [4,8], x2 [4,16], y [4,16]; `want` is onnxruntime's y."""
    compiled = _compiled(dense_softmax_model(), tmp_path_factory.mktemp("dense"))
    reference = ort.InferenceSession(compiled.model.SerializeToString(), providers=["CPUExecutionProvider"])
    compiled.want = reference.run(None, feeds())[0]
    return compiled


@pytest.fixture
def gpu(monkeypatch, dense) -> SimpleNamespace:
    """The stand-in driver, one device, the dense model's kernels."""
    fake_cuda_env(monkeypatch, dense.host_dir)
    return dense


def _counters() -> dict[str, int]:
    names = (H2D, "cuLaunchKernel", "cuGraphLaunch", "kernel_runs")
    return {name: fake_cuda_stat(name) for name in names}


def _since(before: dict[str, int]) -> dict[str, int]:
    return {name: fake_cuda_stat(name) - value for name, value in before.items()}


class CudaTensor:
    """A third-party CUDA tensor (as torch's): DLPack on kDLCUDA, backed by a DeviceArray whose
    capsule it hands out; records the stream each consumer asks for."""

    def __init__(self, array: DeviceArray):
        self.array = array
        self.streams: list[object] = []

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, *, stream=None):
        self.streams.append(stream)
        return self.array.__dlpack__(stream=stream)


def test_numpy_in_and_out_matches_onnxruntime(gpu):
    session = Session(gpu.artifact, device="cuda")
    assert session.device == "cuda:0"
    (y,) = session.run(None, feeds())
    assert isinstance(y, np.ndarray)
    np.testing.assert_allclose(y, gpu.want, rtol=1e-5, atol=1e-6)


def test_device_arrays_in_give_device_arrays_out_and_the_inputs_are_not_copied(gpu):
    session = Session(gpu.artifact, device="cuda")
    host = session.run(None, feeds())[0]
    xs = {name: DeviceArray.from_numpy(session, value) for name, value in feeds().items()}
    before = _counters()
    (y,) = session.run(["y"], xs)
    assert _since(before)[H2D] == 0 and _since(before)["kernel_runs"] > 0
    assert isinstance(y, DeviceArray) and (y.shape, y.dtype, y.device) == ((4, 16), np.float32, "cuda:0")
    np.testing.assert_array_equal(y.numpy(), host)


def test_a_third_party_cuda_tensor_is_read_in_place_on_the_sessions_stream_and_released(gpu):
    session = Session(gpu.artifact, device="cuda")
    backing = DeviceArray.from_numpy(session, feeds()["x"])
    x = CudaTensor(backing)
    references = sys.getrefcount(backing)
    before = _counters()
    (y,) = session.run(None, {"x": x, "x2": feeds()["x2"]})
    assert _since(before)[H2D] == 1  # x2 only, uploaded before the run
    assert x.streams == [session._cuda_stream]
    gc.collect()
    assert sys.getrefcount(backing) == references  # the capsule's deleter ran
    np.testing.assert_allclose(y.numpy(), gpu.want, rtol=1e-5, atol=1e-6)


def test_outputs_are_written_in_place_and_returned_as_given(gpu):
    session = Session(gpu.artifact, device="cuda")
    xs = {name: DeviceArray.from_numpy(session, value) for name, value in feeds().items()}
    mine = DeviceArray.empty(session, (4, 16), np.float32)
    (y,) = session.run(None, xs, outputs={"y": mine})
    assert y is mine
    np.testing.assert_allclose(mine.numpy(), gpu.want, rtol=1e-5, atol=1e-6)
    theirs = CudaTensor(DeviceArray.empty(session, (4, 16), np.float32))
    (y,) = session.run(None, feeds(), outputs={"y": theirs})
    assert y is theirs
    np.testing.assert_array_equal(theirs.array.numpy(), mine.numpy())


def test_cuda_graphs_on_and_off_give_identical_outputs_and_graph_launches_are_counted(gpu):
    xs_host = feeds(1)
    graphed = Session(gpu.artifact, device="cuda")
    plain = Session(gpu.artifact, device="cuda", cuda_graph=False)
    assert (graphed.cuda_graph, plain.cuda_graph) == (True, False)
    xs = {name: DeviceArray.from_numpy(graphed, value) for name, value in xs_host.items()}
    before = _counters()
    first = [graphed.run(None, xs)[0].numpy() for _ in range(2)]
    with_graphs = _since(before)
    before = _counters()
    second = [plain.run(None, xs)[0].numpy() for _ in range(2)]
    without = _since(before)
    assert with_graphs["cuGraphLaunch"] == 2 and with_graphs["cuLaunchKernel"] == 0
    assert without["cuGraphLaunch"] == 0 and without["cuLaunchKernel"] > 0
    assert with_graphs["kernel_runs"] == without["kernel_runs"]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_a_gpu_the_driver_does_not_have_is_no_device(gpu):
    with pytest.raises(RunError, match=r"cannot create a context: no CUDA device 1: the driver sees 1"):
        Session(gpu.artifact, device="cuda:1")


def test_without_a_driver_the_runtimes_message_is_the_error(gpu, monkeypatch, tmp_path):
    missing = tmp_path / "libcuda.so.1"
    monkeypatch.setenv("AOT_CUDA_DRIVER", str(missing))
    with pytest.raises(RunError, match=rf"no CUDA driver: cannot load {missing}"):
        Session(gpu.artifact, device="cuda")


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:-1", "CUDA", 0])
def test_a_device_string_of_another_form_is_refused(device, gpu):
    with pytest.raises(RunError, match=r"device must be 'cpu', 'cuda' or 'cuda:N' \(N a GPU ordinal\)"):
        Session(gpu.artifact, device=device)


@pytest.mark.parametrize("bad, message", [
    ({"x": np.zeros((8, 4), np.float32)}, r"input 'x': expected shape \[4,8\], got \[8,4\]"),
    ({"x": np.zeros((4, 8), np.float64)}, r"input 'x': expected dtype float32, got float64"),
    ({"x2": np.zeros((4, 16, 1), np.float32)}, r"input 'x2': expected shape \[4,16\], got \[4,16,1\]"),
], ids=["shape", "dtype", "rank"])
def test_a_device_tensor_of_the_wrong_shape_or_dtype_is_refused_before_running(gpu, bad, message):
    session = Session(gpu.artifact, device="cuda")
    xs = {name: DeviceArray.from_numpy(session, value) for name, value in (feeds() | bad).items()}
    wrapped = {name: CudaTensor(array) for name, array in xs.items()}
    before = _counters()
    for given in (xs, wrapped):
        with pytest.raises(RunError, match=message):
            session.run(None, given)
    assert _since(before) == {name: 0 for name in before}


def test_a_wrong_output_tensor_is_refused_before_running(gpu):
    session = Session(gpu.artifact, device="cuda")
    xs = {name: DeviceArray.from_numpy(session, value) for name, value in feeds().items()}
    before = _counters()
    with pytest.raises(RunError, match=r"output 'y': expected shape \[4,16\], got \[16,4\]"):
        session.run(None, xs, outputs={"y": DeviceArray.empty(session, (16, 4), np.float32)})
    with pytest.raises(RunError, match=r"output 'y' overlaps input 'x2'"):
        session.run(None, xs, outputs={"y": xs["x2"]})
    with pytest.raises(RunError, match=r"output 'y': outputs= takes CUDA tensors .* got ndarray"):
        session.run(None, xs, outputs={"y": np.empty((4, 16), np.float32)})
    with pytest.raises(RunError, match=r"unknown output 'z'"):
        session.run(None, xs, outputs={"z": DeviceArray.empty(session, (4, 16), np.float32)})
    assert _since(before) == {name: 0 for name in before}


def test_a_tensor_of_another_gpu_is_refused(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, devices=2)
    first = Session(dense.artifact, device="cuda")
    second = Session(dense.artifact, device="cuda:1")
    assert second.device == "cuda:1"
    x = DeviceArray.from_numpy(first, feeds()["x"])
    assert x.device == "cuda:0"
    with pytest.raises(RunError, match=r"input 'x' is on cuda:0, this session runs on cuda:1"):
        second.run(None, {"x": x, "x2": feeds()["x2"]})
    on_second = {name: DeviceArray.from_numpy(second, value) for name, value in feeds().items()}
    np.testing.assert_allclose(second.run(None, on_second)[0].numpy(), dense.want, rtol=1e-5, atol=1e-6)


def test_a_cpu_session_refuses_cuda_tensors_and_device_options(gpu):
    cuda = Session(gpu.artifact, device="cuda")
    cpu = Session(gpu.artifact)
    assert cpu.device == "cpu"
    x = DeviceArray.from_numpy(cuda, feeds()["x"])
    for value in (x, CudaTensor(x)):
        with pytest.raises(RunError, match=r"input 'x' is a CUDA tensor \(cuda:0\) and this session runs on the "
                                           r"CPU: open it with Session\(\.\.\., device=\"cuda\"\)"):
            cpu.run(None, {"x": value, "x2": feeds()["x2"]})
    with pytest.raises(RunError, match="a DeviceArray needs a CUDA session"):
        DeviceArray.empty(cpu, (2,), np.float32)
    np.testing.assert_allclose(cpu.run(None, feeds())[0], gpu.want, rtol=1e-5, atol=1e-6)


def test_the_run_follows_the_callers_stream(gpu):
    session = Session(gpu.artifact, device="cuda")
    other = Session(gpu.artifact, device="cuda")  # a live stream of the same device, not the session's
    x = CudaTensor(DeviceArray.from_numpy(session, feeds()["x"]))
    torch_like = SimpleNamespace(cuda_stream=other._cuda_stream)
    (y,) = session.run(None, {"x": x, "x2": feeds()["x2"]}, stream=torch_like)
    assert x.streams == [other._cuda_stream]  # the producer orders its work before the caller's stream
    np.testing.assert_allclose(y.numpy(), gpu.want, rtol=1e-5, atol=1e-6)
    with pytest.raises(RunError, match="CUDA_ERROR_INVALID_HANDLE"):  # not a stream: the driver says so
        session.run(None, {"x": x, "x2": feeds()["x2"]}, stream=0xDEAD00)
    with pytest.raises(RunError, match="stream must be a CUstream"):
        session.run(None, {"x": x, "x2": feeds()["x2"]}, stream="default")


def test_device_arrays_keep_a_closed_session_context_until_the_last_goes(gpu):
    gc.collect()
    streams, allocations = fake_cuda_stat("live_streams"), fake_cuda_stat("live_allocations")
    session = Session(gpu.artifact, device="cuda")
    assert fake_cuda_stat("live_streams") == streams + 1
    (y,) = session.run(None, {name: DeviceArray.from_numpy(session, v) for name, v in feeds().items()})
    session.close()
    with pytest.raises(RunError, match="session is closed"):
        session.run(None, feeds())
    with pytest.raises(RunError, match="session is closed"):
        DeviceArray.empty(session, (2,), np.float32)
    np.testing.assert_allclose(y.numpy(), gpu.want, rtol=1e-5, atol=1e-6)  # still readable
    assert fake_cuda_stat("live_streams") == streams + 1
    del y
    gc.collect()
    assert fake_cuda_stat("live_streams") == streams
    assert fake_cuda_stat("live_allocations") == allocations  # the arrays, arena and weights freed


def test_a_failing_run_time_check_on_the_device_is_the_checks_message(monkeypatch, tmp_path):
    gather = _compiled(gather_check_model(), tmp_path)
    fake_cuda_env(monkeypatch, gather.host_dir)
    session = Session(gather.artifact, device="cuda")
    cpu = Session(gather.artifact)
    good = {"i": np.array([1, -10, 9]), "j": np.array([0, 3, -1])}
    on_device = {name: DeviceArray.from_numpy(session, value) for name, value in good.items()}
    np.testing.assert_array_equal(session.run(None, on_device)[0].numpy(), cpu.run(None, good)[0])
    bad = {"i": np.array([1, 10, 9]), "j": good["j"]}
    with pytest.raises(RunError) as from_cpu:
        cpu.run(None, bad)
    i = CudaTensor(DeviceArray.from_numpy(session, bad["i"]))
    for feed in ({"i": i, "j": on_device["j"]}, bad):
        with pytest.raises(RunError) as from_gpu:
            session.run(None, feed, outputs={"y": DeviceArray.empty(session, (3, 4), np.float32)})
        assert str(from_gpu.value) == str(from_cpu.value)
    assert "an index is outside [-10, 10)" in str(from_cpu.value)
