"""aot.integrations.rows: requests of any row count stacked, cut into runs of the compiled batch,
padded, and sliced back; a model that is not batch-major has no row batch."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from aot.errors import RunError
from aot.integrations.rows import RowRunner, batch_rows


@dataclass
class T:
    name: str
    shape: list[int]
    dtype: np.dtype


def test_batch_rows_needs_one_leading_dim_on_every_input_and_output():
    assert batch_rows([[4, 3]], [[4, 2], [4]]) == 4
    assert batch_rows([[1, 1, 28, 28]], [[1, 10]]) == 1
    assert batch_rows([[4, 3]], [[2, 4]]) is None          # an output not batch-major
    assert batch_rows([[4, 3], [3, 4]], [[4]]) is None      # inputs disagree
    assert batch_rows([[4, 3]], [[]]) is None               # a scalar output
    assert batch_rows([], [[4]]) is None                    # nothing to stack
    assert batch_rows([[0, 3]], [[0]]) is None              # empty batch


class Model:
    """Row-wise model of batch B: y = 2x + row sum, and the row's first column as int; counts runs and
    records the padding it was given."""

    def __init__(self, batch: int):
        self.batch = batch
        self.inputs = [T("x", [batch, 3], np.dtype(np.float32))]
        self.outputs = [T("y", [batch, 3], np.dtype(np.float32)), T("k", [batch], np.dtype(np.int64))]
        self.feeds: list[np.ndarray] = []

    def __call__(self, feeds):
        x = feeds["x"]
        assert x.shape == (self.batch, 3) and x.flags.c_contiguous
        self.feeds.append(x)
        return [2 * x + x.sum(axis=1, keepdims=True), x[:, 0].astype(np.int64)]


def _want(x):
    return 2 * x + x.sum(axis=1, keepdims=True)


def test_requests_are_stacked_cut_padded_and_sliced_back():
    model = Model(batch=4)
    runner = RowRunner(model.inputs, model.outputs, 4)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (3, 1, 6)]
    results, runs = runner.run(model, [{"x": x} for x in xs])
    assert runs == 3                                         # 10 rows, 4 a run
    for x, got in zip(xs, results):
        np.testing.assert_allclose(got["y"], _want(x), rtol=1e-6)
        np.testing.assert_array_equal(got["k"], x[:, 0].astype(np.int64))
    np.testing.assert_array_equal(model.feeds[-1][2:], 0)   # the last run's two padding rows


def test_one_request_larger_than_the_batch_runs_in_several_runs():
    model = Model(batch=2)
    runner = RowRunner(model.inputs, model.outputs, 2)
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    (got,), runs = runner.run(model, [{"x": x}])
    assert runs == 3 and got["y"].shape == (5, 3)
    np.testing.assert_allclose(got["y"], _want(x))


@pytest.mark.parametrize("feeds, message", [
    ({"x": np.zeros((2, 4), np.float32)}, r"expected shape \(n, 3\)"),
    ({"x": np.zeros((0, 3), np.float32)}, r"n >= 1 rows"),
    ({"x": np.zeros((2, 3), np.float64)}, "expected dtype float32, got float64"),
    ({}, "missing input 'x'"),
    ({"x": np.zeros((1, 3), np.float32), "z": 1}, "unknown input 'z'"),
    ([1, 2], "must be a dict"),
])
def test_a_malformed_request_is_a_run_error_naming_the_input(feeds, message):
    model = Model(batch=2)
    with pytest.raises(RunError, match=message):
        RowRunner(model.inputs, model.outputs, 2).rows(feeds)


def test_inputs_of_one_request_must_agree_on_rows():
    inputs = [T("a", [2, 3], np.dtype(np.float32)), T("b", [2], np.dtype(np.int32))]
    runner = RowRunner(inputs, [T("y", [2], np.dtype(np.float32))], 2)
    assert runner.rows({"a": np.zeros((3, 3), np.float32), "b": np.zeros(3, np.int32)}) == 3
    with pytest.raises(RunError, match=r"input 'b': expected shape \(3\)"):
        runner.rows({"a": np.zeros((3, 3), np.float32), "b": np.zeros(2, np.int32)})


def test_a_runner_refuses_a_model_that_is_not_batch_major():
    with pytest.raises(RunError, match="not batch-major"):
        RowRunner([T("x", [4, 3], np.dtype(np.float32))], [T("y", [3, 4], np.dtype(np.float32))], 4)
