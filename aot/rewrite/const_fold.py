"""Constant folding with the reference interpreter."""
from __future__ import annotations

import numpy as np

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Value
from aot.ir.ops import evaluate
from aot.rewrite.base import Pass

# Results at most this big always fold (scalars, shape vectors, tiny tables).
TINY_BYTES = 64


class ConstFold(Pass):
    """Fold ops whose inputs are all constants.

    Skips a result larger than its constant inputs together (and larger than
    TINY_BYTES): folding would turn a small broadcast or an iota into a large
    weight and bloat the artifact. Never folds past max_bytes.
    before: %2 = add(%c1, %c2)      after: %2 = constant(3.0)

    A broadcast of a constant counts as a constant of its operand's size: so
    v / broadcast(norm(v)) (weight normalization, as wav2vec2's positional
    conv exports it) folds into one weight no bigger than v, and the conv
    that reads it gets a constant weight the layout pass can pack.
    """

    name = "const-fold"

    def __init__(self, max_bytes: int = 1 << 28):
        self.max_bytes = max_bytes

    def run(self, graph: Graph) -> bool:
        changed = False
        for index, node in enumerate(list(graph.nodes)):
            if node.op == "constant":
                continue
            if node.op == "broadcast":
                inputs = [graph.constant_value(v) for v in node.inputs]
                if any(a is None for a in inputs):
                    continue
                in_bytes = sum(a.nbytes for a in inputs)  # type: ignore[union-attr]
            else:
                operands = [_constant_operand(graph, v) for v in node.inputs]
                if any(o is None for o in operands):
                    continue
                inputs = [o[0] for o in operands]  # type: ignore[index]
                in_bytes = sum(o[1] for o in operands)  # type: ignore[index]
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


def _constant_operand(graph: Graph, v: Value) -> tuple[np.ndarray, int] | None:
    """(value, bytes it costs) of a constant, or of a broadcast of one (costing its operand's bytes)."""
    array = graph.constant_value(v)
    if array is not None:
        return array, array.nbytes
    node = v.producer
    if node is None or node.op != "broadcast":
        return None
    source = graph.constant_value(node.inputs[0])
    if source is None:
        return None
    return evaluate(node.op, [source], node.attrs, node.out.type), source.nbytes
