"""The execution plan: what the optimizing passes hand to code generation.

A plan is a list of kernels in execution order. Each kernel computes one
materialized value (its `root`) from fused nodes; every value a kernel reads
or writes that is not fused lives in a buffer Slice: a graph input, a graph
output, the per-context arena, or the weights blob.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from aot.ir.graph import Graph, Node, Value

BufferKind = Literal["input", "output", "arena", "weights"]


@dataclass(frozen=True)
class Slice:
    """Where a materialized value lives: `size` bytes at `offset` of buffer `kind` number `index`.

    `index` is the position among graph inputs/outputs (0 for arena and weights);
    `offset` is a byte offset (always 0 for inputs and outputs).
    """

    kind: BufferKind
    index: int
    offset: int
    size: int


@dataclass
class Kernel:
    """One generated function: writes `root`, computing the fused `nodes`.

    `nodes` are in topological order and end with `root.producer`; a node in
    `nodes` is computed inline wherever it is needed (elemental emission).
    `params` are the materialized values the fused nodes read, each with a Slice.
    `reason` says why the fusion pass made `root` a kernel root, and
    `fused_reasons` why it fused each other node (by value name), for --explain.
    """

    name: str
    root: Value
    nodes: list[Node]
    params: list[Value]
    reason: str = ""
    fused_reasons: dict[str, str] = field(default_factory=dict)

    @property
    def ops(self) -> list[str]:
        return [n.op for n in self.nodes if n.op != "constant"]


@dataclass(frozen=True)
class Check:
    """A run-time check (ir/ops/checks.py): the run fails with `message` unless the
    boolean scalar `ok` is true. `ok` has a Slice that stays valid after the last
    kernel, where codegen evaluates every check. `loc` names the source node."""

    ok: Value
    message: str
    loc: str = ""


@dataclass(frozen=True)
class Donation:
    """Graph input number `input` gives its buffer to graph output number `output`
    (planning/donation.py): the code reads the input from the output's buffer, which holds
    the input's value when a run starts, and writes the output there."""

    input: int
    output: int


@dataclass
class ExecutionPlan:
    graph: Graph
    kernels: list[Kernel]
    slices: dict[str, Slice]  # value name -> location, for every kernel root and param, and every check's operand
    arena_bytes: int = 0
    arena_lower_bound: int = 0
    weights: bytes = b""
    notes: dict[str, object] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)  # in graph order; the first failing one is reported
    donations: list[Donation] = field(default_factory=list)  # by input index; the manifest's and the code's
