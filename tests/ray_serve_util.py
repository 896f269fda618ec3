"""The Ray side of tests/integrations/test_ray_serve.py, run as its own process:

    python tests/ray_serve_util.py LENET4.aot DIR

A Ray cluster started in the pytest process would stay in it: its threads outlive
ray.shutdown(), and the compile workers a later test forks (aot/codegen/cpu/build.py) then
hang. So this script starts a local Ray (2 CPUs, no dashboard, an 80 MB object store),
deploys the artifact with two replicas, sends what the test asks (DIR/x16.npy as 16
concurrent 1-row requests through the handle, DIR/x6.npy as one request, a malformed request
beside a good one, DIR/x2.npy over HTTP), writes the answers to DIR/replies.npz and
DIR/replies.json, and shuts Ray down. The test makes the checks.
"""
from __future__ import annotations

import json
import socket
import sys
import urllib.request
from pathlib import Path

import numpy as np
import ray
from ray import serve

from aot.errors import RunError
from aot.integrations.ray_serve import deployment


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(handle, port: int, out: Path) -> None:
    x16, x6, x2 = (np.load(out / f"x{n}.npy") for n in (16, 6, 2))
    responses = [handle.traced.remote({"x": x16[i:i + 1]}) for i in range(len(x16))]  # all in flight at once
    traced = [r.result(timeout_s=60) for r in responses]
    stats = handle.stats.remote().result(timeout_s=30)
    rows6 = handle.remote({"x": x6}).result(timeout_s=60)["y"]

    bad = handle.remote({"x": np.zeros((1, 1, 27, 28), np.float32)})
    good = handle.remote({"x": x2[:1]})
    try:
        bad.result(timeout_s=60)
        malformed = {"raised": None, "run_error": False, "message": ""}
    except Exception as e:  # Ray re-raises the replica's RunError (a subclass of it and RayTaskError)
        malformed = {"raised": type(e).__name__, "run_error": isinstance(e, RunError), "message": str(e)}
    good_shape = list(good.result(timeout_s=60)["y"].shape)

    body = json.dumps({"inputs": {"x": x2.tolist()}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/lenet", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        http = np.asarray(json.loads(reply.read())["outputs"]["y"], np.float32)

    np.savez(out / "replies.npz", y16=np.concatenate([t["outputs"]["y"] for t in traced]), y6=rows6, http=http)
    (out / "replies.json").write_text(json.dumps({
        "replicas": [t["replica"] for t in traced], "batches": [t["batch"] for t in traced], "stats": stats,
        "malformed": malformed, "good_shape": good_shape}))


def main(artifact: str, out_dir: str) -> None:
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 << 20, log_to_driver=False)
    port = _free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(deployment(artifact, num_replicas=2, batch_wait_timeout_s=0.05),
                           name="lenet", route_prefix="/lenet")
        _query(handle, port, Path(out_dir))
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
