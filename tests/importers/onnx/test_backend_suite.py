"""A fixed, seeded sample of the ONNX backend suite through aot (benchmarks/onnx_suite.py runs it all).

Every sampled case must pass unless benchmarks/expected_failures.py lists it
with a reason; a listed case may be rejected or wrong, never crash. Every
listed case runs too, and must still fail: a fix that makes one pass fails
here until its line goes, so the table cannot go stale. The light models and
the pytorch-operator cases run whole.
"""
from __future__ import annotations

import random

import pytest

pytest.importorskip("onnxruntime")

import expected_failures  # noqa: E402
import onnx_suite  # noqa: E402

SAMPLE_SIZE = 150
SEED = 3


@pytest.fixture(scope="module")
def cases() -> list[onnx_suite.Case]:
    return onnx_suite.load_cases()


@pytest.fixture(scope="module")
def node_results(cases) -> list[onnx_suite.Result]:
    node = [c for c in cases if c.suite == "node"]
    return onnx_suite.run_all(random.Random(SEED).sample(node, SAMPLE_SIZE), jobs=2, with_ort=False, timeout_s=120)


@pytest.mark.slow
def test_node_sample_agrees_with_expected_failures(node_results) -> None:
    problems = onnx_suite.unexpected(node_results)
    assert not problems, "\n".join(problems)


def test_every_listed_expected_failure_still_fails(cases) -> None:
    """A listed case that passes, crashes or names no case at all is a stale line in the table."""
    stale = [f"{key}: names no case of any suite" for key in expected_failures.unmatched(c.name for c in cases)]
    listed = [c for c in cases if expected_failures.expected_reason(c.name)]
    results = onnx_suite.run_all(listed, jobs=2, with_ort=False, timeout_s=120)
    problems = stale + onnx_suite.unexpected(results)
    assert not problems, "benchmarks/expected_failures.py is stale:\n" + "\n".join(problems)


@pytest.mark.slow
def test_node_sample_mostly_passes(node_results) -> None:
    passed = sum(r.status == "passed" for r in node_results)
    # a regression floor: the whole suite passes 1,274 of 1,884 (68%) today
    assert passed >= 0.6 * len(node_results), f"only {passed} of {len(node_results)} sampled node cases pass"


@pytest.mark.parametrize("suite", [pytest.param("light", marks=pytest.mark.slow), "pytorch-operator"])
def test_suite_passes_whole(suite: str, cases) -> None:
    results = onnx_suite.run_all([c for c in cases if c.suite == suite], jobs=2, with_ort=False, timeout_s=300)
    problems = onnx_suite.unexpected(results)
    assert not problems, "\n".join(problems)


def test_runner_reports_a_crash_as_a_crash() -> None:
    """A worker that dies mid-case (a segfault in generated code) is recorded, never hidden."""
    case = onnx_suite.load_cases(["node"], ["test_abs"])[0]
    case.name = "test_abs_crashing"

    class Crash:  # a case whose data kills the worker process on access
        def __bool__(self) -> bool:
            return True

        def __getitem__(self, index):
            import os

            os._exit(11)

    case.data_sets = Crash()  # type: ignore[assignment]
    (result,) = onnx_suite.run_all([case], jobs=1, with_ort=False, timeout_s=60)
    assert result.status == "crashed" and "worker died" in result.reason


def test_compare_outputs_uses_case_tolerance() -> None:
    import numpy as np

    ref = np.array([1.0, 2.0], np.float32)
    assert onnx_suite.compare_outputs([ref * (1 + 1e-4)], [ref], rtol=1e-3, atol=0) == ""
    assert "Mismatched" in onnx_suite.compare_outputs([ref * 1.01], [ref], rtol=1e-3, atol=0)
    assert "dtype" in onnx_suite.compare_outputs([ref.astype(np.float64)], [ref], rtol=1e-3, atol=0)
