"""ONNX front end: `import_onnx(model, shapes) -> Graph`.

    graph = import_onnx("resnet.onnx", shapes={"data": (1, 3, 224, 224)})

Each ONNX node lowers to primitive ops (see lower.OP_TABLE); the result is
verified before it is returned. Graph input and output names are the ONNX
names exactly ('gpu_0/data_0', 'x:0'); only the IR values behind them get
identifiers in the IR's [A-Za-z0-9_.] alphabet.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

import onnx

from aot.ir import Graph

from .loader import default_opset, load_model, resolve_inputs
from .lower import OP_TABLE, lower_graph, supported_ops

__all__ = ["import_onnx", "supported_ops", "OP_TABLE"]


def import_onnx(
    model: str | os.PathLike | onnx.ModelProto,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    data: bytes | None = None,
) -> Graph:
    """Read an ONNX model (path or ModelProto) and lower it to a verified IR Graph.

    `shapes` fixes symbolic or unknown input dims (the CLI's --shape); `data`, the file's
    bytes where the caller read them already.
    Raises ModelError for unreadable or malformed models and wrong shapes,
    UnsupportedError for ops, dtypes or attributes aot does not compile.
    """
    proto = load_model(model, data)
    inputs = resolve_inputs(proto.graph, shapes)
    return lower_graph(proto, inputs, default_opset(proto))
