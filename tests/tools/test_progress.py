"""Compile progress (aot/progress.py): a bar on a terminal, nothing anywhere else."""
from __future__ import annotations

import io

from click.testing import CliRunner

from aot import progress
from aot.cli import compile_main
from aot.codegen.cpu import emit_cpu_variants
from aot.codegen.cpu.target import CpuTarget
from aot.ir import DType
from codegen_util import graph_with_inputs, simple_plan
import make_samples


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Recorder(progress.Reporter):
    def __init__(self) -> None:
        self.events: list[tuple[str, int | None]] = []

    def phase(self, name: str, total: int | None = None) -> None:
        self.events.append((name, total))

    def advance(self, units: int = 1) -> None:
        self.events.append(("advance", units))


def test_default_reporter_shows_nothing_and_reporting_restores_it():
    assert type(progress.current()) is progress.Reporter
    recorder = _Recorder()
    with progress.reporting(recorder):
        assert progress.current() is recorder
    assert type(progress.current()) is progress.Reporter


def test_only_a_terminal_gets_a_bar():
    assert type(progress.for_stream(io.StringIO())) is progress.Reporter
    stream = _Terminal()
    reporter = progress.for_stream(stream)
    assert isinstance(reporter, progress.TerminalReporter)
    with progress.reporting(reporter):
        reporter.phase("import")
        reporter.phase("codegen", total=4)
        reporter.advance(3)
    text = stream.getvalue()
    assert "import" in text and "codegen" in text and "0/4" in text  # tqdm redraws at most every 0.1 s
    assert text.endswith("\r")  # closed: the line is cleared for what the CLI prints next


def test_codegen_reports_every_kernel_of_every_variant():
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (2, 9)))
    g.add_output(b.op("exp", [b.op("neg", [x])]), "y")
    plan = simple_plan(g)
    recorder = _Recorder()
    targets = [CpuTarget.from_name("x86-64-v4"), CpuTarget.from_name("x86-64-v3")]
    with progress.reporting(recorder):
        emit_cpu_variants(plan, targets, jobs=2, cache=None)
    assert recorder.events[0] == ("codegen", 2 * len(plan.kernels))
    assert sum(units for name, units in recorder.events if name == "advance") == 2 * len(plan.kernels)


def test_compile_on_a_pipe_prints_no_bar(tmp_path):
    model = make_samples.write_samples(tmp_path)["mlp"]
    quiet = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "a.aot"), "--cpu", "native"])
    assert quiet.exit_code == 0, quiet.output
    assert "\r" not in quiet.output and "codegen" not in quiet.output and quiet.output.startswith("wrote")
    verbose = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "b.aot"), "--cpu", "native", "-v",
                                                "--no-cache"])
    assert verbose.exit_code == 0, verbose.output
    assert "\r" not in verbose.output and "codegen" in verbose.output
