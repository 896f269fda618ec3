"""Row caching: a softmax computes exp(x - max) once per element, not twice.

In the elemental row loop a fused row reduction runs in the row preamble
(kernel.py), and the inner loop then recomputes what it reduced wherever the
root needs it too: softmax = exp(x - max) / sum(exp(x - max)) evaluated
exp twice per element, once in the sum's loop and once in the output loop.

When a kernel's root row has the shape of a reduced operand V, the
reduction's loop can store each V element into the root's own output row as
it goes (the output is not written yet), and the inner loop reads V back from
there instead of recomputing it; the inner loop then overwrites each element
with the root's value. `find` decides where that is exact: V is f32 like the
root, is reduced along the innermost dim only, and reaches the root through
elementwise ops alone (so the inner loop reads V at exactly its own index).
"""
from __future__ import annotations

from dataclasses import dataclass

from aot.ir.graph import Node, Value
from aot.ir.types import DType
from aot.ir.ops import DATA_MOVEMENT, ELEMENTWISE
from aot.plan import Kernel


@dataclass(frozen=True)
class RowCache:
    reduce: Node  # the row reduction whose loop fills the cache
    value: Value  # V: the reduced operand, cached in the root's output row


def find(kernel: Kernel) -> RowCache | None:
    root = kernel.root
    if root.type.dtype is not DType.F32 or root.type.rank == 0 or root.producer is None:
        return None
    members = {id(n) for n in kernel.nodes}
    readers: dict[int, list[Node]] = {}
    for node in kernel.nodes:
        for v in node.inputs:
            readers.setdefault(id(v), []).append(node)
    last = root.type.rank - 1
    for node in kernel.nodes:
        if node.op != "reduce" or tuple(node.attrs["axes"]) != (last,) or node is root.producer:
            continue
        (v,) = node.inputs
        producer = v.producer
        if (v.type != root.type or producer is None or id(producer) not in members
                or producer.op in DATA_MOVEMENT or producer.op == "constant"):
            continue
        if _reaches_root_elementwise(v, node, root, readers):
            return RowCache(node, v)
    return None


def _reaches_root_elementwise(v: Value, reduce: Node, root: Value, readers: dict[int, list[Node]]) -> bool:
    """Every reader of v in the kernel but `reduce`, and every reader of theirs up to the root,
    is elementwise: the root reads v only at its own index. At least one such path exists."""
    frontier = [r for r in readers.get(id(v), []) if r is not reduce]
    if not frontier:
        return False
    seen: set[int] = set()
    while frontier:
        node = frontier.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op not in ELEMENTWISE or node.out.type.shape != root.type.shape:
            return False
        if node.out is not root:
            frontier.extend(readers.get(id(node.out), []))
    return True
