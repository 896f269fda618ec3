"""Requests of any number of rows on an artifact compiled for a fixed batch.

An artifact's shapes are fixed when it is compiled: lenet compiled with
``shapes={"x": (8, 1, 28, 28)}`` runs exactly 8 rows a run. A server gets requests
of 1 row, or 3, or 20. When every input and every output of the artifact has the
same leading dim B (batch-major), requests are stacked along dim 0, cut into runs
of B rows, the last run padded with zero rows, and each request's output rows are
sliced back out::

    requests (rows)   3 | 1 | 6            compiled B = 4
    stacked           [r0 r0 r0 r1 | r2 r2 r2 r2 | r2 r2 0 0]   3 runs, 2 padding rows

The assumption is that rows do not mix: a row's outputs depend on that row's inputs
alone, as in every inference graph whose batch dim is the leading dim throughout
(a model that reduces over its batch, such as batch statistics, would see the padding
rows; serve it with a batch of 1 row per request or compile it unbatched).

A model that is not batch-major (different leading dims, a scalar input or output, no
inputs) runs each request exactly as compiled: `batch_rows` is None for it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from aot.errors import RunError

Arrays = dict[str, np.ndarray]


class Tensor(Protocol):
    """What a row runner reads of an input or output (`aot.runtime.session.TensorInfo` is one)."""

    name: str
    shape: list[int]
    dtype: np.dtype


def batch_rows(inputs: Sequence[Sequence[int]], outputs: Sequence[Sequence[int]]) -> int | None:
    """The compiled batch B when every input and output shape has leading dim B >= 1; else None."""
    shapes = [*inputs, *outputs]
    if not inputs or any(len(s) == 0 for s in shapes):
        return None
    lead = {int(s[0]) for s in shapes}
    return lead.pop() if len(lead) == 1 and min(lead) >= 1 else None


class RowRunner:
    """Runs requests of n rows each (any n >= 1) through a model that takes `batch` rows a run.

    `run` is a function feeds -> outputs in `outputs` order (a bound `Session.run(None, ...)`).
    Stateless beyond its description of the model: one runner may serve any thread.
    """

    def __init__(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor], batch: int):
        if batch_rows([t.shape for t in inputs], [t.shape for t in outputs]) != batch:
            raise RunError(f"the model is not batch-major with a leading dim of {batch} on every input and output")
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.batch = batch

    def rows(self, feeds: Mapping[str, object]) -> int:
        """The rows of one request: every input present, of the model's dtype, shaped (n, *compiled[1:])
        with one n for all; a RunError naming the input otherwise. Checked before a request joins a
        batch, so a malformed request fails alone."""
        if not isinstance(feeds, Mapping):
            raise RunError(f"a request must be a dict of input name -> array, got {type(feeds).__name__}")
        known = [t.name for t in self.inputs]
        for name in feeds:
            if name not in known:
                raise RunError(f"unknown input {name!r} (model inputs: {', '.join(map(repr, known))})")
        n: int | None = None
        for t in self.inputs:
            if t.name not in feeds:
                raise RunError(f"missing input {t.name!r}")
            arr = np.asarray(feeds[t.name])
            if arr.dtype != t.dtype:
                raise RunError(f"input {t.name!r}: expected dtype {t.dtype}, got {arr.dtype}")
            want = (n if n is not None else "n", *t.shape[1:])
            if arr.ndim != len(t.shape) or list(arr.shape[1:]) != list(t.shape[1:]) or arr.shape[0] < 1 \
                    or (n is not None and arr.shape[0] != n):
                raise RunError(f"input {t.name!r}: expected shape ({', '.join(map(str, want))}) with n >= 1 rows "
                               f"(the model runs {self.batch} a run), got {tuple(arr.shape)}")
            n = int(arr.shape[0])
        assert n is not None  # batch-major models have inputs
        return n

    def run(self, run: Callable[[Arrays], list[np.ndarray]], requests: Sequence[Mapping[str, object]]
            ) -> tuple[list[Arrays], int]:
        """Each request's outputs (same rows as its inputs), and how many runs it took."""
        counts = [self.rows(r) for r in requests]
        total = sum(counts)
        stacked = {t.name: np.concatenate([np.asarray(r[t.name]) for r in requests]) for t in self.inputs}
        parts: list[list[np.ndarray]] = [[] for _ in self.outputs]
        runs = 0
        for start in range(0, total, self.batch):
            feeds = {name: self._padded(a[start:start + self.batch]) for name, a in stacked.items()}
            for part, out in zip(parts, run(feeds)):
                part.append(out)
            runs += 1
        merged = [np.concatenate(p)[:total] for p in parts]
        results: list[Arrays] = []
        start = 0
        for n in counts:
            # copies: a view would keep (and pickle) the whole merged batch behind each reply
            results.append({t.name: m[start:start + n].copy() for t, m in zip(self.outputs, merged)})
            start += n
        return results, runs

    def _padded(self, rows: np.ndarray) -> np.ndarray:
        if rows.shape[0] == self.batch:
            return np.ascontiguousarray(rows)
        out = np.zeros((self.batch, *rows.shape[1:]), dtype=rows.dtype)
        out[:rows.shape[0]] = rows
        return out
