"""Give every graph output its own computed value."""
from __future__ import annotations

from aot.ir.builder import Builder
from aot.ir.graph import Graph
from aot.rewrite.base import Pass


class OutputCopies(Pass):
    """Insert `copy` where an output is a graph input, a constant, or repeats another output.

    Each output buffer is written by exactly one kernel, so these outputs need
    a kernel of their own.
    before: return %x as "a", %x as "b"   after: %0 = copy(%x); %1 = copy(%x); return %0 as "a", %1 as "b"
    """

    name = "output-copies"

    def run(self, graph: Graph) -> bool:
        changed = False
        seen: set[int] = set()
        for i, value in enumerate(graph.outputs):
            needs_copy = value.producer is None or value.producer.op == "constant" or id(value) in seen
            seen.add(id(value))
            if needs_copy:
                graph.outputs[i] = Builder(graph, loc=f"output {graph.output_names[i]}").op("copy", [value])
                changed = True
        return changed
