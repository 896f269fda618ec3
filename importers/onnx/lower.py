"""ONNX graph -> IR graph: node-by-node lowering through the op table.

The op table maps an ONNX op_type (default domain) to a function
`(ctx, args) -> list of output Values`; it is assembled here from the op
modules and handed to the Ctx, which lowers each node (Ctx.lower_node).
Every node is checked against the table before any is lowered, so a model
with several unsupported ops fails once, listing all of them.

Lowering node by node leaves dead nodes behind (shape subgraphs folded to
constants, weights folded into others, a branch that cannot run at the
compiled shapes): the pipeline's first step removes them (aot/pipeline.py).
"""
from __future__ import annotations

import onnx

from aot.errors import ModelError, UnsupportedError
from aot.ir import Graph
from aot.ir.types import TensorType
from aot.ir.verifier import verify_graph

from . import ops_attention, ops_control, ops_elementwise, ops_index, ops_llm, ops_loss, ops_ml, ops_nn, ops_quant, ops_reduce, ops_resize, ops_rnn, ops_sample, ops_shape, ops_trees
from .context import Ctx, Lowering, node_name
from .loader import InputSpec

OP_TABLE: dict[str, Lowering] = {}
for _module in (ops_elementwise, ops_attention, ops_control, ops_index, ops_llm, ops_loss, ops_nn, ops_quant, ops_reduce, ops_resize, ops_rnn, ops_sample, ops_shape):
    for _op_type, _fn in _module.OPS.items():
        assert _op_type not in OP_TABLE, _op_type
        OP_TABLE[_op_type] = _fn

DEFAULT_DOMAINS = ("", "ai.onnx")
# op tables by node domain: the ai.onnx.ml ops (classic ML pipelines) are accepted in their own domain only
DOMAIN_TABLES: dict[str, dict[str, Lowering]] = {"": OP_TABLE, "ai.onnx": OP_TABLE, "ai.onnx.ml": {**ops_ml.OPS, **ops_trees.OPS}}


def supported_ops() -> list[str]:
    return sorted(OP_TABLE)


def check_supported(graph: onnx.GraphProto, opsets: dict[str, int]) -> None:
    problems = []
    for index, node in enumerate(graph.node):
        domain = node.domain or ""
        if node.op_type in DOMAIN_TABLES.get(domain, {}):
            continue
        if domain in DEFAULT_DOMAINS:
            where = f"opset {opsets.get('', opsets.get('ai.onnx', 0))}"
        else:
            where = f"domain '{domain}' opset {opsets.get(domain, '?')}"
        problems.append(f"  node '{node_name(node, index)}' ({node.op_type}, {where})")
    if problems:
        raise UnsupportedError(f"model uses {len(problems)} unsupported op(s):\n" + "\n".join(problems))


def lower_graph(proto: onnx.ModelProto, inputs: list[InputSpec], opset: int) -> Graph:
    onnx_graph = proto.graph
    opsets = {entry.domain: int(entry.version) for entry in proto.opset_import}
    check_supported(onnx_graph, opsets)

    graph = Graph(_sanitized_graph_name(onnx_graph.name))
    ctx = Ctx(graph, opset, DOMAIN_TABLES)
    for spec in inputs:
        ctx.env[spec.name] = graph.add_input(spec.name, TensorType(spec.dtype, spec.shape))
    input_names = {spec.name for spec in inputs}
    for init in onnx_graph.initializer:
        if init.name not in input_names:
            ctx.pending[init.name] = init
    for init in onnx_graph.sparse_initializer:
        raise UnsupportedError(f"sparse initializer '{init.values.name}' is not supported")

    for index, node in enumerate(onnx_graph.node):
        ctx.lower_node(node, index)

    for out in onnx_graph.output:
        if out.name in ctx.unavailable:
            raise UnsupportedError(ctx.unavailable[out.name])
        if out.name not in ctx.env and out.name not in ctx.pending:
            raise ModelError(f"graph output '{out.name}' is not produced by any node")
        graph.add_output(ctx.value(out.name), out.name)
    verify_graph(graph)
    return graph


def _sanitized_graph_name(name: str) -> str:
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.") else "_" for ch in name)
    return cleaned or "main"
