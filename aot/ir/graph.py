"""Graph IR: SSA values, single-result nodes, and the graph that orders them.

A Graph holds its nodes in a valid execution (topological) order. Each node
produces exactly one Value. Constants are nodes of op "constant" whose
`value` attribute holds a numpy array, so passes treat them like any other
node. Users are computed on demand (`Graph.users`) rather than maintained,
which keeps rewrites simple and never stale.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.types import TensorType


class Value:
    """One SSA tensor. `producer` is None for graph inputs."""

    __slots__ = ("name", "type", "producer")

    def __init__(self, name: str, type: TensorType, producer: Node | None = None):
        self.name = name
        self.type = type
        self.producer = producer

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Node:
    """An op applied to input values, producing one output value.

    `loc` names where the node came from (e.g. the ONNX node name) so errors
    and dumps can point back at the source model.
    """

    __slots__ = ("op", "inputs", "attrs", "out", "loc")

    def __init__(self, op: str, inputs: Sequence[Value], attrs: dict[str, Any], out: Value, loc: str = ""):
        self.op = op
        self.inputs = list(inputs)
        self.attrs = dict(attrs)
        self.out = out
        self.loc = loc
        out.producer = self

    def __repr__(self) -> str:
        ins = ", ".join(f"%{v.name}" for v in self.inputs)
        return f"%{self.out.name} = {self.op}({ins})"


class Graph:
    """Inputs, ordered nodes, and named outputs."""

    def __init__(self, name: str = "main"):
        self.name = name
        self.inputs: list[Value] = []
        self.input_names: list[str] = []  # names as the source model spells them
        self.nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.output_names: list[str] = []
        self._names: set[str] = set()
        self._counter = 0

    # -- construction -------------------------------------------------------
    def add_input(self, name: str, type: TensorType) -> Value:
        """An input called `name` exactly as the source model spells it ('gpu_0/data_0', 'x:0').

        Only its IR value gets an identifier derived from `name` (see `fresh_name`); the
        manifest, the runtime and every feed use `name` itself, kept in `input_names`.
        """
        value = Value(self._claim(self.fresh_name(name)), type)
        self.inputs.append(value)
        self.input_names.append(name)
        return value

    def add_output(self, value: Value, name: str | None = None) -> None:
        self.outputs.append(value)
        self.output_names.append(name if name is not None else value.name)

    def fresh_name(self, hint: str = "") -> str:
        """A value name not used yet in this graph, derived from `hint`."""
        base = _sanitize(hint) if hint else ""
        if base and base not in self._names:
            return base
        while True:
            candidate = f"{base}.{self._counter}" if base else str(self._counter)
            self._counter += 1
            if candidate not in self._names:
                return candidate

    def _claim(self, name: str) -> str:
        name = _sanitize(name)
        if name in self._names:
            raise IRError(f"value name '%{name}' defined twice")
        self._names.add(name)
        return name

    def make_node(
        self,
        op: str,
        inputs: Sequence[Value],
        attrs: dict[str, Any],
        out_type: TensorType,
        *,
        name: str = "",
        loc: str = "",
        index: int | None = None,
    ) -> Node:
        """Create a node (its output named `name` or a fresh name) and insert it.

        `index` is the position in `nodes`; None appends.
        """
        out = Value(self._claim(name) if name else self._claim(self.fresh_name()), out_type)
        node = Node(op, inputs, attrs, out, loc)
        if index is None:
            self.nodes.append(node)
        else:
            self.nodes.insert(index, node)
        return node

    # -- queries ------------------------------------------------------------
    def users(self) -> dict[int, list[Node]]:
        """Map id(value) -> nodes that read it, in node order (a node reading a value twice appears twice)."""
        result: dict[int, list[Node]] = {}
        for node in self.nodes:
            for value in node.inputs:
                result.setdefault(id(value), []).append(node)
        return result

    def output_ids(self) -> set[int]:
        return {id(v) for v in self.outputs}

    def values(self) -> Iterable[Value]:
        yield from self.inputs
        for node in self.nodes:
            yield node.out

    def constant_value(self, value: Value) -> np.ndarray | None:
        node = value.producer
        if node is not None and node.op == "constant":
            return node.attrs["value"]
        return None

    # -- rewriting ----------------------------------------------------------
    def replace_uses(self, old: Value, new: Value) -> None:
        """Make every reader of `old` (nodes and graph outputs) read `new`."""
        if old.type != new.type:
            raise IRError(f"cannot replace %{old.name}: {old.type} with %{new.name}: {new.type}")
        for node in self.nodes:
            if any(v is old for v in node.inputs):
                node.inputs = [new if v is old else v for v in node.inputs]
        self.outputs = [new if v is old else v for v in self.outputs]

    def rename(self, value: Value, name: str) -> bool:
        """Give `value` the name `name` if it is free (so dumps diff cleanly across rewrites)."""
        if name in self._names:
            return False
        self._names.discard(value.name)
        value.name = name
        self._names.add(name)
        return True

    def remove_nodes(self, dead: Iterable[Node]) -> None:
        dead_ids = {id(n) for n in dead}
        for node in self.nodes:
            if id(node) in dead_ids:
                self._names.discard(node.out.name)
        self.nodes = [n for n in self.nodes if id(n) not in dead_ids]

    def index_of(self, node: Node) -> int:
        for i, candidate in enumerate(self.nodes):
            if candidate is node:
                return i
        raise IRError(f"node {node} is not in graph @{self.name}")

    def __str__(self) -> str:
        from aot.ir.printer import print_graph

        return print_graph(self)


def _sanitize(name: str) -> str:
    """Value names are [A-Za-z0-9_.]+ so they print and parse without quoting."""
    cleaned = "".join(ch if (ch.isascii() and (ch.isalnum() or ch in "_.")) else "_" for ch in name)
    return cleaned or "v"
