"""Fusion: group nodes into kernels, each computing one materialized value.

Code generation is elemental (XLA style): a kernel computes its root element
by element and computes fused producers inline at the indices it needs. So
fusing a producer is free when the consumer reads each of its elements once,
and costs recomputation when the consumer reads elements repeatedly. The
rules, in order (each decision keeps its reason for --explain fusion):

- graph outputs are roots (they are written to output buffers), and so is
  what a run-time check reads (ir/ops/checks.py: the check itself is no kernel;
  codegen reads its operand after the last kernel);
- scalar constants are inlined everywhere (immediates); other constants
  stay in the weights blob and are read as kernel parameters;
- a node read by several kernels is duplicated into each only when it is
  free (data movement, iota); otherwise it is a root of its own;
- data movement other than a reshape never fuses into a conv's input or a
  packed dot's lhs (through reshapes or not): those bodies read the operand
  from a buffer;
- reduction input fusion: a value that the kernel only reads at its row
  index (through a broadcast that re-expands exactly the innermost dim) is
  loop-invariant in the row loop; codegen computes it once per row, before
  the inner loop. So a reduce over the innermost dim (softmax's max and sum,
  layer norm's mean and variance) and the cheap arithmetic on its result
  fuse into the elementwise consumer: softmax and layer norm become one kernel;
- a node joins its one consumer kernel if every use reads each element at
  most once (elementwise ops, reshape, transpose, slice, concat, pad,
  reduce), or if it is free (broadcast, dot, conv and reduce_window
  re-read elements, so only free producers fuse into them);
- one dot or conv per kernel: its body accelerates one contraction, and a
  second would run on the slow elemental path. The exception is a packed
  conv whose result meets the kernel's packed conv in a plain sum (a ResNet
  downsample branch): both accumulate into the same registers
  (planning/contraction_sum.py);
- expensive nodes (dot, conv, reduce, reduce_window) fuse only where they
  are computed in one loop: a node that the kernel evaluates both inside a
  fused reduction's loop and outside it is computed twice, which is fine for
  an add or an exp but never for a contraction (never duplicate expensive work);
- dot, conv, reduce and reduce_window fuse only into once-reading uses
  (this is epilogue fusion: bias, activation and residual adds run on the
  accumulator before the store); dot and conv never fuse into a reduce (a
  global average pool), which would keep them off their fast kernel bodies;
- an f32 dot or conv's epilogue ends where the fast bodies stop taking it:
  they store each accumulator lane at its own position, so between the
  contraction and the root only elementwise ops may stand. The last value
  before anything else (the transpose that splits attention heads, a layout
  permute) is materialized:
  the contraction keeps its bias and activation, and the data movement runs
  as a cheap kernel of its own instead of dragging the contraction onto the
  elemental path.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from collections.abc import Callable

from aot.ir.graph import Graph, Node, Value
from aot.ir.ops import CHECKS, CONTRACTIONS, DATA_MOVEMENT, ELEMENTWISE, MULTIPLY_ADDS, NON_ELEMENTAL, PACKED
from aot.ir.types import DType
from aot.plan import Kernel
from aot.planning.contraction_sum import accumulation_join

# Producers whose elements cost no arithmetic: recomputing them is free.
FREE_OPS = DATA_MOVEMENT | {"iota"}
# Consumers that read each operand element at most once.
ONCE_READERS = ELEMENTWISE | (DATA_MOVEMENT - {"broadcast"}) | {"reduce"}
# Producers too costly to compute more than once per element.
EXPENSIVE = CONTRACTIONS

# How a fused node's index relates to its kernel's row loop (root index = row + [j]):
# "row": read at (row, j), same rank as the root; "row-scalar": read at exactly
# the row index, so it is invariant in the inner loop and computed once per row.
Alignment = Literal["row", "row-scalar"] | None


@dataclass(frozen=True)
class Decision:
    fuse: bool
    reason: str

    @staticmethod
    def yes(reason: str) -> Decision:
        return Decision(True, reason)

    @staticmethod
    def no(reason: str) -> Decision:
        return Decision(False, reason)


def expands_innermost_only(node: Node) -> bool:
    """broadcast [d0..dn-2] -> [d0..dn-2, dn-1]: each output row reads one operand element."""
    (x,) = node.inputs
    rank = node.out.type.rank
    return rank >= 1 and node.attrs["dims"] == tuple(range(rank - 1)) and x.type.shape == node.out.type.shape[:-1]


def reduces_innermost_only(node: Node) -> bool:
    (x,) = node.inputs
    return x.type.rank >= 1 and node.attrs["axes"] == (x.type.rank - 1,)


def use_alignment(user: Node, user_alignment: Alignment) -> Alignment:
    """The alignment an operand of `user` gets from `user`'s own alignment."""
    if user.op in ELEMENTWISE:
        return user_alignment
    if user.op == "broadcast" and user_alignment == "row" and expands_innermost_only(user):
        return "row-scalar"
    if user.op == "reduce" and user_alignment == "row-scalar" and reduces_innermost_only(user):
        return "row"
    return None


@dataclass
class _Analysis:
    """Per fused node (by id): alignment and the loops it is evaluated in."""

    alignment: dict[int, Alignment]
    contexts: dict[int, frozenset[str]]

    def use_contexts(self, user: Node) -> frozenset[str]:
        if user.op in CONTRACTIONS:
            return frozenset({f"loop of %{user.out.name}"})
        return self.contexts[id(user)]

    def of_uses(self, users: list[Node]) -> tuple[Alignment, frozenset[str]]:
        aligns = {use_alignment(u, self.alignment[id(u)]) for u in users}
        contexts = frozenset().union(*(self.use_contexts(u) for u in users))
        alignment = aligns.pop() if len(aligns) == 1 else None
        return alignment, contexts


def epilogue_ends(graph: Graph, users_of: Callable[[Value], list[Node]]) -> dict[int, str]:
    """id(node) -> why: the values where an f32 dot or conv's epilogue must end (see the module doc).

    From each contraction: everything reachable through elementwise ops (bias,
    GELU's several reads of its input, residual adds). A value of that epilogue
    that another kind of op reads (a transpose, a reduce, a reshape) ends the
    epilogue there: it is materialized, so the norm or the permute reads it in
    its natural layout and the contraction keeps its fast body.
    """
    ends: dict[int, str] = {}
    for node in graph.nodes:
        if node.op not in MULTIPLY_ADDS or node.out.type.dtype is not DType.F32:
            continue
        epilogue, seen = [node], {id(node)}
        for value in epilogue:  # grows while it is walked: a breadth-first walk
            readers = users_of(value.out)
            other = next((r for r in readers if r.op not in ELEMENTWISE), None)
            if other is not None:  # materialized: what reads it lies beyond this epilogue
                ends.setdefault(id(value), f"the {node.op} epilogue ends before {other.op} %{other.out.name}: "
                                           f"the fast {node.op} body stores each accumulator at its own position")
                continue
            for reader in readers:
                if id(reader) not in seen:
                    seen.add(id(reader))
                    epilogue.append(reader)
    return ends


def operand_feeds(graph: Graph, users_of: Callable[[Value], list[Node]]) -> dict[int, str]:
    """id(node) -> why: the producer of a conv's input or a packed dot's lhs, where data
    movement other than reshapes leads to it. Those bodies read the operand as a buffer,
    once per tap or per column block: fused, a transpose put a division and a remainder per
    dim on every load (ConvNeXt's 7x7 depthwise convs fell to the elemental path, 12x
    slower; ViT's im2col-read patch embedding ran at half speed). The operand itself is
    materialized, reshapes included, so the pointwise and depthwise bodies (which take
    their input only as a buffer) still apply."""
    feeds: dict[int, str] = {}
    for node in graph.nodes:
        if node.op not in ("conv", "packed_conv", "packed_dot"):
            continue
        operand = node.inputs[0].producer
        moved: list[Node] = []
        current = operand
        while current is not None and current.op in FREE_OPS:
            if current.op != "reshape":
                moved.append(current)
            current = current.inputs[0].producer if current.inputs else None
        if operand is None or not moved:
            continue
        # the packed bodies read their operand elementally, and a reshape of a buffer costs
        # them nothing: materialize the last real data movement in its own (row-contiguous)
        # layout, a copy that vectorizes; the pointwise and depthwise bodies need the
        # operand itself as a buffer
        target = moved[0] if node.op in PACKED else operand
        feeds[id(target)] = (f"{node.op}'s {'lhs' if node.op == 'packed_dot' else 'input'} (after {moved[0].op}) is "
                             f"materialized: the fast {node.op} bodies read it from a buffer")
    return feeds


def _decide(node: Node, users: list[Node], user_groups: list[int], rereaders: list[str], is_output: bool,
            is_checked: bool, alignment: Alignment, contexts: frozenset[str], feeds_reduce: bool,
            holds_contraction: bool, sums_with_contraction: bool, epilogue_end: str | None = None,
            operand_feed: str | None = None) -> Decision:
    """`is_checked`: a run-time check reads the value; `sums_with_contraction`: a conv that meets
    every contraction of its consumer's kernel in a plain sum; `epilogue_end`: why a contraction's
    epilogue must end at this node (epilogue_ends); `operand_feed`: why this data movement must
    be materialized for a fast body's operand (operand_feeds)."""
    if is_output:
        return Decision.no("graph output")
    if is_checked:
        return Decision.no("read by a run-time check")
    if epilogue_end is not None and users:
        return Decision.no(epilogue_end)
    if node.op in NON_ELEMENTAL:
        return Decision.no(f"{node.op} has no elemental form")
    if not users:
        return Decision.no("no users")
    distinct = sorted(set(user_groups))
    if operand_feed is not None:
        return Decision.no(operand_feed)
    if node.op in FREE_OPS:
        return Decision.yes(f"free {node.op}, recomputed in {len(distinct)} kernel(s)")
    if len(distinct) > 1:
        return Decision.no(f"read by {len(distinct)} kernels and not free to recompute")
    if alignment == "row-scalar" and not rereaders:
        return Decision.yes(f"{node.op} is row-invariant: computed once per row, before the inner loop")
    if rereaders:
        return Decision.no(f"{'/'.join(rereaders)} would recompute each element several times")
    if node.op in EXPENSIVE and len(contexts) > 1:
        return Decision.no(f"{node.op} would be computed in {len(contexts)} loops ({', '.join(sorted(contexts))})")
    if node.op in MULTIPLY_ADDS and feeds_reduce:
        # a reduce is no epilogue: the fast (packed) dot/conv bodies only take elementwise ones
        return Decision.no(f"{node.op} keeps its own kernel body: a reduce is not an epilogue")
    if sums_with_contraction:
        return Decision.yes("conv accumulates into its consumer's conv: their results meet in a plain sum")
    if node.op in MULTIPLY_ADDS and holds_contraction:
        # a kernel body accelerates one contraction; a second would run on the slow elemental path
        return Decision.no(f"{node.op} keeps its own kernel body: its consumer's kernel already has a dot/conv")
    if len(contexts) > 1:
        return Decision.yes(f"cheap {node.op}, computed in {len(contexts)} loops")
    return Decision.yes(f"each element read once by {'/'.join(sorted({u.op for u in users}))}")


def fuse(graph: Graph) -> list[Kernel]:
    """Partition `graph` into kernels in execution (topological) order; checks are in none."""
    # a check reads its operand outside every kernel: it is no user that could fuse it
    users = {key: [u for u in readers if u.op not in CHECKS] for key, readers in graph.users().items()}
    outputs = graph.output_ids()
    checked = {id(n.inputs[0]) for n in graph.nodes if n.op in CHECKS}

    def users_of(value: Value) -> list[Node]:
        return users.get(id(value), [])

    ends = epilogue_ends(graph, users_of)
    feeds = operand_feeds(graph, users_of)

    # groups[id(node)] = the kernels (by root position) that compute `node` inline
    groups: dict[int, list[int]] = {}
    reasons: dict[int, str] = {}
    # why each fused (non-constant) node joined its consumers, by node id
    fused_reasons: dict[int, str] = {}
    roots: list[Node] = []
    # ids of fused nodes whose elements some consumer reads more than once
    reread: set[int] = set()
    # ids of fused nodes whose value flows into a reduce of the same kernel
    into_reduce: set[int] = set()
    # kernels (by root position) -> the dots and convs they already compute
    with_contraction: dict[int, list[Node]] = {}
    analysis = _Analysis({}, {})
    for node in reversed(graph.nodes):
        if node.op in CHECKS:
            continue
        node_users = users.get(id(node.out), [])
        if node.op == "constant":
            if node.out.type.size == 1:
                groups[id(node)] = sorted({g for u in node_users for g in groups[id(u)]})
            continue
        user_groups = [g for u in node_users for g in groups[id(u)]]
        alignment, contexts = analysis.of_uses(node_users)
        rereaders = sorted({
            u.op for u in node_users
            if (u.op not in ONCE_READERS and use_alignment(u, analysis.alignment[id(u)]) != "row-scalar")
            or id(u) in reread
        })
        # does this value reach a reduce of its kernel, directly or through fused ops?
        feeds_reduce = any(u.op == "reduce" or id(u) in into_reduce for u in node_users)
        held = [c for g in sorted(set(user_groups)) for c in with_contraction.get(g, [])]
        # a second conv may share the kernel's accumulators when it joins every one there in a plain sum
        sums = node.op == "packed_conv" and bool(held) and all(
            accumulation_join(c, node, users_of, lambda v: id(v) in outputs) is not None for c in held)
        decision = _decide(node, node_users, user_groups, rereaders, id(node.out) in outputs, id(node.out) in checked,
                           alignment, contexts, feeds_reduce, bool(held), sums, ends.get(id(node)),
                           feeds.get(id(node)))
        if decision.fuse and node.op in MULTIPLY_ADDS:
            for g in set(user_groups):
                with_contraction.setdefault(g, []).append(node)
        if decision.fuse:
            fused_reasons[id(node)] = decision.reason
            if feeds_reduce:
                into_reduce.add(id(node))
            groups[id(node)] = sorted(set(user_groups))
            analysis.alignment[id(node)] = alignment
            # a row-invariant value is computed once per row, whichever loops ask for it
            analysis.contexts[id(node)] = frozenset({"row"}) if alignment == "row-scalar" else contexts
            if rereaders:
                reread.add(id(node))
        else:
            groups[id(node)] = [len(roots)]
            if node.op in MULTIPLY_ADDS:
                with_contraction[len(roots)] = [node]
            reasons[len(roots)] = decision.reason
            roots.append(node)
            analysis.alignment[id(node)] = "row" if node.out.type.rank >= 1 else None
            analysis.contexts[id(node)] = frozenset({"main"})
    members: list[list[Node]] = [[] for _ in roots]
    for node in graph.nodes:
        for g in groups.get(id(node), []):
            members[g].append(node)
    kernels = []
    position_of = {id(n): i for i, n in enumerate(graph.nodes)}
    order = sorted(range(len(roots)), key=lambda g: position_of[id(roots[g])])
    for position, g in enumerate(order):
        nodes = members[g]
        inside = {id(n.out) for n in nodes}
        params: list[Value] = []
        for n in nodes:
            for v in n.inputs:
                if id(v) not in inside and all(p is not v for p in params):
                    params.append(v)
        root = roots[g]
        name = f"k{position}_{root.op}"
        fused = "+".join(n.op for n in nodes if n.op != "constant")
        why = {n.out.name: fused_reasons[id(n)] for n in nodes if id(n) in fused_reasons}
        kernels.append(Kernel(name, root.out, nodes, params, f"{fused}: root because {reasons[g]}", why))
    return kernels


def explain(kernels: list[Kernel]) -> str:
    """Per kernel: what it fuses and why its root is materialized, then one
    indented line per fused node saying why it joined the kernel."""
    lines = []
    for k in kernels:
        lines.append(f"{k.name}: {k.reason}")
        for node in k.nodes:
            reason = k.fused_reasons.get(node.out.name)
            if reason is not None:
                lines.append(f"    %{node.out.name} ({node.op}): fused, {reason}")
    return "\n".join(lines)
