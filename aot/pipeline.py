"""The ordered pass list: graph rewrites to a fixed point, then fusion, buffer
assignment and memory planning, verifying after every change and dumping the
IR after each pass that changed it (`--dump-ir DIR`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aot.ir.graph import Graph
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph
from aot.passes.base import Pass
from aot.passes.buffers import assign_buffers, describe_plan
from aot.passes.const_fold import ConstFold
from aot.passes.dce import DeadCodeElim
from aot.passes.fusion import explain, fuse
from aot.passes.output_copies import OutputCopies
from aot.plan import ExecutionPlan

MAX_ROUNDS = 8


def default_passes() -> list[Pass]:
    return [ConstFold(), DeadCodeElim(), OutputCopies()]


@dataclass
class PipelineOptions:
    dump_dir: Path | None = None
    log: Callable[[str], None] | None = None  # receives -v lines
    passes: list[Pass] = field(default_factory=default_passes)


class _Dumper:
    def __init__(self, options: PipelineOptions):
        self.options = options
        self.count = 0
        if options.dump_dir is not None:
            options.dump_dir.mkdir(parents=True, exist_ok=True)

    def dump(self, stage: str, text: str, suffix: str = "ir") -> None:
        if self.options.dump_dir is None:
            return
        path = self.options.dump_dir / f"{self.count:02d}-{stage}.{suffix}"
        path.write_text(text)
        self.count += 1

    def log(self, line: str) -> None:
        if self.options.log is not None:
            self.options.log(line)


def run_pipeline(graph: Graph, options: PipelineOptions | None = None) -> ExecutionPlan:
    """Optimize `graph` in place and plan its execution."""
    options = options or PipelineOptions()
    dumper = _Dumper(options)
    verify_graph(graph)
    dumper.dump("import", print_graph(graph))
    for round_index in range(MAX_ROUNDS):
        any_change = False
        for p in options.passes:
            start = time.perf_counter()
            before = len(graph.nodes)
            changed = p.run(graph)
            elapsed = (time.perf_counter() - start) * 1000
            if changed:
                verify_graph(graph)
                dumper.dump(p.name, print_graph(graph))
                any_change = True
            dumper.log(f"{p.name:<14} {elapsed:8.1f} ms  {'changed' if changed else 'no change'} ({before} -> {len(graph.nodes)} nodes)")
        if not any_change:
            break
    start = time.perf_counter()
    kernels = fuse(graph)
    dumper.dump("fusion", explain(kernels) + "\n", "txt")
    dumper.log(f"{'fusion':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  {len(graph.nodes)} nodes -> {len(kernels)} kernels")
    start = time.perf_counter()
    plan = assign_buffers(graph, kernels)
    dumper.dump("buffers", describe_plan(plan), "txt")
    dumper.log(
        f"{'buffers':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  arena {plan.arena_bytes} B "
        f"(lower bound {plan.arena_lower_bound} B), weights {len(plan.weights)} B"
    )
    return plan
