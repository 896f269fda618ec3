"""The compiler's middle: rewrite, then plan (the driver then emits code for the plan).

    imported graph --rewrite--> optimized graph --plan--> ExecutionPlan --emit--> code
    aot/rewrite/: Pass modules, run     aot/planning/: fusion, schedule,
    to a fixed point on the graph       buffers, arena placement

Rewrite: dead code left by the importer removed once, then the rewrite passes to
a fixed point, verifying after every change and dumping the IR after each pass
that changed it (`--dump-ir DIR`). Plan: fusion into kernels, then a kernel
order, buffers and the arena plan; the graph no longer changes.

`-v` lines say, per pass, its time and what it changed (a pass's `summary`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aot.ir.graph import Graph
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph
from aot.plan import Donation, ExecutionPlan
from aot.planning.buffers import assign_buffers, describe_plan
from aot.planning.fusion import explain, fuse
from aot.rewrite.base import Pass
from aot.rewrite.const_fold import ConstFold
from aot.rewrite.cse import CommonSubexprElim
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.fold_scale import FoldScale
from aot.rewrite.grouped_dot import GroupedDot
from aot.rewrite.layout import Layout
from aot.rewrite.output_copies import OutputCopies
from aot.rewrite.patch_conv import PatchConv
from aot.rewrite.scatter_transpose import ScatterTranspose
from aot.rewrite.simplify import Simplify
from aot.rewrite.stacked_updates import StackedUpdates

MAX_ROUNDS = 8


def import_cleanup() -> list[Pass]:
    """Run once on the imported graph, before the rewrites. Importers lower node
    by node and leave dead nodes behind (shape subgraphs folded to constants,
    weights folded into others, unrolled loop conditions, an If branch that
    cannot run at the compiled shapes). The rewrites should not see them: CSE
    keeps the earlier of two twins, which may be the dead one, and folding a
    dead node is wasted work."""
    return [DeadCodeElim()]


def default_passes(lanes: int = 16, pad_stems: bool = False) -> list[Pass]:
    """`lanes`: the target's f32 vector width for packed weights (CpuTarget.vector_lanes);
    `pad_stems`: a stem conv reads an explicitly padded input (Layout; for CPU code only: the
    GPU's convs take their padding as it is)."""
    return [ConstFold(), Simplify(), ScatterTranspose(), StackedUpdates(), GroupedDot(), FoldScale(), CommonSubexprElim(),
            DeadCodeElim(), OutputCopies(), PatchConv(), Layout(lanes, pad_stems)]


@dataclass
class PipelineOptions:
    dump_dir: Path | None = None
    log: Callable[[str], None] | None = None  # receives -v lines
    passes: list[Pass] = field(default_factory=default_passes)
    schedule: bool = True  # reorder kernels to lower peak memory
    in_place: bool = True  # let a result reuse a dead operand's buffer
    donations: list[Donation] = field(default_factory=list)  # inputs whose buffers outputs take over


class _Dumper:
    def __init__(self, options: PipelineOptions):
        self.options = options
        self.count = 0
        if options.dump_dir is not None:
            options.dump_dir.mkdir(parents=True, exist_ok=True)

    def dump(self, stage: str, text: Callable[[], str], suffix: str = "ir") -> None:
        """Write text() as the next stage's dump; made only when dumping (printing resnet18's
        graph after each pass that changes it took 30 ms of every compile)."""
        if self.options.dump_dir is None:
            return
        path = self.options.dump_dir / f"{self.count:02d}-{stage}.{suffix}"
        path.write_text(text())
        self.count += 1

    def log(self, line: str) -> None:
        if self.options.log is not None:
            self.options.log(line)


def _run_pass(p: Pass, graph: Graph, dumper: _Dumper, when: str, log_unchanged: bool) -> bool:
    start = time.perf_counter()
    before = len(graph.nodes)
    changed = p.run(graph)
    elapsed = (time.perf_counter() - start) * 1000
    if changed:
        verify_graph(graph)
        dumper.dump(p.name, lambda: print_graph(graph))
    what = f"changed ({before} -> {len(graph.nodes)} nodes)" if changed else "no change"
    summary = getattr(p, "summary", "")
    if changed and summary:
        what += f": {summary}"
    if changed or log_unchanged:
        dumper.log(f"{p.name:<14} {elapsed:8.1f} ms  {when}: {what}")
    return changed


def _rewrite_to_fixed_point(graph: Graph, options: PipelineOptions, dumper: _Dumper) -> None:
    for round_index in range(MAX_ROUNDS):
        any_change = False
        for p in options.passes:
            # later rounds log only what changed, so -v stays short
            if _run_pass(p, graph, dumper, f"round {round_index + 1}", log_unchanged=round_index == 0):
                any_change = True
        if not any_change:
            break


def run_pipeline(graph: Graph, options: PipelineOptions | None = None) -> ExecutionPlan:
    """Optimize `graph` in place and plan its execution."""
    options = options or PipelineOptions()
    dumper = _Dumper(options)
    rewrite_graph(graph, options, dumper)
    return plan_execution(graph, options, dumper)


def rewrite_graph(graph: Graph, options: PipelineOptions, dumper: _Dumper) -> None:
    """Stage 1: the import's dead code once, then the rewrite passes to a fixed point."""
    verify_graph(graph)
    dumper.dump("import", lambda: print_graph(graph))
    for p in import_cleanup():
        _run_pass(p, graph, dumper, "after import", log_unchanged=True)
    _rewrite_to_fixed_point(graph, options, dumper)


def plan_execution(graph: Graph, options: PipelineOptions, dumper: _Dumper) -> ExecutionPlan:
    """Stage 2: kernels (fusion), their order, buffers and the arena."""
    start = time.perf_counter()
    kernels = fuse(graph)
    dumper.dump("fusion", lambda: explain(kernels) + "\n", "txt")
    reductions = sum(1 for k in kernels if "reduce" in k.ops and k.root.producer is not None and k.root.producer.op != "reduce")
    dumper.log(f"{'fusion':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  {len(graph.nodes)} nodes -> "
               f"{len(kernels)} kernels ({reductions} with fused reductions)")
    start = time.perf_counter()
    result = assign_buffers(graph, kernels, reorder=options.schedule, in_place=options.in_place,
                            donations=options.donations)
    dumper.dump("buffers", lambda: describe_plan(result), "txt")
    moved = sum(1 for a, b in zip(kernels, result.kernels) if a.root is not b.root)
    dumper.log(
        f"{'buffers':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  schedule moved {moved} kernel(s), "
        f"{result.notes.get('aliases', 0)} alias(es), {result.notes.get('in_place', 0)} in place; "
        f"arena {result.arena_bytes} B (lower bound {result.arena_lower_bound} B, temporaries "
        f"{result.notes.get('temporaries_bytes', 0)} B), weights {len(result.weights)} B"
    )
    for note in result.notes.get("donations", []):  # type: ignore[union-attr]
        dumper.log(f"{'donation':<14} {note['input']} -> {note['output']}: {note['how']}, {note['why']}")
    return result
