"""Progress of a compile: phases (import, passes, codegen, pack) and units of work in a phase.

    with progress.reporting(progress.for_stream(sys.stderr)):   # the CLI
        compile_model(...)
    progress.current().phase("codegen", total=len(jobs))       # whoever does the work
    progress.current().advance()

The reporter is context-local (a ContextVar): the library reports into whatever the
caller installed, and by default into a Reporter that shows nothing, so the API and
the tests print nothing. `for_stream` gives a tqdm bar only when the stream is a
terminal: a log file or a pipe gets no control characters.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, Any


class Reporter:
    """Shows nothing: the default, and the base of reporters that do."""

    def phase(self, name: str, total: int | None = None) -> None:
        """A new phase begins; `total` units of work in it, when known."""

    def advance(self, units: int = 1) -> None:
        """`units` more of the phase's work are done."""

    def close(self) -> None:
        """The compile is over (or failed): leave the terminal clean."""


class TerminalReporter(Reporter):
    """One tqdm bar on `stream`, relabelled at each phase; units shown where the phase has them."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self._bar: Any = None

    def phase(self, name: str, total: int | None = None) -> None:
        from tqdm import tqdm

        self._finish()
        bar_format = "{desc:<8} {bar} {n_fmt}/{total_fmt} [{elapsed}]" if total else "{desc:<8} [{elapsed}]"
        self._bar = tqdm(total=total, desc=name, file=self.stream, leave=False, dynamic_ncols=True,
                         bar_format=bar_format, unit="kernel")

    def advance(self, units: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(units)

    def close(self) -> None:
        self._finish()

    def _finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


_CURRENT: ContextVar[Reporter] = ContextVar("aot_progress", default=Reporter())


def current() -> Reporter:
    """The reporter installed for this context (one that shows nothing unless a caller installed one)."""
    return _CURRENT.get()


def for_stream(stream: IO[str]) -> Reporter:
    """A bar on `stream` when it is a terminal, else a reporter that shows nothing."""
    isatty = getattr(stream, "isatty", None)
    return TerminalReporter(stream) if isatty is not None and isatty() else Reporter()


@contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Install `reporter` for the work inside the block; closed and uninstalled after it."""
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        reporter.close()
        _CURRENT.reset(token)
