"""aot/gates/measure.py: interleaved timing and its statistics, driven by a fake clock."""
import pytest

from aot.errors import ArgumentError
from aot.gates.measure import interleaved, percentile, stats


class FakeClock:
    """Each engine call advances time by that engine's duration; reading the clock costs nothing."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def engine(self, name: str, durations: list[float], log: list[str]):
        queue = list(durations)

        def call() -> None:
            log.append(name)
            self.now += queue.pop(0) if queue else 0.0
        return call


def test_engines_alternate_run_by_run_in_swapping_order():
    clock, log = FakeClock(), []
    a = clock.engine("a", [0.0, 0.001, 0.002, 0.003], log)
    b = clock.engine("b", [0.0, 0.010, 0.020, 0.030], log)
    times = interleaved([a, b], runs=3, warmup=1, clock=clock)
    assert log == ["a", "b", "a", "b", "b", "a", "a", "b"]  # warm-up, then A B, B A, A B
    assert times[0] == pytest.approx([0.001, 0.002, 0.003])
    assert times[1] == pytest.approx([0.010, 0.020, 0.030])


def test_no_warmup_times_every_call():
    clock, log = FakeClock(), []
    times = interleaved([clock.engine("a", [0.5, 0.25], log)], runs=2, warmup=0, clock=clock)
    assert times == [[0.5, 0.25]] and log == ["a", "a"]


@pytest.mark.parametrize("runs, warmup, says", [(0, 1, "--runs 0"), (3, -1, "--warmup -1")])
def test_refuses_bad_counts(runs, warmup, says):
    with pytest.raises(ArgumentError, match=says):
        interleaved([lambda: None], runs=runs, warmup=warmup)


def test_percentiles_interpolate_between_ranks():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 90) == pytest.approx(4.6)
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 5.0
    assert percentile([7.0], 90) == 7.0


def test_stats_are_in_milliseconds():
    s = stats([0.001, 0.002, 0.003, 0.004])
    assert s.runs == 4
    assert s.median_ms == pytest.approx(2.5)
    assert s.p90_ms == pytest.approx(3.7)
    assert (s.min_ms, s.max_ms) == pytest.approx((1.0, 4.0))
    assert set(s.to_json()) == {"runs", "median_ms", "p90_ms", "min_ms", "max_ms"}
