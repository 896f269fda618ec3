"""Throughput and latency of aot_server (runtime_c/servers) under tritonclient.http.

    python benchmarks/bench_server.py [--model lenet] [--requests 2000] [--threads 8]
                                      [--workers N] [--modes binary,json] [--server PATH]

Compiles the sample model (models/make_samples.py), starts aot_server on loopback with
--workers N (default: the CPU count), and sends --requests inference requests per mode from
--threads client threads (one tritonclient InferenceServerClient each, keep-alive), after 50
untimed warm-up requests. Modes: binary (the binary tensor extension both ways) and json
(tensors as JSON numbers both ways). Every answer is checked against aot.Session's; a wrong
answer or a failed request counts as an error. Prints, per mode: requests, client threads,
errors, requests per second, p50 and p99 latency; and for scale the in-process
aot.Session.run median on the same input. The client runs in this Python process, on the
same machine: on few cores it competes with the server for them.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

import make_samples  # noqa: E402
from side_by_side import cpu_model_name  # noqa: E402

import aot  # noqa: E402
from aot.runtime.library import build_server  # noqa: E402


class ServerProcess:
    """An aot_server process on 127.0.0.1 and a free port (--port 0: it prints the port)."""

    def __init__(self, exe: Path, artifacts: dict[str, Path], *extra: str, start_timeout: float = 60):
        args = [str(exe), "--host", "127.0.0.1", "--port", "0"]
        for name, path in artifacts.items():
            args += ["--model", f"{name}={path}"]
        self.proc = subprocess.Popen(args + list(extra), stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self.port = 0
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            if "listening on http://" in line:
                self.port = int(line.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
                break
        if not self.port:
            self.proc.kill()
            raise RuntimeError("aot_server did not start:\n" + "".join(self.log) + self.proc.stderr.read())
        # drain stderr so the server never blocks on a full pipe
        self._drain = threading.Thread(target=self._read_log, daemon=True)
        self._drain.start()

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line)

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout: float = 15) -> int:
        """SIGTERM, then the exit code (-999 when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = -999
        self._drain.join(timeout=5)  # the log's last lines
        return code


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def drive(url: str, model: str, inputs: list[np.ndarray], wants: list[np.ndarray], mode: str,
          requests: int, threads: int) -> dict:
    """`requests` inference requests from `threads` client threads; latencies and errors."""
    import tritonclient.http as httpclient

    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    binary = mode == "binary"

    def client_thread(t: int) -> None:
        client = httpclient.InferenceServerClient(url, connection_timeout=60, network_timeout=60)
        mine, bad = [], 0
        for k in range(t, requests, threads):
            x, want = inputs[k % len(inputs)], wants[k % len(inputs)]
            inp = httpclient.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            out = httpclient.InferRequestedOutput("y", binary_data=binary)
            start = time.perf_counter()
            try:
                got = client.infer(model, [inp], outputs=[out]).as_numpy("y")
                ok = got is not None and np.allclose(got, want, rtol=1e-5, atol=1e-6)
            except Exception:  # a failed request is counted, not fatal
                ok = False
            mine.append(time.perf_counter() - start)
            bad += not ok
        client.close()
        with lock:
            latencies.extend(mine)
            errors[0] += bad

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(client_thread, range(threads)))
    wall = time.perf_counter() - start
    return {"mode": mode, "requests": requests, "threads": threads, "errors": errors[0],
            "rps": requests / wall, "p50_ms": 1e3 * percentile(latencies, 50),
            "p99_ms": 1e3 * percentile(latencies, 99)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="lenet", choices=["lenet", "mlp", "lenet_bn"])
    parser.add_argument("--requests", type=int, default=2000, help="timed requests per mode")
    parser.add_argument("--threads", type=int, default=8, help="client threads")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="server workers")
    parser.add_argument("--modes", default="binary,json")
    parser.add_argument("--server", type=Path, help="an aot_server to use (default: built from runtime_c/)")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in ("binary", "json"):
            parser.error(f"unknown mode {mode!r} (binary, json)")

    exe = args.server or build_server()
    with tempfile.TemporaryDirectory(prefix="bench_server-") as tmp:
        paths = make_samples.write_samples(Path(tmp))
        artifact = Path(tmp) / f"{args.model}.aot"
        aot.compile(paths[args.model], artifact)
        session = aot.Session(artifact)
        shape = session.get_inputs()[0].shape
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(16)]
        wants = [session.run(None, {"x": x})[0] for x in inputs]
        local = []
        for _ in range(200):
            start = time.perf_counter()
            session.run(None, {"x": inputs[0]})
            local.append(time.perf_counter() - start)

        server = ServerProcess(exe, {args.model: artifact}, "--workers", str(args.workers),
                               "--queue", str(max(64, 4 * args.threads)))
        try:
            results = []
            for mode in modes:
                drive(server.url, args.model, inputs, wants, mode, 50, min(args.threads, 4))  # warm-up
                results.append(drive(server.url, args.model, inputs, wants, mode, args.requests, args.threads))
        finally:
            code = server.stop()

    print(f"aot_server, model {args.model}, {args.workers} workers; CPU: {cpu_model_name()} "
          f"({os.cpu_count()} logical CPUs, client and server on the same machine)")
    print(f"{'mode':8} {'requests':>8} {'threads':>7} {'errors':>6} {'rps':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for r in results:
        print(f"{r['mode']:8} {r['requests']:8d} {r['threads']:7d} {r['errors']:6d} {r['rps']:9.1f} "
              f"{r['p50_ms']:8.3f} {r['p99_ms']:8.3f}")
    print(f"in-process aot.Session.run median: {1e3 * statistics.median(local):.3f} ms")
    if code != 0:
        print(f"aot_server exited with {code} on SIGTERM:\n" + "".join(server.log), file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
