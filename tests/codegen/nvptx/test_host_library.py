"""nvptx/host_library.py: the host-code libraries the stand-in CUDA driver runs
(runtime_c/tests/fake_cuda.c), and the whole chain before the runtime uses it: a cpu,cuda
artifact's sm_90 PTX (or cubin) loaded into the stand-in through ctypes, every launch of the
manifest's launch plan made as the runtime will make it, the checks kernel's status word
read, and the outputs against onnxruntime. Also what the stand-in refuses: a launch whose
grid is not the kernel's, an argument outside every allocation (a sticky fault)."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from aot.artifact import read_artifact
from aot.codegen.nvptx.host_library import (
    RECORD, artifact_host_libraries, link_shared_library, module_key, write_host_library)
from aot.driver import CompileResult, compile_model
from aot.errors import ArgumentError, CodegenError
from fake_cuda_util import fake_cuda_env, fake_cuda_last_rejection, fake_cuda_library, fake_cuda_stat
from gpu_util import dense_softmax_model, feeds, gather_check_model

INVALID_VALUE, ILLEGAL_ADDRESS = 1, 700
c_u64 = ctypes.c_uint64


class Record(ctypes.Structure):
    """aot_fake_kernel_record_t (runtime_c/tests/fake_cuda.h)."""

    _fields_ = [("symbol", ctypes.c_char_p), ("run", ctypes.c_void_p), ("param_count", ctypes.c_uint32),
                ("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3), ("shared_bytes", ctypes.c_uint32),
                ("blocks", ctypes.c_int64)]


class Cuda:
    """The stand-in's driver API through ctypes; `check` turns a CUresult into an assertion."""

    def __init__(self) -> None:
        self.lib = fake_cuda_library()

    def __getattr__(self, name: str):
        return getattr(self.lib, name)

    def check(self, result: int, what: str) -> None:
        assert result == 0, f"{what}: CUresult {result} ({fake_cuda_last_rejection()})"

    def alloc(self, nbytes: int) -> int:
        address = c_u64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(max(nbytes, 1))), "alloc")
        return address.value

    def upload(self, address: int, data: bytes | np.ndarray) -> None:
        buffer = bytes(data) if isinstance(data, (bytes, bytearray)) else np.ascontiguousarray(data).tobytes()
        if buffer:
            self.check(self.lib.cuMemcpyHtoDAsync_v2(c_u64(address), buffer, ctypes.c_size_t(len(buffer)), None),
                       "upload")

    def download(self, address: int, nbytes: int) -> bytes:
        out = ctypes.create_string_buffer(nbytes)
        self.check(self.lib.cuMemcpyDtoHAsync_v2(out, c_u64(address), ctypes.c_size_t(nbytes), None), "download")
        return out.raw

    def launch(self, function: ctypes.c_void_p, launch: dict, addresses: list[int], grid=None) -> int:
        values = (c_u64 * len(addresses))(*addresses)
        params = (ctypes.c_void_p * len(addresses))(*[ctypes.addressof(values) + 8 * i for i in range(len(addresses))])
        gx, gy, gz = grid or launch["grid"]
        bx, by, bz = launch["block"]
        return self.lib.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, launch["shared_bytes"], None, params, None)


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompileResult]:
    return {"gather": compile_model(gather_check_model(), target="cpu,cuda", sm="sm_90"),
            "dense": compile_model(dense_softmax_model(), target="cpu,cuda", sm="sm_90")}


@pytest.fixture(scope="module")
def host_dir(compiled, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("host_code")
    for result in compiled.values():
        artifact_host_libraries(result, folder)
    return folder


def _feeds(name: str) -> dict[str, np.ndarray]:
    if name == "dense":
        return feeds(1)
    return {"i": np.array([0, -1, 9], np.int64), "j": np.array([-10, 3, 4], np.int64)}


class Session:
    """One model's launch plan run on the stand-in as the runtime runs it: a retained, pushed
    primary context, the module loaded from `image`, an arena, the weights, inputs, outputs
    and a status word allocated and the weights uploaded."""

    def __init__(self, cuda: Cuda, result: CompileResult, kind: str = "ptx"):
        self.cuda, self.result = cuda, result
        manifest = result.manifest
        self.sm = next(s for s in manifest["cuda"]["sms"] if s["sm"] == "sm_90")
        sections = read_artifact(result.artifact).sections
        image = sections[self.sm[kind]] + (b"\0" if kind == "ptx" else b"")  # the driver takes PTX NUL-terminated
        self.ctx = ctypes.c_void_p()
        cuda.check(cuda.cuInit(0), "cuInit")
        cuda.check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), 0), "retain")
        cuda.check(cuda.cuCtxPushCurrent_v2(self.ctx), "push")
        self.module = ctypes.c_void_p()
        cuda.check(cuda.cuModuleLoadDataEx(ctypes.byref(self.module), image, 0, None, None), "load")
        launches = [*self.sm["kernels"], *([self.sm["checks"]] if "checks" in self.sm else [])]
        self.functions = {}
        for launch in launches:
            if launch["symbol"] not in self.functions:
                function = ctypes.c_void_p()
                cuda.check(cuda.cuModuleGetFunction(ctypes.byref(function), self.module, launch["symbol"].encode()),
                           launch["symbol"])
                self.functions[launch["symbol"]] = function
        graph = result.plan.graph
        self.bases = {"arena": cuda.alloc(manifest["cuda"]["arena"]["bytes"]),
                      "weights": cuda.alloc(manifest["weights"]["bytes"]), "status": cuda.alloc(4)}
        cuda.upload(self.bases["weights"], sections[manifest["cuda"]["weights"]])
        self.inputs = [cuda.alloc(v.type.size * v.type.dtype.itemsize) for v in graph.inputs]
        self.outputs = [cuda.alloc(v.type.size * v.type.dtype.itemsize) for v in graph.outputs]

    def addresses(self, launch: dict) -> list[int]:
        found = []
        for arg in launch["args"]:
            if arg["kind"] in ("input", "output"):
                found.append((self.inputs if arg["kind"] == "input" else self.outputs)[arg["index"]])
            else:
                found.append(self.bases[arg["kind"]] + arg.get("offset", 0))
        return found

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        graph = self.result.plan.graph
        for address, name in zip(self.inputs, graph.input_names):
            self.cuda.upload(address, feeds[name])
        for launch in self.sm["kernels"]:
            self.cuda.check(self.cuda.launch(self.functions[launch["symbol"]], launch, self.addresses(launch)),
                            launch["name"])
        if "checks" in self.sm:
            checks = self.sm["checks"]
            self.cuda.check(self.cuda.launch(self.functions[checks["symbol"]], checks, self.addresses(checks)),
                            "checks")
            status = int.from_bytes(self.cuda.download(self.bases["status"], 4), "little", signed=True)
            assert status == 0, f"the checks kernel answered {status}"
        return [np.frombuffer(self.cuda.download(address, v.type.size * v.type.dtype.itemsize),
                              v.type.dtype.to_numpy()).reshape(v.type.shape)
                for address, v in zip(self.outputs, graph.outputs)]

    def close(self) -> None:
        for address in [*self.bases.values(), *self.inputs, *self.outputs]:
            self.cuda.check(self.cuda.cuMemFree_v2(c_u64(address)), "free")
        self.cuda.check(self.cuda.cuModuleUnload(self.module), "unload")
        self.cuda.check(self.cuda.cuCtxPopCurrent_v2(None), "pop")
        self.cuda.check(self.cuda.cuDevicePrimaryCtxRelease_v2(0), "release")


def _onnxruntime(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


LEAKS = ("live_allocations", "live_modules", "live_streams", "live_graphs", "live_execs", "primary_retains",
         "destroyed_with_context")


def _counts() -> dict[str, int]:
    """The stand-in's leak counters now (relative: other tests of the process use it too)."""
    return {what: fake_cuda_stat(what) for what in LEAKS}


def test_module_key_is_fnv1a_64() -> None:
    # the FNV-1a 64 reference vectors
    assert module_key(b"") == "cbf29ce484222325"
    assert module_key(b"a") == "af63dc4c8601ec8c"
    assert module_key(b"foobar") == "85944171f73967e8"


def test_table_holds_every_host_function_with_its_launch(compiled, host_dir) -> None:
    # the gather model's GPU code shares functions between kernels of one code (aot_kernel_0
    # launches k0 and k2); the host build keeps one function per kernel, each in the table
    result = compiled["gather"]
    sm = result.manifest["cuda"]["sms"][0]
    sections = read_artifact(result.artifact).sections
    library = ctypes.CDLL(str(host_dir / f"{module_key(sections[sm['ptx']])}.so"))
    count = ctypes.c_uint32.in_dll(library, "aot_fake_kernel_count").value
    records = (Record * count).in_dll(library, "aot_fake_kernel_table")
    table = {r.symbol.decode(): r for r in records}
    assert ctypes.sizeof(Record) == 56 == RECORD.get_abi_size(_target_data())
    assert sorted(table) == sorted([f"aot_kernel_{i}" for i in range(len(result.plan.kernels))] + ["aot_model_checks"])
    assert {launch["symbol"] for launch in sm["kernels"]} < set(table)
    for launch in [*sm["kernels"], sm["checks"]]:
        record = table[launch["symbol"]]
        assert list(record.grid) == launch["grid"] and list(record.block) == launch["block"]
        assert record.shared_bytes == launch["shared_bytes"] and record.param_count == len(launch["args"])
    if "cubin" in sm:  # one library, linked under both keys
        assert (host_dir / f"{module_key(sections[sm['cubin']])}.so").stat().st_ino == \
            (host_dir / f"{module_key(sections[sm['ptx']])}.so").stat().st_ino


def _target_data():
    from aot.codegen.cpu.target import CpuTarget
    return CpuTarget.host().target_machine().target_data


@pytest.mark.parametrize("name", ["gather", "dense"])
def test_launch_plan_on_the_stand_in_matches_onnxruntime(name, compiled, host_dir, monkeypatch) -> None:
    model = gather_check_model() if name == "gather" else dense_softmax_model()
    fake_cuda_env(monkeypatch, host_dir)
    cuda = Cuda()
    before, runs = _counts(), fake_cuda_stat("kernel_runs")
    session = Session(cuda, compiled[name])
    try:
        ours = session.run(_feeds(name))
    finally:
        session.close()
    sm = session.sm
    assert fake_cuda_stat("kernel_runs") == runs + len(sm["kernels"]) + ("checks" in sm)
    for mine, theirs in zip(ours, _onnxruntime(model, _feeds(name))):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
    assert _counts() == before


def test_cubin_module_runs_the_same_host_code(compiled, host_dir, monkeypatch) -> None:
    result = compiled["gather"]
    if "cubin" not in result.manifest["cuda"]["sms"][0]:
        pytest.skip("no cubin: ptxas is not installed")
    fake_cuda_env(monkeypatch, host_dir)
    before = _counts()
    session = Session(Cuda(), result, kind="cubin")  # the stand-in sizes the cubin from its ELF headers
    try:
        ours = session.run(_feeds("gather"))
    finally:
        session.close()
    np.testing.assert_allclose(ours[0], _onnxruntime(gather_check_model(), _feeds("gather"))[0])
    assert _counts() == before


def test_failing_check_sets_the_status_word(compiled, host_dir, monkeypatch) -> None:
    fake_cuda_env(monkeypatch, host_dir)
    session = Session(Cuda(), compiled["gather"])
    try:
        with pytest.raises(AssertionError, match="the checks kernel answered 2"):
            session.run({"i": np.array([0, 1, 2], np.int64), "j": np.array([0, 10, 2], np.int64)})
    finally:
        session.close()


def test_wrong_grid_and_stray_argument_are_refused(compiled, host_dir, monkeypatch) -> None:
    fake_cuda_env(monkeypatch, host_dir)
    cuda = Cuda()
    before, broken = _counts(), fake_cuda_stat("broken_contexts")
    session = Session(cuda, compiled["dense"])
    try:
        launch = session.sm["kernels"][0]
        function = session.functions[launch["symbol"]]
        addresses = session.addresses(launch)
        grid = [launch["grid"][0] + 1, 1, 1]
        assert cuda.launch(function, launch, addresses, grid=grid) == INVALID_VALUE
        assert "its code wants grid" in fake_cuda_last_rejection()
        # an address past every allocation: a fault, and the context stays broken
        stray = [*addresses[:-1], session.bases["status"] + 4096]
        assert cuda.launch(function, launch, stray) == ILLEGAL_ADDRESS
        assert fake_cuda_stat("broken_contexts") == broken + 1
        assert cuda.launch(function, launch, addresses) == ILLEGAL_ADDRESS
        assert cuda.cuStreamSynchronize(None) == ILLEGAL_ADDRESS
        address = c_u64()
        assert cuda.cuMemAlloc_v2(ctypes.byref(address), ctypes.c_size_t(64)) == ILLEGAL_ADDRESS
    finally:
        session.close()  # frees and unloads still work; the last release ends the broken context
    assert fake_cuda_stat("broken_contexts") == broken
    assert _counts() == before


def test_ptx_image_with_its_nul_is_refused(compiled, tmp_path) -> None:
    result = compiled["gather"]
    ptx = read_artifact(result.artifact).sections[result.manifest["cuda"]["sms"][0]["ptx"]]
    with pytest.raises(ArgumentError, match="without its NUL"):
        write_host_library(result.plan, [ptx + b"\0"], tmp_path)


def test_link_failure_names_the_command(monkeypatch) -> None:
    monkeypatch.setenv("CC", "cc")
    with pytest.raises(CodegenError, match=r"linking the host-code library failed \(cc -shared"):
        link_shared_library(b"not an object file")


def test_fake_cuda_env_sets_and_restores_the_settings(host_dir, monkeypatch) -> None:
    monkeypatch.setenv("AOT_FAKE_CUDA_SM", "80")  # a setting not given is unset inside
    monkeypatch.delenv("AOT_FAKE_CUDA_FAIL", raising=False)
    cuda = Cuda()
    count = ctypes.c_int()
    with fake_cuda_env(None, host_dir, devices=3, fail="cuDeviceGetCount:2=CUDA_ERROR_UNKNOWN") as driver:
        assert os.environ["AOT_CUDA_DRIVER"] == str(driver) and driver.name == "libcuda.so.1"
        assert os.environ["AOT_FAKE_CUDA_HOST_DIR"] == str(host_dir) and "AOT_FAKE_CUDA_SM" not in os.environ
        cuda.check(cuda.cuInit(0), "cuInit")
        cuda.check(cuda.cuDeviceGetCount(ctypes.byref(count)), "count")
        assert count.value == 3
        assert cuda.cuDeviceGetCount(ctypes.byref(count)) == 999  # the second call since the settings
    assert os.environ["AOT_FAKE_CUDA_SM"] == "80" and "AOT_FAKE_CUDA_DEVICES" not in os.environ
    assert "AOT_FAKE_CUDA_FAIL" not in os.environ
    with pytest.raises(TypeError, match="unknown stand-in settings"):
        fake_cuda_env(None, host_dir, device=2)
