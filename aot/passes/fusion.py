"""Fusion: group nodes into kernels, each computing one materialized value.

Code generation is elemental (XLA style): a kernel computes its root element
by element and computes fused producers inline at the indices it needs. So
fusing a producer is free when the consumer reads each of its elements once,
and costs recomputation when the consumer reads elements repeatedly. The
rules, in order (each decision keeps its reason for --explain fusion):

- graph outputs are roots (they are written to output buffers);
- scalar constants are inlined everywhere (immediates); other constants
  stay in the weights blob and are read as kernel parameters;
- a node read by several kernels is duplicated into each only when it is
  free (data movement, iota); otherwise it is a root of its own;
- a node joins its one consumer kernel if every use reads each element at
  most once (elementwise ops, reshape, transpose, slice, concat, pad,
  reduce), or if it is free (broadcast, dot, conv and reduce_window
  re-read elements, so only free producers fuse into them);
- dot, conv, reduce and reduce_window fuse only into once-reading uses
  (this is epilogue fusion: bias, activation and residual adds run on the
  accumulator before the store).
"""
from __future__ import annotations

from dataclasses import dataclass

from aot.ir.graph import Graph, Node, Value
from aot.ops import DATA_MOVEMENT, ELEMENTWISE, NON_ELEMENTAL
from aot.plan import Kernel

# Producers whose elements cost no arithmetic: recomputing them is free.
FREE_OPS = DATA_MOVEMENT | {"iota"}
# Consumers that read each operand element at most once.
ONCE_READERS = ELEMENTWISE | (DATA_MOVEMENT - {"broadcast"}) | {"reduce"}


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


def _decide(node: Node, users: list[Node], user_groups: list[int], rereaders: list[str], is_output: bool) -> Decision:
    if is_output:
        return Decision.no("graph output")
    if node.op in NON_ELEMENTAL:
        return Decision.no(f"{node.op} has no elemental form")
    if not users:
        return Decision.no("no users")
    distinct = sorted(set(user_groups))
    if node.op in FREE_OPS:
        return Decision.yes(f"free {node.op}, recomputed in {len(distinct)} kernel(s)")
    if len(distinct) > 1:
        return Decision.no(f"read by {len(distinct)} kernels and not free to recompute")
    if rereaders:
        return Decision.no(f"{'/'.join(rereaders)} would recompute each element several times")
    return Decision.yes(f"each element read once by {'/'.join(sorted({u.op for u in users}))}")


def fuse(graph: Graph) -> list[Kernel]:
    """Partition `graph` into kernels in execution (topological) order."""
    users = graph.users()
    outputs = graph.output_ids()
    # groups[id(node)] = the kernels (by root position) that compute `node` inline
    groups: dict[int, list[int]] = {}
    reasons: dict[int, str] = {}
    roots: list[Node] = []
    # ids of fused nodes whose elements some consumer reads more than once
    reread: set[int] = set()
    for node in reversed(graph.nodes):
        node_users = users.get(id(node.out), [])
        if node.op == "constant":
            if node.out.type.size == 1:
                groups[id(node)] = sorted({g for u in node_users for g in groups[id(u)]})
            continue
        user_groups = [g for u in node_users for g in groups[id(u)]]
        rereaders = sorted({u.op for u in node_users if u.op not in ONCE_READERS or id(u) in reread})
        decision = _decide(node, node_users, user_groups, rereaders, id(node.out) in outputs)
        if decision.fuse:
            groups[id(node)] = sorted(set(user_groups))
            if rereaders:
                reread.add(id(node))
        else:
            groups[id(node)] = [len(roots)]
            reasons[len(roots)] = decision.reason
            roots.append(node)
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
        kernels.append(Kernel(name, root.out, nodes, params, f"{fused}: root because {reasons[g]}"))
    return kernels


def explain(kernels: list[Kernel]) -> str:
    """One line per kernel: what it fuses and why its root is materialized."""
    return "\n".join(f"{k.name}: {k.reason}" for k in kernels)
