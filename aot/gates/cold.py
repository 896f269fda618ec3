"""Cold start and peak memory: open an artifact and run it once in a fresh process.

A process that has already opened the artifact has its code loaded, its pages mapped
and its allocator warmed; only a new one shows what a server pays on its first request.
The child (`python -m aot.gates.cold ARTIFACT FEEDS.npz THREADS`) imports the binding
before it starts the clock, since Python's start-up is no part of the model's, then
times `Session(...)` (read, check, load code, create the context) and the first run,
and prints one JSON line. The inputs come from the parent in a .npz, so the first run
sees the same values as the timed ones.

Peak memory is the child's peak resident set (VmHWM in /proc/self/status, else
getrusage's ru_maxrss), beside its resident set before the open: the interpreter's own
share, which a C program running the artifact would not have. The file itself may sit
in the page cache from the parent's reads; dropping it needs root.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aot.errors import RunError


@dataclass(frozen=True)
class ColdStart:
    open_ms: float
    first_run_ms: float
    peak_rss_bytes: int
    baseline_rss_bytes: int  # before the open: the Python interpreter and numpy

    @property
    def cold_start_ms(self) -> float:
        return self.open_ms + self.first_run_ms

    def to_json(self) -> dict[str, float | int]:
        return {"cold_start_ms": self.cold_start_ms, "open_ms": self.open_ms, "first_run_ms": self.first_run_ms,
                "peak_rss_bytes": self.peak_rss_bytes, "baseline_rss_bytes": self.baseline_rss_bytes}


def _status_bytes(field: str) -> int | None:
    """A `kB` field of /proc/self/status in bytes; None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _peak_rss() -> int:
    peak = _status_bytes("VmHWM")
    if peak is not None:
        return peak
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def write_feeds(path: Path, feeds: dict[str, np.ndarray]) -> None:
    """The arrays by position in `path` (.npz), their names beside it (.json): a model's input
    names may hold any character, and np.savez's keywords cannot be "file" or hold "/"."""
    np.savez(path, *feeds.values())
    path.with_suffix(".json").write_text(json.dumps(list(feeds)))


def read_feeds(path: Path) -> dict[str, np.ndarray]:
    names = json.loads(path.with_suffix(".json").read_text())
    with np.load(path) as stored:
        return {name: stored[f"arr_{i}"] for i, name in enumerate(names)}


def _child(artifact: str, feeds_path: str, threads: int) -> dict[str, float | int]:
    from aot.runtime.library import load_library
    from aot.runtime.session import Session

    load_library()  # a C server has the runtime linked before it starts: not the model's cost
    feeds = read_feeds(Path(feeds_path))
    baseline = _status_bytes("VmRSS") or _peak_rss()
    start = time.perf_counter()
    session = Session(artifact, threads=threads)
    opened = time.perf_counter()
    session.run(None, feeds)
    ran = time.perf_counter()
    return {"open_ms": (opened - start) * 1000, "first_run_ms": (ran - opened) * 1000,
            "peak_rss_bytes": _peak_rss(), "baseline_rss_bytes": baseline}


def _child_env() -> dict[str, str]:
    """This process's environment, with the directory `aot` was imported from on the path:
    the child must import the same aot, installed or not."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def measure_cold(artifact: Path, feeds: dict[str, np.ndarray], threads: int, timeout_s: float = 300) -> ColdStart:
    """Open and run `artifact` once in a new Python process; RunError if that process fails."""
    with tempfile.TemporaryDirectory(prefix="aot-cold-") as tmp:
        feeds_path = Path(tmp) / "feeds.npz"
        write_feeds(feeds_path, feeds)
        command = [sys.executable, "-m", "aot.gates.cold", str(artifact), str(feeds_path), str(threads)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=_child_env(), timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise RunError(f"{artifact}: the cold-start run took over {timeout_s:.0f} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {}
    if "error" in result:
        raise RunError(f"{artifact}: cold-start run: {result['error']}")
    if done.returncode != 0 or "open_ms" not in result:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise RunError(f"{artifact}: the cold-start process failed: {tail[0]}")
    return ColdStart(open_ms=float(result["open_ms"]), first_run_ms=float(result["first_run_ms"]),
                     peak_rss_bytes=int(result["peak_rss_bytes"]), baseline_rss_bytes=int(result["baseline_rss_bytes"]))


def main(argv: list[str]) -> int:
    from aot.errors import AotError

    artifact, feeds_path, threads = argv
    try:
        print(json.dumps(_child(artifact, feeds_path, int(threads))))
    except AotError as err:
        print(json.dumps({"error": str(err)}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
