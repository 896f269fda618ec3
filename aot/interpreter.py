"""Reference interpreter: runs a Graph with each op's numpy reference.

Used as the oracle in tests and by constant folding. A run-time check
(ir/ops/checks.py) that fails raises RunError with the check's message, the
message the compiled artifact's failing run reports.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from aot.errors import RunError
from aot.ir.graph import Graph
from aot.ir.ops import evaluate


def interpret(graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Evaluate `graph` on named inputs; returns outputs in graph order."""
    env = _evaluate(graph, feeds)
    return [np.array(env[id(v)]) for v in graph.outputs]


def interpret_values(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every value of `graph` on named inputs, by value name (to compare intermediate results)."""
    env = _evaluate(graph, feeds)
    values = {v.name: env[id(v)] for v in graph.inputs}
    values.update((node.out.name, env[id(node.out)]) for node in graph.nodes)
    return values


def _evaluate(graph: Graph, feeds: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    env: dict[int, np.ndarray] = {}
    for value in graph.inputs:
        if value.name not in feeds:
            raise RunError(f"missing input '{value.name}'")
        array = np.asarray(feeds[value.name])
        if array.shape != value.type.shape:
            raise RunError(f"input '{value.name}': expected shape {list(value.type.shape)}, got {list(array.shape)}")
        env[id(value)] = array.astype(value.type.dtype.to_numpy(), copy=False)
    for node in graph.nodes:
        env[id(node.out)] = evaluate(node.op, [env[id(v)] for v in node.inputs], node.attrs, node.out.type)
    return env
