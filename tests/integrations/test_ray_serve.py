"""aot.integrations.ray_serve on a local Ray (2 CPUs, no dashboard, a small object store), in a
process of its own (tests/ray_serve_util.py: a Ray started in pytest's process would break the
compile workers later tests fork): lenet compiled for 4 rows a run, two replicas; 16 concurrent
1-row requests through the handle, each checked against aot.Session on lenet compiled for 1 row,
served by both replicas, several requests to a batch; a 6-row request; a malformed one fails
alone; one request over HTTP. Without ray, importing the module is a MissingDependencyError."""
from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

import aot
import make_samples
from aot.errors import ArgumentError, MissingDependencyError
from paths_util import ROOT

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray[serve] is not installed (pip install 'aot-compiler[ray]')")
BATCH = 4
REQUESTS = 16


def _batched_lenet() -> onnx.ModelProto:
    """The sample lenet with its batch dim made dynamic, to compile for BATCH rows a run."""
    model = make_samples.make_sample("lenet")
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    return model


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    out = tmp_path_factory.mktemp("ray_serve")
    aot.compile(make_samples.make_sample("lenet"), out / "lenet1.aot")
    aot.compile(_batched_lenet(), out / "lenet4.aot", shapes={"x": (BATCH, 1, 28, 28)})
    return out / "lenet1.aot", out / "lenet4.aot"


def _rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 28, 28)).astype(np.float32)


@pytest.fixture(scope="module")
def served(artifacts, tmp_path_factory):
    """What tests/ray_serve_util.py got back from the deployment: (arrays, replies.json, inputs)."""
    out = tmp_path_factory.mktemp("ray_replies")
    inputs = {n: _rows(n, seed) for n, seed in ((REQUESTS, 0), (6, 1), (2, 3))}
    for n, x in inputs.items():
        np.save(out / f"x{n}.npy", x)
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "ray_serve_util.py"), str(artifacts[1]), str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return dict(np.load(out / "replies.npz")), json.loads((out / "replies.json").read_text()), inputs


def _reference(artifact, x: np.ndarray) -> np.ndarray:
    with aot.Session(artifact) as s:
        return np.concatenate([s.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])


def _assert_close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@needs_ray
def test_two_replicas_serve_concurrent_requests_in_batches(served, artifacts):
    arrays, replies, inputs = served
    _assert_close(arrays["y16"], _reference(artifacts[0], inputs[REQUESTS]))
    assert len(set(replies["replicas"])) == 2, "both replicas should have served"
    assert max(replies["batches"]) > 1, "requests in flight together should share runs"
    stats = replies["stats"]
    assert stats["replica"] in replies["replicas"] and 1 <= stats["runs"] <= stats["requests"], stats


@needs_ray
def test_a_request_of_several_rows_spans_runs(served, artifacts):
    arrays, _, inputs = served
    assert arrays["y6"].shape == (6, 10)
    _assert_close(arrays["y6"], _reference(artifacts[0], inputs[6]))


@needs_ray
def test_a_malformed_request_fails_alone(served):
    _, replies, _ = served
    malformed = replies["malformed"]
    assert malformed["run_error"], malformed
    assert "input 'x': expected shape (n, 1, 28, 28)" in malformed["message"], malformed
    assert replies["good_shape"] == [1, 10]


@needs_ray
def test_http_json_in_and_out(served, artifacts):
    arrays, _, inputs = served
    _assert_close(arrays["http"], _reference(artifacts[0], inputs[2]))


@needs_ray
def test_deployment_checks_its_arguments(artifacts):
    from aot.integrations.ray_serve import deployment

    with pytest.raises(ArgumentError, match="num_replicas must be an int >= 1"):
        deployment(artifacts[1], num_replicas=0)
    with pytest.raises(ArgumentError, match="max_batch_size must be an int >= 1"):
        deployment(artifacts[1], max_batch_size=0)
    with pytest.raises(aot.ArtifactError):
        deployment(artifacts[1].parent / "missing.aot")


def test_without_ray_the_import_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    monkeypatch.delitem(sys.modules, "aot.integrations.ray_serve", raising=False)
    with pytest.raises(MissingDependencyError, match=r"pip install 'aot-compiler\[ray\]'") as info:
        importlib.import_module("aot.integrations.ray_serve")
    assert isinstance(info.value, ImportError)
