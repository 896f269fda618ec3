"""Constant folding with the reference interpreter."""
from __future__ import annotations

from aot.ir.builder import Builder
from aot.ir.graph import Graph
from aot.ops import evaluate
from aot.passes.base import Pass

# Results at most this big always fold (scalars, shape vectors, tiny tables).
TINY_BYTES = 64


class ConstFold(Pass):
    """Fold ops whose inputs are all constants.

    Skips a result larger than its constant inputs together (and larger than
    TINY_BYTES): folding would turn a small broadcast or an iota into a large
    weight and bloat the artifact. Never folds past max_bytes.
    before: %2 = add(%c1, %c2)      after: %2 = constant(3.0)
    """

    name = "const-fold"

    def __init__(self, max_bytes: int = 1 << 28):
        self.max_bytes = max_bytes

    def run(self, graph: Graph) -> bool:
        changed = False
        for index, node in enumerate(list(graph.nodes)):
            if node.op == "constant":
                continue
            inputs = [graph.constant_value(v) for v in node.inputs]
            if any(a is None for a in inputs):
                continue
            in_bytes = sum(a.nbytes for a in inputs)  # type: ignore[union-attr]
            out_bytes = node.out.type.nbytes
            if out_bytes > self.max_bytes or out_bytes > max(in_bytes, TINY_BYTES):
                continue
            result = evaluate(node.op, inputs, node.attrs, node.out.type)  # type: ignore[arg-type]
            position = graph.index_of(node)
            folded = Builder(graph, index=position, loc=node.loc).constant(result, name=graph.fresh_name(node.out.name + ".c"))
            graph.replace_uses(node.out, folded)
            graph.remove_nodes([node])
            changed = True
        return changed
