"""Structural and type checks of a Graph; run by the pipeline after every pass."""
from __future__ import annotations

from aot.errors import AotError, IRError
from aot.ir.graph import Graph
from aot.ir.ops import infer_type


def verify_graph(graph: Graph) -> None:
    """Raise IRError naming the first node that breaks an invariant.

    Invariants: names unique; every operand defined earlier (topological
    order); each node's type equals its op's shape rule; outputs defined.
    """
    defined: set[int] = set()
    names: set[str] = set()
    for value in graph.inputs:
        if value.name in names:
            raise IRError(f"parameter %{value.name} defined twice")
        names.add(value.name)
        defined.add(id(value))
    for node in graph.nodes:
        where = f"node %{node.out.name} = {node.op}" + (f" (from {node.loc})" if node.loc else "")
        for operand in node.inputs:
            if id(operand) not in defined:
                raise IRError(f"{where}: operand %{operand.name} is not defined before use")
        if node.out.producer is not node:
            raise IRError(f"{where}: result's producer link is broken")
        if node.out.name in names:
            raise IRError(f"{where}: value name defined twice")
        try:
            expected = infer_type(node.op, [v.type for v in node.inputs], node.attrs)
        except AotError as err:
            raise IRError(f"{where}: {err}") from None
        if expected != node.out.type:
            raise IRError(f"{where}: type is {node.out.type} but the op's shape rule gives {expected}")
        names.add(node.out.name)
        defined.add(id(node.out))
    if len(graph.outputs) != len(graph.output_names):
        raise IRError("graph outputs and output names differ in length")
    if len(set(graph.input_names)) != len(graph.input_names):
        raise IRError(f"graph input names are not unique: {graph.input_names}")
    if len(set(graph.output_names)) != len(graph.output_names):
        raise IRError(f"graph output names are not unique: {graph.output_names}")
    for value in graph.outputs:
        if id(value) not in defined:
            raise IRError(f"graph output %{value.name} is not defined")
