"""Timing several engines interleaved run by run, and the statistics the gates report.

Engines that are compared (aot against onnxruntime, an artifact against its baseline)
run in one loop, one call each per round, so noise on a shared machine (another
process, frequency changes) hits all of them alike instead of whichever ran during it.
The order alternates each round (A B, B A, ...): the engine that runs right after
another can find its caches evicted or its cores busy with the other's spinning threads.

The clock is a parameter: tests drive the logic with a fake one and never assert speed.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aot.errors import ArgumentError

Clock = Callable[[], float]  # seconds, monotonic


@dataclass(frozen=True)
class Stats:
    """Latency of one engine over its timed runs, in milliseconds."""
    runs: int
    median_ms: float
    p90_ms: float
    min_ms: float
    max_ms: float

    def to_json(self) -> dict[str, float | int]:
        return {"runs": self.runs, "median_ms": self.median_ms, "p90_ms": self.p90_ms,
                "min_ms": self.min_ms, "max_ms": self.max_ms}


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated linearly between the closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def stats(seconds: Sequence[float]) -> Stats:
    ms = [s * 1000 for s in seconds]
    return Stats(runs=len(ms), median_ms=percentile(ms, 50), p90_ms=percentile(ms, 90), min_ms=min(ms), max_ms=max(ms))


def check_counts(runs: int, warmup: int) -> None:
    if runs < 1:
        raise ArgumentError(f"--runs {runs}: at least 1 timed run is needed")
    if warmup < 0:
        raise ArgumentError(f"--warmup {warmup}: cannot be negative")


def interleaved(engines: Sequence[Callable[[], object]], runs: int, warmup: int,
                clock: Clock = time.perf_counter) -> list[list[float]]:
    """Seconds of each timed call, per engine: `warmup` untimed rounds, then `runs` timed ones,
    each engine called once a round, in alternating order."""
    check_counts(runs, warmup)
    for _ in range(warmup):
        for engine in engines:
            engine()
    times: list[list[float]] = [[] for _ in engines]
    order = list(range(len(engines)))
    for round_index in range(runs):
        for index in (order if round_index % 2 == 0 else order[::-1]):
            start = clock()
            engines[index]()
            times[index].append(clock() - start)
    return times
