"""The pass interface: a name and `run(graph) -> changed`."""
from __future__ import annotations

from aot.ir.graph import Graph


class Pass:
    """A graph-to-graph rewrite. Options go through __init__; no state between runs.

    `summary` is the one exception: after `run` it says what the run changed
    (e.g. "3 rewrites (x*1 -> x: 3)"), for the pipeline's -v line.
    """

    name = "pass"
    summary = ""

    def run(self, graph: Graph) -> bool:  # True iff the graph changed
        raise NotImplementedError
