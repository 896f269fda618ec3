"""aot check (aot/gates/check.py): verdicts from made-up measurements, the report, exit statuses,
and real small runs on the lenet sample (which check only that it runs, never how fast)."""
import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aot.cli import main
from aot.errors import ArgumentError
from aot.gates.check import Budgets, Measurements, RunConfig, evaluate, format_report, measure, passed, report_json
from aot.gates.cold import ColdStart
from aot.gates.measure import Stats
from gates_util import compile_samples, damaged_copies


def lat(median_ms: float) -> Stats:
    return Stats(runs=20, median_ms=median_ms, p90_ms=median_ms * 1.1, min_ms=median_ms * 0.9, max_ms=median_ms * 2)


COLD = ColdStart(open_ms=2.0, first_run_ms=0.5, peak_rss_bytes=90_000_000, baseline_rss_bytes=35_000_000)
MEASURED = Measurements(size_bytes=4_000_000, latency=lat(10.0), cold=COLD, baseline_size_bytes=3_900_000,
                        baseline_latency=lat(9.8))


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return compile_samples(tmp_path_factory, {"lenet": {}, "mlp": {}})


def invoke(*args: str):
    return CliRunner().invoke(main, ["check", *args])


# ---- verdicts, from made-up measurements

def test_every_budget_met():
    budgets = Budgets(max_size_bytes=5_000_000, max_latency_ms=12.0, max_memory_bytes=100_000_000,
                      baseline=None, max_regression_pct=None)
    rows = evaluate(budgets, MEASURED)
    assert [r.budget for r in rows] == ["size", "latency (median)", "peak memory"]
    assert passed(rows)


@pytest.mark.parametrize("budgets, broken", [
    (Budgets(max_size_bytes=3_999_999), "size"),
    (Budgets(max_latency_ms=9.99), "latency (median)"),
    (Budgets(max_memory_bytes=89_999_999), "peak memory"),
])
def test_a_budget_just_under_the_measurement_is_broken(budgets, broken):
    rows = evaluate(budgets, MEASURED)
    assert [r.budget for r in rows if not r.ok] == [broken] and not passed(rows)


def test_a_budget_equal_to_the_measurement_is_met():
    rows = evaluate(Budgets(max_size_bytes=4_000_000, max_latency_ms=10.0, max_memory_bytes=90_000_000), MEASURED)
    assert passed(rows)


def test_regressions_compare_median_and_size_with_the_baseline():
    rows = evaluate(Budgets(baseline=Path("old.aot"), max_regression_pct=2.0), MEASURED)
    latency, size = rows
    assert latency.budget == "latency vs baseline" and latency.measured == pytest.approx(100 * 0.2 / 9.8)
    assert not latency.ok  # +2.04% over a 2% limit
    assert size.budget == "size vs baseline" and size.measured == pytest.approx(100 * 100_000 / 3_900_000)
    assert not size.ok
    faster = Measurements(size_bytes=3_000_000, latency=lat(5.0), baseline_size_bytes=3_900_000,
                          baseline_latency=lat(9.8))
    assert passed(evaluate(Budgets(baseline=Path("old.aot"), max_regression_pct=0.0), faster))


def test_the_report_is_a_table_with_a_verdict_per_budget():
    rows = evaluate(Budgets(max_size_bytes=3_000_000, max_latency_ms=12.0), MEASURED)
    text = format_report("m.aot", rows)
    lines = text.splitlines()
    assert lines[0] == "aot check m.aot"
    assert lines[1].split() == ["budget", "limit", "measured", "verdict"]
    assert lines[2].split()[:7] == ["size", "<=", "3.00", "MB", "4.00", "MB", "BROKEN"]
    assert lines[3].split()[:8] == ["latency", "(median)", "<=", "12.000", "ms", "10.000", "ms", "ok"]
    assert lines[-1] == "1 of 2 budgets broken"
    # the columns line up: each verdict starts at the header's
    column = lines[1].index("verdict")
    assert lines[2][column:].startswith("BROKEN") and lines[3][column:].startswith("ok")
    assert format_report("m.aot", evaluate(Budgets(max_latency_ms=12.0), MEASURED)).endswith("all 1 budgets met")


def test_json_holds_the_same_fields():
    budgets = Budgets(max_size_bytes=3_000_000, max_memory_bytes=100_000_000)
    rows = evaluate(budgets, MEASURED)
    data = json.loads(json.dumps(report_json("m.aot", budgets, MEASURED, rows)))
    assert data["ok"] is False and data["artifact"] == "m.aot"
    assert data["budgets"][0] == {"budget": "size", "unit": "bytes", "limit": 3_000_000, "measured": 4_000_000,
                                  "ok": False, "detail": "4000000 B"}
    assert data["budgets"][1]["budget"] == "peak memory" and data["budgets"][1]["ok"] is True
    assert data["measurements"]["cold"]["peak_rss_bytes"] == 90_000_000


def test_growth_from_a_zero_baseline_is_broken_and_strict_json():
    m = Measurements(size_bytes=10, latency=lat(1.0), baseline_size_bytes=10, baseline_latency=lat(0.0))
    rows = evaluate(Budgets(baseline=Path("old.aot"), max_regression_pct=5.0), m)
    assert not rows[0].ok and rows[0].measured_text == "+inf%"
    assert json.loads(json.dumps(rows[0].to_json(), allow_nan=False))["measured"] is None


@pytest.mark.parametrize("budgets, says", [
    (Budgets(), "no budget given"),
    (Budgets(max_regression_pct=5.0), "--max-regression needs --baseline"),
])
def test_refuses_budgets_that_cannot_be_checked(budgets, says):
    with pytest.raises(ArgumentError, match=says):
        budgets.validate()


# ---- what is measured, with a fake clock

def test_measures_only_what_the_budgets_need(samples):
    def no_cold(*args):
        raise AssertionError("a size budget needs no fresh process")

    m = measure(samples["lenet"], Budgets(max_size_bytes=1), RunConfig(), cold=no_cold)
    assert m.size_bytes == samples["lenet"].stat().st_size and m.latency is None and m.cold is None


def test_times_the_baseline_interleaved(samples):
    ticks = itertools.count()
    m = measure(samples["lenet"], Budgets(baseline=samples["mlp"], max_regression_pct=5.0),
                RunConfig(runs=4, warmup=0), clock=lambda: next(ticks) * 0.001)
    assert m.latency.runs == 4 and m.baseline_latency.runs == 4
    assert m.latency.median_ms == pytest.approx(1.0) and m.baseline_latency.median_ms == pytest.approx(1.0)
    assert m.baseline_size_bytes == samples["mlp"].stat().st_size


# ---- the command line, real small runs

def fake_measure(measurements: Measurements):
    def measure_fake(path, budgets, config):
        budgets.validate()
        return measurements
    return measure_fake


def test_cli_met_budgets_exit_0(samples, monkeypatch):
    monkeypatch.setattr("aot.gates.check.measure", fake_measure(MEASURED))
    result = invoke(str(samples["lenet"]), "--max-size", "5MB", "--max-latency-ms", "12", "--max-memory", "100MB")
    assert result.exit_code == 0, result.output
    assert "all 3 budgets met" in result.stdout and "BROKEN" not in result.stdout


def test_cli_broken_budget_exits_1_with_a_readable_report(samples, monkeypatch):
    monkeypatch.setattr("aot.gates.check.measure", fake_measure(MEASURED))
    result = invoke(str(samples["lenet"]), "--max-size", "5MB", "--max-latency-ms", "9.5ms")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[2].split()[:7] == ["size", "<=", "5.00", "MB", "4.00", "MB", "ok"]
    assert lines[3].split()[:8] == ["latency", "(median)", "<=", "9.500", "ms", "10.000", "ms", "BROKEN"]
    assert lines[-1] == "1 of 2 budgets broken" and result.stderr == ""


def test_cli_real_size_budget_broken_exits_1(samples):
    result = invoke(str(samples["lenet"]), "--max-size", "1KB")  # the size is exact: no timing involved
    assert result.exit_code == 1 and "<= 1.00 KB" in result.stdout and "BROKEN" in result.stdout


def test_cli_real_run_reports_sane_fields(samples):
    # a real measurement: only that it runs and reports sane numbers, never whether a time budget holds
    result = invoke(str(samples["lenet"]), "--max-size", "1KB", "--max-latency-ms", "12", "--max-memory", "100MB",
                    "--baseline", str(samples["mlp"]), "--max-regression", "5%", "--runs", "3", "--json")
    assert result.exit_code == 1  # the size budget is broken, whatever the timings
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert [b["budget"] for b in data["budgets"]] == ["size", "latency (median)", "peak memory",
                                                     "latency vs baseline", "size vs baseline"]
    assert data["budgets"][0]["ok"] is False
    m = data["measurements"]
    assert m["latency"]["runs"] == 3 and m["baseline_latency"]["runs"] == 3
    assert 0 < m["latency"]["median_ms"] <= m["latency"]["max_ms"]
    assert 0 < m["cold"]["baseline_rss_bytes"] <= m["cold"]["peak_rss_bytes"]
    assert m["baseline_size_bytes"] == samples["mlp"].stat().st_size


@pytest.mark.parametrize("args, says", [
    (["--max-size", "5XB"], "Invalid value for '--max-size': '5XB': unknown size unit 'XB'"),
    (["--max-latency-ms", "soon"], "Invalid value for '--max-latency-ms': 'soon' is not a duration"),
    (["--max-regression", "5ms"], "--max-regression': '5ms': a percentage takes no unit but '%'"),
    ([], "error: no budget given"),
    (["--max-size", "5MB", "--max-regression", "5%"], "error: --max-regression needs --baseline"),
])
def test_cli_usage_errors_exit_2(samples, args, says):
    result = invoke(str(samples["lenet"]), *args)
    assert result.exit_code == 2 and says in result.stderr and "Traceback" not in result.output


def test_cli_missing_file_exits_2(tmp_path):
    result = invoke(str(tmp_path / "nope.aot"), "--max-size", "5MB")
    assert result.exit_code == 2 and "nope.aot' does not exist" in result.stderr


@pytest.mark.parametrize("damage, says", [
    ("truncated", "truncated"), ("flipped", "checksum mismatch"), ("garbage", "truncated"),
])
def test_cli_damaged_artifact_exits_2_with_a_clear_message(samples, tmp_path, damage, says):
    path = damaged_copies(samples["lenet"], tmp_path)[damage]
    result = invoke(str(path), "--max-size", "5MB")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: ") and says in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_cli_damaged_baseline_exits_2_naming_it(samples, tmp_path):
    path = damaged_copies(samples["lenet"], tmp_path)["truncated"]
    result = invoke(str(samples["lenet"]), "--baseline", str(path), "--max-regression", "5%")
    assert result.exit_code == 2 and result.stderr.startswith(f"error: {path}: truncated")
