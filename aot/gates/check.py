"""`aot check`: size, latency and memory budgets of an artifact, for CI.

Measures only what the budgets given need: the file size always (after reading and
checking the whole artifact, so a damaged one never passes), warm latency for a
latency budget or a baseline, the fresh-process run (aot/gates/cold.py) for a memory
budget. A latency budget holds the median; a memory budget the peak resident set of
the fresh process that opened the artifact and ran it once. With a baseline, both
artifacts are timed in one loop, interleaved call by call, and a regression is the
change of the median (and of the file size) in percent of the baseline's.

`evaluate` turns budgets and measurements into rows with a verdict each; it takes no
measurement itself, so its logic is tested with made-up numbers.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.gates.artifact_file import read_checked
from aot.errors import ArgumentError
from aot.gates.bench import ColdMeasure, RunConfig, open_engine
from aot.gates.cold import ColdStart, measure_cold
from aot.gates.measure import Clock, Stats, check_counts, interleaved, stats
from aot.gates.units import format_ms, format_percent, format_size


@dataclass(frozen=True)
class Budgets:
    max_size_bytes: int | None = None
    max_latency_ms: float | None = None
    max_memory_bytes: int | None = None
    baseline: Path | None = None
    max_regression_pct: float | None = None

    def validate(self) -> None:
        """A budget to check, and a baseline exactly when a regression limit (ArgumentError)."""
        if (self.baseline is None) != (self.max_regression_pct is None):
            given, missing = ("--baseline", "--max-regression") if self.max_regression_pct is None else (
                "--max-regression", "--baseline")
            raise ArgumentError(f"{given} needs {missing}: a regression is measured against a baseline artifact")
        if all(v is None for v in (self.max_size_bytes, self.max_latency_ms, self.max_memory_bytes, self.baseline)):
            raise ArgumentError("no budget given: add --max-size, --max-latency-ms, --max-memory or "
                                "--baseline with --max-regression")

    @property
    def needs_latency(self) -> bool:
        return self.max_latency_ms is not None or self.baseline is not None

    @property
    def needs_cold(self) -> bool:
        return self.max_memory_bytes is not None


@dataclass(frozen=True)
class Measurements:
    size_bytes: int
    latency: Stats | None = None
    cold: ColdStart | None = None
    baseline_size_bytes: int | None = None
    baseline_latency: Stats | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "latency": self.latency.to_json() if self.latency else None,
            "cold": self.cold.to_json() if self.cold else None,
            "baseline_size_bytes": self.baseline_size_bytes,
            "baseline_latency": self.baseline_latency.to_json() if self.baseline_latency else None,
        }


@dataclass(frozen=True)
class Row:
    """One budget's verdict. `limit` and `measured` in `unit` (bytes, ms or percent)."""
    budget: str
    unit: str
    limit: float
    measured: float
    ok: bool
    limit_text: str
    measured_text: str
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        # strict JSON has no Infinity: growth from a zero baseline is reported as null
        measured = self.measured if math.isfinite(self.measured) else None
        return {"budget": self.budget, "unit": self.unit, "limit": self.limit, "measured": measured,
                "ok": self.ok, "detail": self.detail}


def _change_pct(before: float, after: float) -> float:
    if before == 0:
        return 0.0 if after == 0 else float("inf")
    return (after - before) / before * 100


def evaluate(budgets: Budgets, m: Measurements) -> list[Row]:
    """A row per budget, in a fixed order: size, latency, memory, then the regressions."""
    rows: list[Row] = []
    if budgets.max_size_bytes is not None:
        limit = budgets.max_size_bytes
        rows.append(Row("size", "bytes", limit, m.size_bytes, m.size_bytes <= limit, f"<= {format_size(limit)}",
                        format_size(m.size_bytes), f"{m.size_bytes} B"))
    if budgets.max_latency_ms is not None:
        assert m.latency is not None, "a latency budget needs a latency measurement"
        limit_ms, lat = budgets.max_latency_ms, m.latency
        rows.append(Row("latency (median)", "ms", limit_ms, lat.median_ms, lat.median_ms <= limit_ms,
                        f"<= {format_ms(limit_ms)}", format_ms(lat.median_ms),
                        f"p90 {format_ms(lat.p90_ms)}, {lat.runs} runs"))
    if budgets.max_memory_bytes is not None:
        assert m.cold is not None, "a memory budget needs the fresh-process run"
        limit, peak = budgets.max_memory_bytes, m.cold.peak_rss_bytes
        rows.append(Row("peak memory", "bytes", limit, peak, peak <= limit, f"<= {format_size(limit)}",
                        format_size(peak), f"resident; before the open {format_size(m.cold.baseline_rss_bytes)}"))
    if budgets.max_regression_pct is not None:
        assert m.latency is not None and m.baseline_latency is not None and m.baseline_size_bytes is not None
        limit_pct = budgets.max_regression_pct
        for name, unit, before, after, show in (
                ("latency vs baseline", "percent", m.baseline_latency.median_ms, m.latency.median_ms, format_ms),
                ("size vs baseline", "percent", m.baseline_size_bytes, m.size_bytes, format_size)):
            change = _change_pct(before, after)
            rows.append(Row(name, unit, limit_pct, change, change <= limit_pct, f"<= {format_percent(limit_pct)}",
                            format_percent(change), f"{show(before)} -> {show(after)}"))  # type: ignore[operator]
    return rows


def passed(rows: list[Row]) -> bool:
    return all(row.ok for row in rows)


def format_report(artifact: str, rows: list[Row]) -> str:
    header = ("budget", "limit", "measured", "verdict", "")
    table = [header] + [(r.budget, r.limit_text, r.measured_text, "ok" if r.ok else "BROKEN", r.detail) for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    lines = [f"aot check {artifact}"]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths)]
        lines.append("  ".join(cells + [line[-1]]).rstrip())
    broken = sum(not r.ok for r in rows)
    lines.append(f"{broken} of {len(rows)} budgets broken" if broken else f"all {len(rows)} budgets met")
    return "\n".join(lines)


def report_json(artifact: str, budgets: Budgets, m: Measurements, rows: list[Row]) -> dict[str, Any]:
    return {"artifact": artifact, "ok": passed(rows), "budgets": [r.to_json() for r in rows],
            "baseline": str(budgets.baseline) if budgets.baseline else None, "measurements": m.to_json()}


def measure(path: Path, budgets: Budgets, config: RunConfig, *, clock: Clock = time.perf_counter,
            cold: ColdMeasure = measure_cold) -> Measurements:
    """What `budgets` need of `path` (and of the baseline), nothing more."""
    budgets.validate()
    check_counts(config.runs, config.warmup)
    baseline_size = None
    if budgets.baseline is not None:
        read_checked(budgets.baseline)
        baseline_size = budgets.baseline.stat().st_size
    latency = baseline_latency = cold_start = None
    if not (budgets.needs_latency or budgets.needs_cold):
        read_checked(path)  # the whole file checked: a damaged artifact is an error, whatever the budgets
    else:
        engine = open_engine(path, config.threads, config.seed, config.shapes)  # reads and checks it too
        if budgets.needs_latency:
            calls = [engine.call]
            if budgets.baseline is not None:
                # the baseline draws its own inputs from the same seed: a changed model may take other shapes
                calls.append(open_engine(budgets.baseline, config.threads, config.seed, config.shapes).call)
            times = interleaved(calls, config.runs, config.warmup, clock)
            latency = stats(times[0])
            baseline_latency = stats(times[1]) if len(times) > 1 else None
        if budgets.needs_cold:
            cold_start = cold(path, engine.feeds, config.threads)
    return Measurements(size_bytes=path.stat().st_size, latency=latency, cold=cold_start,
                        baseline_size_bytes=baseline_size, baseline_latency=baseline_latency)
