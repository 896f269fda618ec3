"""benchmarks/gpu_launch.py reads a bundle's launch plan right: the plan run through a stand-in
device whose kernels are the host-emulated GPU kernels (aot/codegen/nvptx/emulate.py) gives the
CPU artifact's outputs, and its checks launch fails the run with the message the CPU artifact
gives, on the inputs the CPU artifact refuses. On a GPU the same run_plan drives CuPy
(benchmarks/gpu_check.sh)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import gpu_launch
from aot.codegen.nvptx.emulate import EmulatedKernels
from aot.driver import compile_model
from aot.errors import RunError
from aot.runtime.session import Session
from gpu_bundle import write_bundle
from gpu_util import repeated_layers
from gpu_util import gather_check_model
from onnx_util import make_model, vinfo

F = TensorProto.FLOAT


def _model():
    """Weights, an arena temporary, two outputs, and a kernel the launch plan gives a smaller grid."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((32, 48)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(48).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("Softmax", ["r"], ["s"], axis=-1),
             helper.make_node("ReduceSum", ["r"], ["t"], keepdims=0)]
    return make_model(nodes, [vinfo("x", F, (6, 32))], [vinfo("s", F, (6, 48)), vinfo("t", F, None)], [w, b])


class EmulatedDevice:
    """gpu_launch.Device over host memory, launching the emulated kernels."""

    def __init__(self, kernels: EmulatedKernels):
        self.kernels = kernels  # owns the JIT-compiled code the functions point into
        self.by_symbol = kernels.functions
        self._keep: list[np.ndarray] = []
        self.launched: list[str] = []

    def alloc(self, nbytes: int) -> int:
        array = np.zeros(nbytes + 256, np.uint8)
        self._keep.append(array)
        return array.ctypes.data + (-array.ctypes.data) % 256

    def upload(self, data) -> int:
        raw = np.frombuffer(data, np.uint8) if isinstance(data, bytes) else np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        address = self.alloc(raw.size)
        ctypes.memmove(address, raw.ctypes.data, raw.size)
        return address

    def download(self, address: int, nbytes: int) -> bytes:
        return ctypes.string_at(address, nbytes)

    def launch(self, kernel, pointers) -> None:
        compiled, function = self.by_symbol[kernel["symbol"]]
        assert kernel["grid"][0] <= compiled.blocks and kernel["block"][0] == compiled.block
        self.launched.append(kernel["symbol"])
        function(*pointers, 0, compiled.blocks)

    def synchronize(self) -> None:
        pass


@pytest.mark.parametrize("sm,model,shape", [("sm_80", _model, (6, 32)), ("sm_90", _model, (6, 32)),
                                            ("sm_90", repeated_layers, (8, 32))])
def test_launch_plan_through_emulated_device_matches_cpu(sm, model, shape, tmp_path):
    result = compile_model(model(), target="cpu,cuda", sm=sm)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    write_bundle(result.artifact, {"x": x}, tmp_path / "model")
    manifest, weights, inputs, cpu = gpu_launch.load_bundle(tmp_path / "model")
    assert {p.name for p in (tmp_path / "model").iterdir()} >= {"manifest.json", "weights.bin", f"ptx.{sm}",
                                                                  "inputs.npz", "cpu_outputs.npz"}
    device = EmulatedDevice(EmulatedKernels(result.plan))
    entry = manifest["cuda"]["sms"][0]
    buffers = gpu_launch.Buffers(device, manifest, weights, inputs)
    gpu_launch.run_plan(device, entry["kernels"], buffers)
    got = gpu_launch.read_outputs(device, buffers)
    assert device.launched == [k["symbol"] for k in entry["kernels"]]
    worst, relative = gpu_launch.largest_error(got, cpu)
    assert relative < 1e-5, (worst, relative)


def test_largest_error_counts_nan_and_ints():
    a = np.array([1.0, np.nan], np.float32)
    assert gpu_launch.largest_error([a], [a.copy()]) == (0.0, 0.0)
    assert gpu_launch.largest_error([np.array([1.0, 2.0], np.float32)], [a])[0] == float("inf")
    assert gpu_launch.largest_error([np.array([1, 2])], [np.array([1, 3])]) == (float("inf"), float("inf"))


@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_checks_launch_passes_and_fails_as_the_cpu_artifact_does(sm, tmp_path):
    result = compile_model(gather_check_model(), target="cpu,cuda", sm=sm)
    good = {"i": np.array([1, -10, 9]), "j": np.array([0, 3, -1])}
    write_bundle(result.artifact, good, tmp_path / "model")
    manifest, weights, inputs, cpu = gpu_launch.load_bundle(tmp_path / "model")
    entry = manifest["cuda"]["sms"][0]
    device = EmulatedDevice(EmulatedKernels(result.plan))
    buffers = gpu_launch.Buffers(device, manifest, weights, inputs)
    gpu_launch.run_plan(device, entry["kernels"], buffers, entry["checks"])
    gpu_launch.raise_failed_check(device, buffers)
    assert device.launched[-1] == "aot_model_checks"
    assert gpu_launch.largest_error(gpu_launch.read_outputs(device, buffers), cpu) == (0.0, 0.0)
    session = Session(result.artifact)
    # each check on its own, and both at once: the first one in graph order is reported
    for bad in ({"i": np.array([1, 10, 9]), "j": good["j"]}, {"i": good["i"], "j": np.array([0, -11, 1])},
                {"i": np.array([-11, 0, 0]), "j": np.array([0, 0, 10])}):
        with pytest.raises(RunError) as from_cpu:
            session.run(None, bad)
        buffers = gpu_launch.Buffers(device, manifest, weights, [bad["i"], bad["j"]])
        gpu_launch.run_plan(device, entry["kernels"], buffers, entry["checks"])
        with pytest.raises(gpu_launch.CheckFailed) as from_gpu:
            gpu_launch.raise_failed_check(device, buffers)
        assert str(from_gpu.value) == str(from_cpu.value)
        assert "Gather): an index is outside [-10, 10)" in str(from_gpu.value)
    assert "node 'first'" in str(from_gpu.value)


def test_a_status_answer_out_of_range_is_an_error():
    result = compile_model(gather_check_model(), target="cpu,cuda", sm="sm_80")
    manifest = result.manifest
    device = EmulatedDevice(EmulatedKernels(result.plan))
    buffers = gpu_launch.Buffers(device, manifest, b"", [np.zeros(3, np.int64)] * 2)
    ctypes.memmove(buffers.status, np.array([3], np.int32).ctypes.data, 4)  # two checks: 0..2
    with pytest.raises(RuntimeError, match="answered 3, outside 0..2"):
        gpu_launch.raise_failed_check(device, buffers)
