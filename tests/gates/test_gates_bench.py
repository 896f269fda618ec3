"""aot bench (aot/gates/bench.py): the logic with a fake clock and a fake cold start, and real
small runs that check only that it runs and reports sane fields."""
import json
import itertools

import pytest
from click.testing import CliRunner

from aot.cli import main
from aot.errors import ArgumentError
from aot.gates.bench import BenchConfig, BenchReport, bench, format_bench
from aot.gates.cold import ColdStart
from aot.gates.measure import Stats
from gates_util import compile_samples, damaged_copies

COLD = ColdStart(open_ms=3.0, first_run_ms=0.5, peak_rss_bytes=40_000_000, baseline_rss_bytes=35_000_000)


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return compile_samples(tmp_path_factory, {"lenet": {}})


def stepping_clock(step_s: float):
    """Every reading is `step_s` after the one before: every timed call takes exactly one step."""
    ticks = itertools.count()
    return lambda: next(ticks) * step_s


def fake_cold(calls: list):
    def measure(path, feeds, threads):
        calls.append((path, sorted(feeds), threads))
        return COLD
    return measure


def test_measures_with_the_given_clock_and_cold_start(samples):
    calls = []
    report = bench(samples["lenet"], BenchConfig(runs=4, warmup=1), clock=stepping_clock(0.002), cold=fake_cold(calls))
    assert report.latency.runs == 4
    assert report.latency.median_ms == pytest.approx(2.0) and report.latency.p90_ms == pytest.approx(2.0)
    assert report.cold == COLD and calls == [(samples["lenet"], ["x"], 1)]
    assert report.size_bytes == samples["lenet"].stat().st_size
    assert report.onnx is None and report.ratio is None


def test_onnxruntime_runs_interleaved_on_the_same_inputs(samples):
    pytest.importorskip("onnxruntime")
    report = bench(samples["lenet"], BenchConfig(runs=3, warmup=0, compare_onnx=samples["lenet.onnx"]),
                   clock=stepping_clock(0.001), cold=None)
    assert report.onnx is not None and report.onnx.runs == 3
    assert report.ratio == pytest.approx(1.0)  # one step each: the fake clock cannot tell them apart


def test_the_ratio_is_aot_over_onnxruntime():
    def stats(median):
        return Stats(runs=5, median_ms=median, p90_ms=median * 1.2, min_ms=median * 0.9, max_ms=median * 1.5)

    report = BenchReport(artifact="m.aot", size_bytes=1_500_000, threads=2, cpu_variant="x86-64-v3",
                         latency=stats(1.0), cold=COLD, onnx_model="m.onnx", onnx=stats(4.0))
    assert report.ratio == 0.25
    text = format_bench(report)
    assert "m.aot: 1.50 MB (1500000 B), 2 thread(s), cpu code x86-64-v3" in text
    assert "latency      median 1.000 ms  p90 1.200 ms" in text
    assert "cold start   3.500 ms (open 3.000 ms + first run 0.500 ms, fresh process)" in text
    assert "peak memory  40.00 MB" in text
    assert "aot/onnxruntime  0.25x  (aot faster)" in text
    data = report.to_json()
    assert data["onnxruntime"]["ratio"] == 0.25 and data["cold"]["cold_start_ms"] == 3.5


def test_refuses_a_shape_the_artifact_was_not_compiled_for(samples):
    with pytest.raises(ArgumentError, match="compiled for x=1x1x28x28"):
        bench(samples["lenet"], BenchConfig(runs=1, shapes={"x": (2, 1, 28, 28)}), cold=None)


def test_cli_json_has_sane_fields(samples):
    result = CliRunner().invoke(main, ["bench", str(samples["lenet"]), "--runs", "3", "--warmup", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["latency"]["runs"] == 3 and 0 < data["latency"]["median_ms"] <= data["latency"]["max_ms"]
    assert data["cold"]["cold_start_ms"] > 0 and data["cold"]["peak_rss_bytes"] > 0
    assert data["size_bytes"] == samples["lenet"].stat().st_size and data["onnxruntime"] is None
    assert isinstance(data["cpu"], str) and data["cpu"]  # ratios differ between CPUs: say which


def test_cli_text_with_onnxruntime(samples):
    pytest.importorskip("onnxruntime")
    result = CliRunner().invoke(main, ["bench", str(samples["lenet"]), "--runs", "3", "--threads", "2",
                                       "--compare-onnx", str(samples["lenet.onnx"])])
    assert result.exit_code == 0, result.output
    assert "2 thread(s)" in result.stdout and "onnxruntime  median" in result.stdout
    assert "aot/onnxruntime" in result.stdout


def test_cli_damaged_artifact_exits_2_naming_it(samples, tmp_path):
    damaged = damaged_copies(samples["lenet"], tmp_path)["flipped"]
    result = CliRunner().invoke(main, ["bench", str(damaged), "--runs", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {damaged}: section ") and "checksum" in result.stderr
    assert "Traceback" not in result.output
