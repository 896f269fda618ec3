"""The C runtime's CUDA path (runtime_c/src/gpu_*.c, cuda_driver.c) on the test stand-in for
libcuda.so.1: which code a device loads, what is made once per model and device, what every
context owns and frees, and how driver failures become statuses naming the call, the CUDA
error and the kernel. Session(device="cuda") drives it; the stand-in's counters show what the
runtime asked of the driver."""
from __future__ import annotations

import gc
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest

from aot.artifact import read_artifact
from aot.codegen.nvptx.host_library import artifact_host_libraries, write_host_library
from aot.driver import compile_model
from aot.errors import RunError
from aot.runtime.session import Session
from fake_cuda_util import fake_cuda_env, fake_cuda_stat
from gpu_util import dense_softmax_model, feeds, gather_check_model

LIVE = ("live_allocations", "live_modules", "live_streams", "live_graphs", "live_execs", "primary_retains")


@pytest.fixture(scope="module")
def dense(tmp_path_factory) -> SimpleNamespace:
    """The dense softmax model compiled for cpu,cuda (cubin and PTX of sm_80 and sm_90), its host
    code, and onnxruntime's answer."""
    folder = tmp_path_factory.mktemp("dense")
    result = compile_model(dense_softmax_model(), target="cpu,cuda")
    artifact_host_libraries(result, folder)
    want = ort.InferenceSession(dense_softmax_model().SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds())[0]
    return SimpleNamespace(artifact=result.artifact, manifest=result.manifest, plan=result.plan, host_dir=folder,
                           want=want)


def _live() -> dict[str, int]:
    return {name: fake_cuda_stat(name) for name in LIVE}


def _run(session: Session) -> np.ndarray:
    return session.run(None, feeds())[0]


@pytest.mark.parametrize(("sm", "image"), [("90", "cubin.sm_90"), ("80", "cubin.sm_80"), ("86", "cubin.sm_80"),
                                           ("89", "cubin.sm_80"), ("100", "ptx.sm_90"), ("120", "ptx.sm_90")])
def test_a_device_loads_the_cubin_of_its_major_version_else_the_newest_ptx_below_it(monkeypatch, dense, tmp_path, sm,
                                                                                      image):
    """Host code exists for `image` alone, so loading any other image fails."""
    write_host_library(dense.plan, [read_artifact(dense.artifact).sections[image]], tmp_path)
    fake_cuda_env(monkeypatch, tmp_path, sm=sm)
    before = fake_cuda_stat("cuModuleLoadDataEx")
    with Session(dense.artifact, device="cuda") as session:
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)
    assert fake_cuda_stat("cuModuleLoadDataEx") - before == 1  # no failed try first


def test_a_device_older_than_every_sm_is_no_device_naming_what_the_artifact_has(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, sm="75")
    with pytest.raises(RunError, match=r"device 0 \(aot fake GPU \(sm_75\)\) is sm_75: the artifact has GPU code "
                                       r"for sm_80, sm_90 only \(compile with --sm sm_75\)"):
        Session(dense.artifact, device="cuda")
    assert _live()["primary_retains"] == 0


def test_no_driver_and_no_such_device_are_clear(monkeypatch, dense, tmp_path):
    fake_cuda_env(monkeypatch, dense.host_dir, devices=1)
    with pytest.raises(RunError, match=r"no CUDA device 3: the driver sees 1"):
        Session(dense.artifact, device="cuda:3")
    fake_cuda_env(monkeypatch, dense.host_dir, devices=0)
    with pytest.raises(RunError, match=r"no CUDA device 0: the driver sees 0"):
        Session(dense.artifact, device="cuda")
    monkeypatch.setenv("AOT_CUDA_DRIVER", str(tmp_path / "libcuda.so.1"))
    with pytest.raises(RunError, match=r"no CUDA driver: cannot load .*libcuda\.so\.1"):
        Session(dense.artifact, device="cuda")


def test_a_module_the_driver_cannot_load_gives_its_jit_log(monkeypatch, dense, tmp_path):
    fake_cuda_env(monkeypatch, tmp_path / "empty", sm="100")  # PTX only; no host code for it
    with pytest.raises(RunError, match=r"device 0 \(aot fake GPU \(sm_100\)\): loading the PTX of sm_90: "
                                       r"aot fake driver: no host code .*: cuModuleLoadDataEx failed: "
                                       r"CUDA_ERROR_INVALID_PTX"):
        Session(dense.artifact, device="cuda")
    assert _live() == dict.fromkeys(LIVE, 0)


def test_weights_are_uploaded_once_per_model_and_device_and_everything_is_freed(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, devices=2)
    assert _live() == dict.fromkeys(LIVE, 0)
    uploads = fake_cuda_stat("cuMemcpyHtoDAsync_v2")
    loads = fake_cuda_stat("cuModuleLoadDataEx")
    first = Session(dense.artifact, device="cuda:0")
    # one weights copy and one module: the context itself copies nothing until it runs
    assert fake_cuda_stat("cuMemcpyHtoDAsync_v2") - uploads == 1
    assert fake_cuda_stat("cuModuleLoadDataEx") - loads == 1
    live = _live()
    assert live["live_modules"] == 1 and live["live_streams"] == 1 and live["primary_retains"] == 1
    for session in (first, Session(dense.artifact, device="cuda:1")):
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)
    assert fake_cuda_stat("cuModuleLoadDataEx") - loads == 2  # a module per device, once
    first.close()
    del session
    gc.collect()
    assert _live() == dict.fromkeys(LIVE, 0)
    assert fake_cuda_stat("destroyed_with_context") == 0


def test_a_run_replays_one_graph_and_without_graphs_launches_every_kernel(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir)
    launches = len(dense.manifest["cuda"]["sms"][0]["kernels"])
    with Session(dense.artifact, device="cuda") as graphed, Session(dense.artifact, device="cuda",
                                                                    cuda_graph=False) as direct:
        graph_launches, kernel_launches = fake_cuda_stat("cuGraphLaunch"), fake_cuda_stat("cuLaunchKernel")
        for _ in range(3):
            np.testing.assert_array_equal(_run(graphed), _run(direct))
        assert fake_cuda_stat("cuGraphLaunch") - graph_launches == 3
        assert fake_cuda_stat("cuLaunchKernel") - kernel_launches == 3 * launches
        assert fake_cuda_stat("cuGraphInstantiateWithFlags") >= 1


def test_a_failed_launch_names_the_kernel_and_a_fault_breaks_later_runs(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir)
    first = dense.manifest["cuda"]["sms"][1]["kernels"][0]["name"]
    with Session(dense.artifact, device="cuda", cuda_graph=False) as session:
        fake_cuda_env(monkeypatch, dense.host_dir, fail="cuLaunchKernel:1=CUDA_ERROR_LAUNCH_FAILED")
        with pytest.raises(RunError, match=rf"device 0 \(aot fake GPU \(sm_90\)\): kernel {first} \(launch 1 of \d+\): "
                                           r"cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED"):
            _run(session)
        with pytest.raises(RunError, match=r"an earlier fault broke the CUDA context of this process"):
            _run(session)
    gc.collect()
    # the model's close released the broken context: a new one works
    fake_cuda_env(monkeypatch, dense.host_dir)
    with Session(dense.artifact, device="cuda") as session:
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)


def test_a_graph_launch_failure_and_a_non_sticky_error_are_statuses(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, fail="cuGraphLaunch:1=CUDA_ERROR_INVALID_VALUE")
    with Session(dense.artifact, device="cuda") as session:
        with pytest.raises(RunError, match=r"launching the CUDA graph of \d+ kernels: cuGraphLaunch failed: "
                                           r"CUDA_ERROR_INVALID_VALUE"):
            _run(session)
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)  # not sticky: runs again


def test_device_memory_is_checked_against_the_plan_and_allocation_failures_say_what(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, memory=256)
    with pytest.raises(RunError, match=r"device 0 \(.*\): the weights take \d+ bytes, \d+ of its 256 are free"):
        Session(dense.artifact, device="cuda")
    fake_cuda_env(monkeypatch, dense.host_dir, fail="cuMemAlloc_v2:2=CUDA_ERROR_OUT_OF_MEMORY")
    with pytest.raises(RunError, match=r"the arena \(\d+ bytes\): cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"):
        Session(dense.artifact, device="cuda")
    gc.collect()
    assert _live() == dict.fromkeys(LIVE, 0)


def test_run_time_checks_run_on_the_gpu_with_the_cpu_message(monkeypatch, tmp_path):
    fake_cuda_env(monkeypatch, tmp_path)
    result = compile_model(gather_check_model(), target="cpu,cuda")
    artifact_host_libraries(result, tmp_path)
    good = {"i": np.array([1, -2, 9], np.int64), "j": np.array([0, 3, -10], np.int64)}
    bad = dict(good, j=np.array([1, 10, 9], np.int64))
    with Session(result.artifact) as cpu, Session(result.artifact, device="cuda") as gpu:
        np.testing.assert_array_equal(gpu.run(None, good)[0], cpu.run(None, good)[0])
        with pytest.raises(RunError) as on_cpu:
            cpu.run(None, bad)
        with pytest.raises(RunError) as on_gpu:
            gpu.run(None, bad)
        assert str(on_gpu.value) == str(on_cpu.value) and "index" in str(on_gpu.value)
        np.testing.assert_array_equal(gpu.run(None, good)[0], cpu.run(None, good)[0])  # the word is rewritten


def test_the_runtime_leaves_no_cuda_context_current(monkeypatch, dense):
    """Every call pushes the device's context and pops it: the stand-in refuses a call made
    with no context current, so a driver call of the test itself shows the stack is empty."""
    fake_cuda_env(monkeypatch, dense.host_dir)
    from fake_cuda_util import fake_cuda_library
    import ctypes
    with Session(dense.artifact, device="cuda") as session:
        _run(session)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        assert fake_cuda_library().cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 201  # INVALID_CONTEXT


def test_a_cubin_the_driver_refuses_falls_back_to_the_ptx(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, fail="cuModuleLoadDataEx:1=CUDA_ERROR_NO_BINARY_FOR_GPU")
    before = fake_cuda_stat("cuModuleLoadDataEx")
    with Session(dense.artifact, device="cuda") as session:
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)
    assert fake_cuda_stat("cuModuleLoadDataEx") - before == 2


def test_contexts_of_one_model_run_concurrently_from_threads(monkeypatch, dense):
    """One model (the C API: a Session is a model and a context), eight contexts made and run
    at once from threads, on two devices: the first context of each device loads the code and
    weights there, once, while the others wait for it."""
    import ctypes
    from concurrent.futures import ThreadPoolExecutor

    from aot.runtime import abi
    from aot.runtime.library import load_library

    fake_cuda_env(monkeypatch, dense.host_dir, devices=2)
    lib = load_library()
    with Session(dense.artifact) as cpu:
        want = _run(cpu)
    x, x2 = (np.ascontiguousarray(a) for a in feeds().values())
    model, err = ctypes.c_void_p(), abi.CError()
    assert lib.aot_model_open_memory(dense.artifact, len(dense.artifact), ctypes.byref(model), ctypes.byref(err)) == 0
    loads, uploads = fake_cuda_stat("cuModuleLoadDataEx"), fake_cuda_stat("cuMemcpyHtoDAsync_v2")

    def tensor(a: np.ndarray) -> abi.CTensor:
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        t = abi.CTensor(1, a.ndim, shape, a.ctypes.data, a.nbytes)
        t._keep = shape
        return t

    def work(i: int) -> list[np.ndarray]:
        ctx, error = ctypes.c_void_p(), abi.CError()
        options = abi.CContextOptions(ctypes.sizeof(abi.CContextOptions), 1, abi.DEVICE_CUDA, i % 2,
                                      abi.CONTEXT_NO_CUDA_GRAPH if i % 3 == 0 else 0, 0)
        assert lib.aot_context_create(model, ctypes.byref(options), ctypes.byref(ctx), ctypes.byref(error)) == 0, \
            error.text()
        outputs = []
        for _ in range(20):
            y = np.empty((4, 16), np.float32)
            ins = (abi.CTensor * 2)(tensor(x), tensor(x2))
            out = (abi.CTensor * 1)(tensor(y))
            assert lib.aot_run(ctx, ins, 2, out, 1, ctypes.byref(error)) == 0, error.text()
            outputs.append(y)
        lib.aot_context_destroy(ctx)
        return outputs

    with ThreadPoolExecutor(max_workers=4) as pool:
        for outputs in pool.map(work, range(8)):
            for out in outputs:
                np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert fake_cuda_stat("cuModuleLoadDataEx") - loads == 2  # once per device
    # the weights once per device, then 2 inputs a run
    assert fake_cuda_stat("cuMemcpyHtoDAsync_v2") - uploads == 2 + 8 * 20 * 2
    lib.aot_model_close(model)
    assert _live() == dict.fromkeys(LIVE, 0)


def test_a_graph_that_fails_to_build_is_dropped_and_built_again_next_run(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, fail="cuGraphAddKernelNode_v2:2=CUDA_ERROR_OUT_OF_MEMORY")
    with Session(dense.artifact, device="cuda") as session:
        with pytest.raises(RunError, match=r"adding kernel \S+ to the CUDA graph: cuGraphAddKernelNode failed: "
                                           r"CUDA_ERROR_OUT_OF_MEMORY"):
            _run(session)
        assert fake_cuda_stat("live_graphs") == 0
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)
        assert fake_cuda_stat("live_graphs") == 1 and fake_cuda_stat("live_execs") == 1


def test_device_tensors_on_the_legacy_default_stream(monkeypatch, dense):
    """stream=0 is the caller's legacy default stream (the binding passes CU_STREAM_LEGACY, 0x1, as
    NULL would mean the context's own): the stand-in, as the driver, takes it."""
    from aot.runtime.device_array import DeviceArray

    fake_cuda_env(monkeypatch, dense.host_dir)
    with Session(dense.artifact, device="cuda") as session:
        inputs = {name: DeviceArray.from_numpy(session, value) for name, value in feeds().items()}
        (y,) = session.run(None, inputs, stream=0)
        np.testing.assert_allclose(y.numpy(), dense.want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("refusal", ["CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_IMAGE"])
def test_any_refusal_of_the_cubin_falls_back_to_the_ptx(monkeypatch, dense, refusal):
    """A cubin of a newer toolkit than the driver is refused one way or another."""
    fake_cuda_env(monkeypatch, dense.host_dir, fail=f"cuModuleLoadDataEx:1={refusal}")
    before = fake_cuda_stat("cuModuleLoadDataEx")
    with Session(dense.artifact, device="cuda") as session:
        np.testing.assert_allclose(_run(session), dense.want, rtol=1e-5, atol=1e-6)
    assert fake_cuda_stat("cuModuleLoadDataEx") - before == 2


def test_when_the_cubin_and_the_ptx_both_fail_the_message_says_so(monkeypatch, dense):
    fake_cuda_env(monkeypatch, dense.host_dir, fail="cuModuleLoadDataEx:*=CUDA_ERROR_INVALID_IMAGE")
    with pytest.raises(RunError, match=r"the cubin and the PTX both failed to load; the PTX: device 0 .*: loading the "
                                       r"PTX of sm_90: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_IMAGE"):
        Session(dense.artifact, device="cuda")
