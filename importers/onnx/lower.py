"""ONNX graph -> IR graph: node-by-node lowering through the op table.

The op table maps an ONNX op_type (default domain) to a function
`(ctx, args) -> list of output Values`. Every node is checked against the
table before any is lowered, so a model with several unsupported ops fails
once, listing all of them.
"""
from __future__ import annotations

from collections.abc import Callable

import onnx

from aot.errors import AotError, IRError, ModelError, UnsupportedError
from aot.ir import Graph, Value
from aot.ir.types import TensorType
from aot.ir.verifier import verify_graph
from aot.passes.dce import DeadCodeElim

from . import ops_attention, ops_control, ops_elementwise, ops_index, ops_loss, ops_ml, ops_nn, ops_quant, ops_reduce, ops_resize, ops_rnn, ops_sample, ops_shape, ops_trees
from .context import Ctx, NodeArgs, parse_attrs
from .loader import InputSpec

Lowering = Callable[[Ctx, NodeArgs], list[Value]]

OP_TABLE: dict[str, Lowering] = {}
for _module in (ops_elementwise, ops_attention, ops_control, ops_index, ops_loss, ops_nn, ops_quant, ops_reduce, ops_resize, ops_rnn, ops_sample, ops_shape):
    for _op_type, _fn in _module.OPS.items():
        assert _op_type not in OP_TABLE, _op_type
        OP_TABLE[_op_type] = _fn

DEFAULT_DOMAINS = ("", "ai.onnx")
# op tables by node domain: the ai.onnx.ml ops (classic ML pipelines) are accepted in their own domain only
DOMAIN_TABLES: dict[str, dict[str, Lowering]] = {"": OP_TABLE, "ai.onnx": OP_TABLE, "ai.onnx.ml": {**ops_ml.OPS, **ops_trees.OPS}}


def supported_ops() -> list[str]:
    return sorted(OP_TABLE)


def node_name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


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
    ctx = Ctx(graph, opset)
    for spec in inputs:
        ctx.env[spec.name] = graph.add_input(spec.name, TensorType(spec.dtype, spec.shape))
    input_names = {spec.name for spec in inputs}
    for init in onnx_graph.initializer:
        if init.name not in input_names:
            ctx.pending[init.name] = init
    for init in onnx_graph.sparse_initializer:
        raise UnsupportedError(f"sparse initializer '{init.values.name}' is not supported")

    for index, node in enumerate(onnx_graph.node):
        _lower_node(ctx, node, index)

    for out in onnx_graph.output:
        if out.name in ctx.unavailable:
            raise UnsupportedError(ctx.unavailable[out.name])
        if out.name not in ctx.env and out.name not in ctx.pending:
            raise ModelError(f"graph output '{out.name}' is not produced by any node")
        graph.add_output(ctx.value(out.name), out.name)
    # drop folded shape subgraphs and constants folded into others
    DeadCodeElim().run(graph)
    verify_graph(graph)
    return graph


def _lower_node(ctx: Ctx, node: onnx.NodeProto, index: int) -> None:
    name = node_name(node, index)
    ctx.node_name, ctx.node_op = name, node.op_type
    ctx.b.loc = name
    operands: list[Value | None] = []
    for input_name in node.input:
        if not input_name:
            operands.append(None)
            continue
        if input_name in ctx.unavailable:
            raise UnsupportedError(ctx.unavailable[input_name])
        if input_name not in ctx.env and input_name not in ctx.pending:
            raise ModelError(f"node '{name}' ({node.op_type}) reads '{input_name}', which is defined nowhere before it")
        operands.append(ctx.value(input_name))
    args = NodeArgs(node, operands, parse_attrs(node))
    try:
        outputs = DOMAIN_TABLES[node.domain or ""][node.op_type](ctx, args)
    except AotError as err:
        if name in str(err):
            raise
        # a shape rule refusing the operands means the model is inconsistent, not that the IR is broken
        kind = ModelError if isinstance(err, IRError) else type(err)
        raise kind(f"node '{name}' ({node.op_type}, opset {ctx.opset}): {err}") from None
    for i, out_name in enumerate(node.output):
        if not out_name:
            continue
        if i >= len(outputs) or outputs[i] is None:
            # only an error if something reads it (Dropout's mask, MaxPool's indices)
            ctx.unavailable[out_name] = f"node '{name}' ({node.op_type}, opset {ctx.opset}): output {i} ('{out_name}') is not supported"
            continue
        ctx.env[out_name] = outputs[i]


def _sanitized_graph_name(name: str) -> str:
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.") else "_" for ch in name)
    return cleaned or "main"
