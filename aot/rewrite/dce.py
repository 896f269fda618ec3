"""Dead code elimination."""
from __future__ import annotations

from aot.ir.graph import Graph
from aot.ir.ops import CHECKS
from aot.rewrite.base import Pass


class DeadCodeElim(Pass):
    """Remove nodes whose result reaches no graph output and no run-time check.

    Every op is pure except a check, which is kept for its effect (failing
    the run) even though nothing reads its result; what it reads stays live.
    before: %1 = exp(%x); return %x      after: return %x
    """

    name = "dce"

    def run(self, graph: Graph) -> bool:
        live = {id(v) for v in graph.outputs}
        dead = []
        for node in reversed(graph.nodes):
            if id(node.out) in live or node.op in CHECKS:
                live.update(id(v) for v in node.inputs)
            else:
                dead.append(node)
        graph.remove_nodes(dead)
        return bool(dead)
