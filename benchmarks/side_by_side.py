"""Median latency of engines timed side by side in one process (bench_samples, bench_zoo, llm),
and the name of the CPU they ran on.

Each engine is a call that runs one inference. The engines alternate in blocks
of BLOCK timed runs, so machine noise hits them alike; a pause before each block
keeps one from being timed while the other's spinning workers hold the cores.
"""
from __future__ import annotations

import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# timed runs per engine before the next engine's turn; untimed running before
# them; the pause before each block (see alternate_medians)
BLOCK = 10
WAKE_S = 0.03
SETTLE_S = 0.5
WARMUP = 10


def alternate_medians(engines: Sequence[Callable[[], object]], runs: int) -> list[float]:
    """Median seconds of one call of each engine, over at least `runs` timed calls each."""
    for _ in range(WARMUP):
        for engine in engines:
            engine()
    times: list[list[float]] = [[] for _ in engines]
    # Thread pools spin after a run (onnxruntime's for about 100 ms), and a spinning
    # worker takes a core from the other engine. So the engines alternate in
    # blocks, with a pause that lets the other's workers park before each block
    # and untimed runs that wake its own (a woken worker may first share its
    # waker's core until the scheduler moves it).
    for _ in range(-(-runs // BLOCK)):
        for engine, sink in zip(engines, times):
            time.sleep(SETTLE_S)
            awake = time.perf_counter() + WAKE_S
            while time.perf_counter() < awake:  # untimed: the scheduler settles the woken threads
                engine()
            for _ in range(BLOCK):
                start = time.perf_counter()
                engine()
                sink.append(time.perf_counter() - start)
    return [statistics.median(sink) for sink in times]


def cpu_model_name() -> str:
    """The CPU's marketing name, from lscpu or /proc/cpuinfo."""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
