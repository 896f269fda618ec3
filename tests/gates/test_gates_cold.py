"""aot/gates/cold.py: open and first run in a fresh process. Real runs check only that it runs
and reports sane fields: never how fast."""
import numpy as np
import pytest

from aot.errors import RunError
from aot.gates.cold import ColdStart, measure_cold, read_feeds, write_feeds
from gates_util import compile_samples


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    return compile_samples(tmp_path_factory, {"lenet": {}})["lenet"]


def test_reports_open_first_run_and_peak_memory(lenet):
    feeds = {"x": np.zeros((1, 1, 28, 28), np.float32)}
    cold = measure_cold(lenet, feeds, threads=1)
    assert cold.open_ms > 0 and cold.first_run_ms > 0
    assert cold.cold_start_ms == pytest.approx(cold.open_ms + cold.first_run_ms)
    assert 0 < cold.baseline_rss_bytes <= cold.peak_rss_bytes
    assert set(cold.to_json()) == {"cold_start_ms", "open_ms", "first_run_ms", "peak_rss_bytes", "baseline_rss_bytes"}


def test_a_failing_child_is_a_run_error_with_its_reason(lenet):
    wrong = {"x": np.zeros((1, 1, 7, 7), np.float32)}  # not the compiled shape: the runtime refuses it
    with pytest.raises(RunError, match="cold-start run: .*x"):
        measure_cold(lenet, wrong, threads=1)


def test_input_names_survive_the_trip_whatever_they_hold(tmp_path):
    feeds = {"file": np.ones(2, np.float32), "a/b": np.zeros(3, np.int64), "": np.full(1, 7, np.int8)}
    write_feeds(tmp_path / "feeds.npz", feeds)
    back = read_feeds(tmp_path / "feeds.npz")
    assert list(back) == list(feeds)
    assert all(np.array_equal(back[name], value) and back[name].dtype == value.dtype for name, value in feeds.items())


def test_cold_start_is_the_open_and_the_first_run():
    cold = ColdStart(open_ms=2.0, first_run_ms=0.5, peak_rss_bytes=40 << 20, baseline_rss_bytes=35 << 20)
    assert cold.cold_start_ms == 2.5
