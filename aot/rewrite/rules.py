"""Shared driver for local rewrites: rule tables `op -> [(name, fn)]`.

A rule `fn(node, b)` returns a replacement Value of the same type, or None.
It never mutates what it matched; new nodes go through the Builder `b`,
which appends them after the matched node (they read only values defined
before it). One sweep in graph order: each node's inputs are first
redirected to the replacements made so far, so chains rewrite in one pass;
the replaced nodes are removed at the end. Counts per rule are kept for -v.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value

Rule = Callable[[Node, Builder], Value | None]
RuleTable = dict[str, list[tuple[str, Rule]]]


def apply_rules(graph: Graph, table: RuleTable) -> Counter[str]:
    """Rewrite `graph` in place with the first matching rule per node; returns rewrites per rule name."""
    counts: Counter[str] = Counter()
    replaced: dict[int, Value] = {}
    dropped: list[Node] = []
    old_nodes = graph.nodes
    graph.nodes = []
    renames: list[tuple[Value, str]] = []  # a new result takes the name of the value it replaces
    for node in old_nodes:
        node.inputs = [replaced.get(id(v), v) for v in node.inputs]
        graph.nodes.append(node)
        for name, rule in table.get(node.op, []):
            count = len(graph.nodes)
            result = rule(node, Builder(graph, loc=node.loc))
            if result is None:
                continue
            if result.type != node.out.type:  # a rule bug must not corrupt the graph
                raise AssertionError(f"rule {name} changed the type of %{node.out.name}")
            if any(n.out is result for n in graph.nodes[count:]):
                renames.append((result, node.out.name))
            replaced[id(node.out)] = result
            dropped.append(node)
            counts[name] += 1
            break
    graph.outputs = [replaced.get(id(v), v) for v in graph.outputs]
    graph.remove_nodes(dropped)
    for value, name in renames:
        graph.rename(value, name)
    return counts


def splat(value: Value) -> float | int | bool | None:
    """The one element every position of `value` holds, if it is a constant (or a broadcast of one) with all elements equal."""
    node = value.producer
    while node is not None and node.op == "broadcast":
        node = node.inputs[0].producer
    if node is None or node.op != "constant":
        return None
    array: np.ndarray = node.attrs["value"]
    if array.size == 0:
        return None
    first = array.reshape(-1)[0]
    if not np.all(array == first) or (array.dtype.kind == "f" and np.isnan(first)):
        return None
    return first.item()


def format_counts(counts: Counter[str]) -> str:
    """'12 rewrites (x*1 -> x: 3, ...)', most frequent first, ties by name (deterministic)."""
    total = sum(counts.values())
    if not total:
        return "no rewrites"
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{total} rewrite{'s' if total != 1 else ''} (" + ", ".join(f"{k}: {n}" for k, n in items) + ")"
