"""The pass interface: a name and `run(graph) -> changed`."""
from __future__ import annotations

from aot.ir.graph import Graph


class Pass:
    """A graph-to-graph rewrite. Options go through __init__; no state between runs."""

    name = "pass"

    def run(self, graph: Graph) -> bool:  # True iff the graph changed
        raise NotImplementedError
