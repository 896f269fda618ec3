"""Common subexpression elimination.

Two nodes with the same op, attributes, result type and inputs compute the
same value (every op is pure); the later one is replaced by the earlier.
A check (ir/ops/checks.py) is kept for its effect, not its value, and two equal
checks assert the same thing with the same message, so one of them suffices.
Constants compare by content, so identical weights are also merged; the
inputs of commutative ops compare as a multiset.
before: %a = exp(%x); %b = exp(%x); %c = add(%a, %b)
after:  %a = exp(%x); %c = add(%a, %a)
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from aot.ir.graph import Graph, Node, Value
from aot.rewrite.base import Pass

COMMUTATIVE = frozenset({"add", "mul", "max", "min", "and", "or", "xor"})


class _ArrayKey:
    """An array attribute as a dict key: equal when dtype, shape and bytes are. The hash reads
    only the ends of the data (hashing all of it cost 0.2 s of resnet18's compile); arrays
    whose ends match are then compared whole, which only merged weights usually get to."""

    __slots__ = ("data", "_hash")

    def __init__(self, value: np.ndarray):
        self.data = np.ascontiguousarray(value)
        flat = self.data.reshape(-1)
        self._hash = hash((self.data.dtype.str, self.data.shape, flat[:64].tobytes(), flat[-64:].tobytes()))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _ArrayKey) and self._hash == other._hash and self.data.dtype == other.data.dtype
                and self.data.shape == other.data.shape and self.data.tobytes() == other.data.tobytes())


def _attr_key(value: Any) -> Hashable:
    if isinstance(value, np.ndarray):
        if value.dtype == object:  # strings: their bytes would be pointers
            return ("objects", value.shape, tuple(value.reshape(-1).tolist()))
        return ("array", _ArrayKey(value))
    if isinstance(value, tuple):
        return tuple(_attr_key(v) for v in value)
    if isinstance(value, float) and value != value:
        return ("nan",)
    return (type(value).__name__, value)


def node_key(node: Node, number: dict[int, int]) -> Hashable:
    """What makes two nodes compute the same value: op, input numbers, attributes, type."""
    inputs = [number[id(v)] for v in node.inputs]
    if node.op in COMMUTATIVE:
        inputs.sort()
    attrs = tuple((k, _attr_key(node.attrs[k])) for k in sorted(node.attrs))
    return (node.op, tuple(inputs), attrs, str(node.out.type))


class CommonSubexprElim(Pass):
    name = "cse"

    def run(self, graph: Graph) -> bool:
        # value numbers by position: deterministic, and equal values share a number
        number: dict[int, int] = {id(v): i for i, v in enumerate(graph.inputs)}
        first: dict[Hashable, Value] = {}
        replaced: dict[int, Value] = {}
        dead: list[Node] = []
        for node in graph.nodes:
            node.inputs = [replaced.get(id(v), v) for v in node.inputs]
            key = node_key(node, number)
            earlier = first.get(key)
            if earlier is None:
                first[key] = node.out
                number[id(node.out)] = len(number)
            else:
                replaced[id(node.out)] = earlier
                number[id(node.out)] = number[id(earlier)]
                dead.append(node)
        graph.outputs = [replaced.get(id(v), v) for v in graph.outputs]
        graph.remove_nodes(dead)
        self.summary = f"{len(dead)} duplicate node(s) merged" if dead else "no duplicates"
        return bool(dead)
