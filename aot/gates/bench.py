"""`aot bench`: latency (median, p90), cold start, peak memory and size of one artifact,
optionally beside onnxruntime on the source model.

Warm latency is timed in this process over `runs` calls after `warmup` untimed ones;
cold start and peak memory come from a fresh process (aot/gates/cold.py). With
`compare_onnx`, onnxruntime runs the same inputs with the same thread count
(intra_op_num_threads) interleaved with aot call by call (aot/gates/measure.py), and the
report gives aot's median over onnxruntime's: below 1, aot is faster. Both runtimes'
workers spin for a while after a run, as they do in a server; with several threads one's
spinning can slow the other, and interleaving spreads that over both alike.
"""
from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aot.gates.artifact_file import read_checked
from aot.errors import AotError, ArgumentError, ModelError, RunError
from aot.gates.cold import ColdStart, measure_cold
from aot.gates.inputs import input_specs, random_feeds
from aot.gates.measure import Clock, Stats, check_counts, interleaved, stats
from aot.gates.units import format_ms, format_size

ColdMeasure = Callable[[Path, dict[str, np.ndarray], int], ColdStart]


@dataclass(frozen=True)
class RunConfig:
    """How an artifact is timed: `aot check` measures with these, `aot bench` too."""
    threads: int = 1
    runs: int = 50
    warmup: int = 5
    seed: int = 0
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class BenchConfig(RunConfig):
    compare_onnx: Path | None = None


@dataclass
class Engine:
    """An artifact opened for timing: `call` runs it once on `feeds`."""
    path: Path
    session: Any
    feeds: dict[str, np.ndarray]

    def call(self) -> None:
        self.session.run(None, self.feeds)


def open_engine(path: Path, threads: int, seed: int, shapes: Mapping[str, tuple[int, ...]]) -> Engine:
    """Read and check the artifact (an ArtifactError names what is damaged), draw its inputs,
    open it in the C runtime and run it once: a failure surfaces here, before any timing."""
    from aot.runtime.session import Session

    if threads < 1:
        raise ArgumentError(f"--threads {threads}: at least 1 thread is needed")
    manifest = read_checked(path).manifest
    feeds = random_feeds(input_specs(manifest["inputs"], shapes), seed)
    engine = Engine(path, Session(path, threads=threads), feeds)
    engine.call()
    return engine


def onnx_engine(model: Path, threads: int, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
    """onnxruntime on `model` with the artifact's inputs, `threads` intra-op threads, run once."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise AotError("--compare-onnx needs onnxruntime: pip install onnxruntime") from None
    if not model.is_file():
        raise ArgumentError(f"--compare-onnx: '{model}' does not exist or is not a file")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types, several of them
        raise ModelError(f"--compare-onnx: onnxruntime cannot load '{model}': {err}") from None
    names = [i.name for i in session.get_inputs()]
    missing = [name for name in names if name not in feeds]
    if missing:
        raise ArgumentError(f"--compare-onnx: '{model}' takes inputs the artifact does not: {', '.join(missing)}")
    ort_feeds = {name: feeds[name] for name in names}

    def call() -> object:
        return session.run(None, ort_feeds)

    try:
        call()
    except Exception as err:
        raise RunError(f"--compare-onnx: onnxruntime cannot run '{model}' on the artifact's inputs: {err}") from None
    return call


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what Python knows: ratios differ between CPUs."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class BenchReport:
    artifact: str
    size_bytes: int
    threads: int
    cpu_variant: str
    latency: Stats
    cold: ColdStart | None
    onnx_model: str | None = None
    onnx: Stats | None = None
    cpu: str = ""

    @property
    def ratio(self) -> float | None:
        """aot's median over onnxruntime's: below 1, aot is faster."""
        if self.onnx is None or self.onnx.median_ms <= 0:
            return None
        return self.latency.median_ms / self.onnx.median_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "artifact": self.artifact, "size_bytes": self.size_bytes, "threads": self.threads,
            "cpu_variant": self.cpu_variant, "cpu": self.cpu,
            "latency": self.latency.to_json(),
            "cold": self.cold.to_json() if self.cold else None,
            "onnxruntime": ({"model": self.onnx_model, "latency": self.onnx.to_json(), "ratio": self.ratio}
                            if self.onnx else None),
        }


def bench(path: Path, config: BenchConfig, *, clock: Clock = time.perf_counter,
          cold: ColdMeasure | None = measure_cold) -> BenchReport:
    """Measure `path` as `config` says; `cold` None leaves out the fresh-process run."""
    check_counts(config.runs, config.warmup)
    engine = open_engine(path, config.threads, config.seed, config.shapes)
    calls: list[Callable[[], object]] = [engine.call]
    if config.compare_onnx is not None:
        calls.append(onnx_engine(config.compare_onnx, config.threads, engine.feeds))
    times = interleaved(calls, config.runs, config.warmup, clock)
    cold_start = cold(path, engine.feeds, config.threads) if cold is not None else None
    return BenchReport(
        artifact=str(path), size_bytes=path.stat().st_size, threads=config.threads,
        cpu_variant=engine.session.cpu_variant, latency=stats(times[0]), cold=cold_start,
        onnx_model=str(config.compare_onnx) if config.compare_onnx is not None else None,
        onnx=stats(times[1]) if len(times) > 1 else None, cpu=cpu_name(),
    )


def format_bench(report: BenchReport) -> str:
    lat = report.latency
    variant = f", cpu code {report.cpu_variant}" if report.cpu_variant else ""
    lines = [
        f"{report.artifact}: {format_size(report.size_bytes)} ({report.size_bytes} B), "
        f"{report.threads} thread(s){variant}" + (f" on {report.cpu}" if report.cpu else ""),
        f"latency      median {format_ms(lat.median_ms)}  p90 {format_ms(lat.p90_ms)}  "
        f"min {format_ms(lat.min_ms)}  ({lat.runs} runs)",
    ]
    if report.cold is not None:
        c = report.cold
        lines.append(f"cold start   {format_ms(c.cold_start_ms)} (open {format_ms(c.open_ms)} + first run "
                     f"{format_ms(c.first_run_ms)}, fresh process)")
        lines.append(f"peak memory  {format_size(c.peak_rss_bytes)} resident (the process before the open: "
                     f"{format_size(c.baseline_rss_bytes)})")
    if report.onnx is not None and report.ratio is not None:
        ort = report.onnx
        lines.append(f"onnxruntime  median {format_ms(ort.median_ms)}  p90 {format_ms(ort.p90_ms)}  "
                     f"min {format_ms(ort.min_ms)}  ({report.onnx_model}, interleaved)")
        faster = "aot faster" if report.ratio < 1 else "onnxruntime faster" if report.ratio > 1 else "even"
        lines.append(f"aot/onnxruntime  {report.ratio:.2f}x  ({faster})")
    return "\n".join(lines)
