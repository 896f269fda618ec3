"""Graph IR: types, values, nodes, graph, builder, text form, verifier."""
from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.ir.types import DType, TensorType

__all__ = ["Builder", "DType", "Graph", "Node", "TensorType", "Value"]
