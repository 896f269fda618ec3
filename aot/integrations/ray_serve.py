"""An artifact as a Ray Serve application: N replicas, each with its own `aot.Session`.

    from ray import serve
    from aot.integrations.ray_serve import deployment
    handle = serve.run(deployment("lenet.aot", num_replicas=2))
    probs = handle.remote({"x": x}).result()["y"]       # dict of numpy arrays in and out

Needs the `aot-compiler[ray]` extra (ray[serve]); importing this module without it is a
MissingDependencyError (an ImportError too) that says so.

Requests. Through a handle, a request is a dict of input name -> numpy array and the reply a
dict of output name -> array; `handle.traced.remote(inputs)` also says which replica served it
and how many requests shared its batch (`{"replica": id, "batch": 3, "outputs": {...}}`), and
`handle.stats.remote()` the counts of the replica the router picks. Over
HTTP (serve.run starts Serve's proxy; route_prefix as serve.run gives it), the body is JSON
`{"inputs": {"x": [[...]]}}` and the reply `{"outputs": {"y": [[...]]}}`, each list cast to
its input's dtype; a malformed request is a 400 with `{"error": message}`.

Batching. An artifact's shapes are fixed when it is compiled, so requests are batched by
rows (aot/integrations/rows.py): when every input and output of the model has the same
leading dim B, a request may carry any n >= 1 rows; the replica stacks the rows of the
requests that `@serve.batch` gathered, runs them B at a time, pads the last run with zero
rows and slices each request's rows back out. Compile the model with the batch you want a
run to take (`aot.compile(..., shapes={"x": (8, 1, 28, 28)})`) and send 1-row requests:
`max_batch_size` (requests gathered per batch, default B) of them share one run. A model
compiled for B = 1 gains nothing from a batch and is not batched unless asked. A model
that is not batch-major takes each request exactly as compiled, and max_batch_size > 1
is an ArgumentError for it.

Threads: each replica's Session runs `threads` threads and reserves as many CPUs from
Ray (`ray_actor_options={"num_cpus": threads}`), so replicas on one machine do not
oversubscribe it. The run itself goes to a worker thread (ctypes releases the GIL), so a
replica keeps taking requests into the next batch while one runs.

Compile before `ray.init()` in the same process, or with AOT_JOBS=1: aot.compile forks its
compile workers, and a fork of a process that runs Ray's threads can hang (Ray's threads
outlive ray.shutdown()).

The artifact: a path each replica opens (it must exist on every node that runs one), or
the artifact's bytes, which travel with the deployment (Ray keeps them with its config:
fine for small models, a shared path for large ones).
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any, Union

import numpy as np

from aot.artifact import read_artifact
from aot.errors import AotError, ArgumentError, MissingDependencyError
from aot.integrations.rows import Arrays, RowRunner, batch_rows
from aot.runtime.session import Session  # loads the C runtime only when a Session opens: in the replicas

try:
    from ray import serve
    from starlette.requests import Request  # Serve's HTTP proxy hands a replica these
    from starlette.responses import JSONResponse
except ImportError as e:  # ray is an optional extra: say which one
    raise MissingDependencyError(
        f"aot.integrations.ray_serve needs Ray Serve ({e}); install it with: pip install 'aot-compiler[ray]' "
        "(or pip install 'ray[serve]>=2.9')") from e

Artifact = Union[str, os.PathLike, bytes]


class AotReplica:
    """One Serve replica: a Session on the artifact, and the row runner when the model is batch-major.
    Serve calls it from one event loop; runs go to a worker thread one at a time (the Session's lock)."""

    def __init__(self, artifact: Artifact, threads: int, max_batch_size: int, batch_wait_timeout_s: float):
        self._session = Session(artifact, threads=threads)
        inputs, outputs = self._session.get_inputs(), self._session.get_outputs()
        batch = batch_rows([t.shape for t in inputs], [t.shape for t in outputs])
        self._runner = RowRunner(inputs, outputs, batch) if batch is not None else None
        self._inputs = {t.name: t.dtype for t in inputs}
        self._batched = max_batch_size > 1
        if self._batched:
            self._run_batch.set_max_batch_size(max_batch_size)
            self._run_batch.set_batch_wait_timeout_s(batch_wait_timeout_s)
        self._replica = _replica_id()
        self._requests = 0
        self._runs = 0

    async def __call__(self, request: Any) -> Any:
        """A dict of arrays -> a dict of arrays; an HTTP request (Starlette) -> a JSON reply."""
        if isinstance(request, Request):  # first: a Starlette request is a Mapping too (of its scope)
            return await self._http(request)
        outputs, _ = await self._infer(request)
        return outputs

    async def traced(self, inputs: Mapping[str, object]) -> dict[str, Any]:
        """As __call__, with the id of the replica that served it and how many requests shared its batch."""
        outputs, shared = await self._infer(inputs)
        return {"replica": self._replica, "batch": shared, "outputs": outputs}

    def stats(self) -> dict[str, Any]:
        """This replica's id, requests served and model runs (runs < requests when batching)."""
        return {"replica": self._replica, "requests": self._requests, "runs": self._runs}

    async def _infer(self, inputs: Mapping[str, object]) -> tuple[Arrays, int]:
        """The request's outputs, and the number of requests of its batch (1 unbatched)."""
        self._requests += 1
        if self._runner is None:  # not batch-major: the request is the run
            self._runs += 1
            outs = await asyncio.to_thread(self._session.run, None, inputs)
            return {t.name: a for t, a in zip(self._session.get_outputs(), outs)}, 1
        self._runner.rows(inputs)  # a malformed request fails here, alone, before it joins a batch
        if self._batched:
            return await self._run_batch(inputs)
        (result,) = await self._run_rows([inputs])
        return result, 1

    @serve.batch(max_batch_size=2, batch_wait_timeout_s=0.01)  # both set per replica in __init__
    async def _run_batch(self, requests: list[Mapping[str, object]]) -> list[tuple[Arrays, int]]:
        return [(result, len(requests)) for result in await self._run_rows(requests)]

    async def _run_rows(self, requests: list[Mapping[str, object]]) -> list[Arrays]:
        assert self._runner is not None
        results, runs = await asyncio.to_thread(self._runner.run, self._run_session, requests)
        self._runs += runs
        return results

    def _run_session(self, feeds: Arrays) -> list[np.ndarray]:
        return self._session.run(None, feeds)

    async def _http(self, request: Request) -> Any:
        try:
            body = await request.json()
            raw = body.get("inputs") if isinstance(body, dict) else None
            if not isinstance(raw, dict):
                raise ArgumentError('the request body must be JSON {"inputs": {"name": [...], ...}}')
            inputs = {}
            for name, value in raw.items():
                dtype = self._inputs.get(name)
                inputs[name] = np.asarray(value, dtype=dtype) if dtype is not None else value
            outputs, _ = await self._infer(inputs)
        except (AotError, ValueError, TypeError) as e:  # ValueError: bad JSON or a ragged list
            return JSONResponse({"error": str(e)}, status_code=400)
        return {"outputs": {name: a.tolist() for name, a in outputs.items()}}


def _replica_id() -> str:
    context = serve.get_replica_context()
    replica = getattr(context, "replica_id", None)  # Ray >= 2.10; replica_tag before
    return str(getattr(replica, "unique_id", replica)) if replica is not None else str(context.replica_tag)


def _model_batch(artifact: Artifact) -> int | None:
    """The artifact's row batch, read from its manifest (no C runtime needed on the driver)."""
    source = artifact if isinstance(artifact, bytes) else os.fspath(artifact)
    manifest = read_artifact(source).manifest
    return batch_rows([t["shape"] for t in manifest["inputs"]], [t["shape"] for t in manifest["outputs"]])


def deployment(artifact: Artifact, *, name: str | None = None, num_replicas: int = 2,
               max_batch_size: int | None = None, batch_wait_timeout_s: float = 0.01, threads: int = 1,
               ray_actor_options: dict[str, Any] | None = None) -> "serve.Application":
    """A Serve application of `num_replicas` replicas of the artifact, for `serve.run`.

    `name`: the deployment's name (default: the artifact's file name, or "aot").
    `max_batch_size`: requests gathered per batch (see the module docstring); None: the
    compiled batch B when the model is batch-major with B > 1, else 1 (no batching).
    `batch_wait_timeout_s`: how long a batch waits to fill. `threads`: per replica's Session.
    `ray_actor_options`: passed to Serve, over the default {"num_cpus": threads}.
    The artifact is checked here (ArtifactError), before Ray starts anything.
    """
    if isinstance(artifact, (bytearray, memoryview)):
        artifact = bytes(artifact)
    for what, value in (("num_replicas", num_replicas), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"{what} must be an int >= 1, got {value!r}")
    if not isinstance(batch_wait_timeout_s, (int, float)) or batch_wait_timeout_s < 0:
        raise ArgumentError(f"batch_wait_timeout_s must be a number >= 0, got {batch_wait_timeout_s!r}")
    batch = _model_batch(artifact)
    if max_batch_size is None:
        max_batch_size = batch if batch is not None else 1
    elif isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
        raise ArgumentError(f"max_batch_size must be an int >= 1, got {max_batch_size!r}")
    elif max_batch_size > 1 and batch is None:
        raise ArgumentError("max_batch_size > 1 needs a batch-major model (every input and output with the same "
                            "leading dim); this one takes each request as compiled: leave max_batch_size unset")
    if name is None:
        name = "aot" if isinstance(artifact, bytes) else (os.path.basename(os.fspath(artifact)).split(".")[0] or "aot")
    options = {"num_cpus": threads, **(ray_actor_options or {})}
    replica = serve.deployment(AotReplica, name=name, num_replicas=num_replicas, ray_actor_options=options)
    return replica.bind(artifact, threads, max_batch_size, float(batch_wait_timeout_s))
