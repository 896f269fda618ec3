"""Opening an artifact from a file holds its decoded weights and a few MB, not the file
besides them (model.c maps the file; container.c drops its pages behind each pass)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import onnx
from onnx import TensorProto, helper, numpy_helper

import aot

WEIGHT_BYTES = 2048 * 4096 * 4  # 32 MiB of random f32: zstd cannot shrink them

_PROBE = r"""
import ctypes, json, sys
from aot.runtime.abi import CError
from aot.runtime.library import load_library
def kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
lib = load_library()
model, err = ctypes.c_void_p(), CError()
before = kib("VmRSS")
status = lib.aot_model_open_file(sys.argv[1].encode(), ctypes.byref(model), ctypes.byref(err))
print(json.dumps({"status": status, "message": err.text(), "peak_kib": kib("VmHWM") - before}))
"""


@pytest.fixture(scope="module")
def big_artifact(tmp_path_factory):
    w = np.random.default_rng(0).standard_normal((2048, 4096)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "big",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2048])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4096])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("open") / "big.aot"
    onnx.save(model, path.with_name("big.onnx"))
    aot.compile(model, path)
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_opening_a_file_peaks_near_its_weights(big_artifact):
    done = subprocess.run([sys.executable, "-c", _PROBE, str(big_artifact)], capture_output=True, text=True,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == 0, result["message"]
    # the whole file held beside the weights (as reading it into memory did) would be
    # another 32 MiB; the mapping's window, the code and the manifest are a few MB
    assert result["peak_kib"] * 1024 < WEIGHT_BYTES + 12 * 2**20, result


@pytest.fixture(scope="module")
def uncompressed_artifact(tmp_path_factory, big_artifact):
    path = tmp_path_factory.mktemp("open") / "big_none.aot"
    aot.compile(onnx.load(str(big_artifact.with_name("big.onnx"))), path, weights_codec="none")
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_uncompressed_weights_are_read_in_place(big_artifact, uncompressed_artifact):
    from aot.artifact import parse_table
    weights = next(s for s in parse_table(uncompressed_artifact.read_bytes()) if s.name == "weights")
    assert weights.codec == "none" and weights.offset % 64 == 0
    done = subprocess.run([sys.executable, "-c", _PROBE, str(uncompressed_artifact)], capture_output=True, text=True,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == 0, result["message"]
    # nothing decoded: the open holds the manifest and the code, the weights stay in the file
    assert result["peak_kib"] * 1024 < 12 * 2**20, result
    x = np.random.default_rng(1).standard_normal((1, 2048)).astype(np.float32)
    # mapped (a path) and copied (bytes) runs of the uncompressed file equal the zstd one's
    want = aot.Session(big_artifact).run(None, {"x": x})[0]
    for source in (uncompressed_artifact, uncompressed_artifact.read_bytes()):
        np.testing.assert_array_equal(aot.Session(source).run(None, {"x": x})[0], want)


def test_unknown_weights_codec_is_refused(tmp_path):
    from aot.errors import ArgumentError
    with pytest.raises(ArgumentError, match="weights_codec 'lz4'"):
        aot.compile(tmp_path / "missing.onnx", weights_codec="lz4")
