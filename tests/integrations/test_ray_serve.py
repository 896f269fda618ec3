"""aot.integrations.ray_serve on a local Ray (2 CPUs, no dashboard, a small object store):
lenet compiled for 4 rows a run, two replicas; 16 concurrent 1-row requests through the
handle, each checked against aot.Session on lenet compiled for 1 row, served by both
replicas, several requests to a batch; a 6-row request; a malformed one fails alone; one
request over HTTP. Without ray, importing the module is a MissingDependencyError."""
from __future__ import annotations

import importlib
import json
import socket
import sys
import urllib.request

import numpy as np
import onnx
import pytest

import aot
import make_samples
from aot.errors import ArgumentError, MissingDependencyError, RunError

try:
    import ray
    from ray import serve
except ImportError:
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="ray[serve] is not installed (pip install 'aot-compiler[ray]')")
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(artifacts):
    from aot.integrations.ray_serve import deployment

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 << 20, log_to_driver=False,
             configure_logging=False)
    port = _free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(deployment(artifacts[1], num_replicas=2, batch_wait_timeout_s=0.05),
                           name="lenet", route_prefix="/lenet")
        yield handle, port
    finally:
        serve.shutdown()
        ray.shutdown()


def _rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 28, 28)).astype(np.float32)


def _reference(artifact, x: np.ndarray) -> np.ndarray:
    with aot.Session(artifact) as s:
        return np.concatenate([s.run(None, {"x": x[i:i + 1]})[0] for i in range(len(x))])


def _assert_close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@needs_ray
def test_two_replicas_serve_concurrent_requests_in_batches(served, artifacts):
    handle, _ = served
    x = _rows(REQUESTS, seed=0)
    responses = [handle.traced.remote({"x": x[i:i + 1]}) for i in range(REQUESTS)]  # all in flight at once
    replies = [r.result(timeout_s=60) for r in responses]
    got = np.concatenate([r["outputs"]["y"] for r in replies])
    _assert_close(got, _reference(artifacts[0], x))
    assert len({r["replica"] for r in replies}) == 2, "both replicas should have served"

    assert max(r["batch"] for r in replies) > 1, "requests in flight together should share runs"
    stats = handle.stats.remote().result(timeout_s=30)
    assert stats["replica"] in {r["replica"] for r in replies} and 1 <= stats["runs"] <= stats["requests"], stats


@needs_ray
def test_a_request_of_several_rows_spans_runs(served, artifacts):
    handle, _ = served
    x = _rows(6, seed=1)
    reply = handle.remote({"x": x}).result(timeout_s=60)
    assert reply["y"].shape == (6, 10)
    _assert_close(reply["y"], _reference(artifacts[0], x))


@needs_ray
def test_a_malformed_request_fails_alone(served):
    handle, _ = served
    bad = handle.remote({"x": np.zeros((1, 1, 27, 28), np.float32)})
    good = handle.remote({"x": _rows(1, seed=2)})
    with pytest.raises(RunError, match=r"input 'x': expected shape \(n, 1, 28, 28\)"):
        bad.result(timeout_s=60)
    assert good.result(timeout_s=60)["y"].shape == (1, 10)


@needs_ray
def test_http_json_in_and_out(served, artifacts):
    _, port = served
    x = _rows(2, seed=3)
    body = json.dumps({"inputs": {"x": x.tolist()}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/lenet", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        got = np.asarray(json.loads(reply.read())["outputs"]["y"], np.float32)
    _assert_close(got, _reference(artifacts[0], x))


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
