"""Builder: create nodes with their output types inferred by the op's shape rule."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.ir.graph import Graph, Value
from aot.ir.ops import infer_type
from aot.ir.types import DType


def normalize_attr(value: Any) -> Any:
    """Attributes are immutable: lists become tuples (recursively), numpy scalars become Python ones."""
    if isinstance(value, (list, tuple)):
        return tuple(normalize_attr(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


class Builder:
    """Appends nodes to `graph` (or inserts them before position `index`, advancing it)."""

    def __init__(self, graph: Graph, index: int | None = None, loc: str = ""):
        self.graph = graph
        self.index = index
        self.loc = loc

    def op(self, op: str, inputs: Sequence[Value], *, name: str = "", **attrs: Any) -> Value:
        attrs = {k: normalize_attr(v) for k, v in attrs.items()}
        out_type = infer_type(op, [v.type for v in inputs], attrs)
        node = self.graph.make_node(op, inputs, attrs, out_type, name=name, loc=self.loc, index=self.index)
        if self.index is not None:
            self.index += 1
        return node.out

    def constant(self, array: np.ndarray | float | int, dtype: DType | None = None, *, name: str = "") -> Value:
        arr = np.asarray(array)
        if dtype is not None:
            arr = arr.astype(dtype.to_numpy())
        arr = np.array(arr, order="C")  # a copy: ascontiguousarray would turn a 0-d array into 1-d
        arr.flags.writeable = False
        return self.op("constant", [], name=name, value=arr)
