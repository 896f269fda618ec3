"""Text form of the IR. `parse_graph(print_graph(g))` prints back identically.

    graph @main(%x: f32[1,4]) {
      %c = constant() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : f32[4]
      %1 = broadcast(%c) {dims = [1], shape = [1, 4]} : f32[1,4]
      %2 = add(%x, %1) : f32[1,4] loc("Add_0")
      return %2 as "y"
    }

Constants with more than INLINE_LIMIT elements print as `blob<"name">`; pass a
dict as `blobs` to collect their data (and give the same dict to the parser).
"""
from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from aot.ir.types import DType

if TYPE_CHECKING:  # annotations only: graph.py imports this module for Graph.__str__
    from aot.ir.graph import Graph, Node

INLINE_LIMIT = 16


def format_scalar(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    f = float(value)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return repr(f)


def format_dense(array: np.ndarray) -> str:
    def rec(a: np.ndarray) -> str:
        if a.ndim == 0:
            item = a.item()
            return format_scalar(float(item) if a.dtype.kind == "f" or a.dtype.name == "bfloat16" else item)
        return "[" + ", ".join(rec(sub) for sub in a) + "]"

    return f"dense<{rec(np.asarray(array))}>"


def format_attr(value: Any, key: str, node: Node, blobs: dict[str, np.ndarray] | None) -> str:
    if isinstance(value, np.ndarray):
        if value.size > INLINE_LIMIT:
            if blobs is not None:
                blobs[node.out.name] = value
            return f'blob<"{node.out.name}">'
        return format_dense(value)
    if isinstance(value, DType):
        return value.value
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attr(v, key, node, blobs) for v in value) + "]"
    return format_scalar(value)


def print_node(node: Node, blobs: dict[str, np.ndarray] | None = None) -> str:
    ins = ", ".join(f"%{v.name}" for v in node.inputs)
    text = f"%{node.out.name} = {node.op}({ins})"
    if node.attrs:
        items = ", ".join(f"{k} = {format_attr(node.attrs[k], k, node, blobs)}" for k in sorted(node.attrs))
        text += " {" + items + "}"
    text += f" : {node.out.type}"
    if node.loc:
        text += f" loc({json.dumps(node.loc)})"
    return text


def print_graph(graph: Graph, blobs: dict[str, np.ndarray] | None = None) -> str:
    params = ", ".join(
        f"%{v.name}: {v.type}" + (f" as {json.dumps(name)}" if name != v.name else "")
        for v, name in zip(graph.inputs, graph.input_names)
    )
    lines = [f"graph @{graph.name}({params}) {{"]
    lines += [f"  {print_node(node, blobs)}" for node in graph.nodes]
    outs = ", ".join(f"%{v.name} as {json.dumps(name)}" for v, name in zip(graph.outputs, graph.output_names))
    lines.append(f"  return {outs}")
    lines.append("}")
    return "\n".join(lines) + "\n"
