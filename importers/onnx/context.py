"""Lowering context: the environment of ONNX names and helpers shared by op lowerings.

`Ctx.op` folds an op whose operands are all constants into a constant when
the result is small or no larger than its operands, so shape subgraphs
(Shape -> Gather -> Concat -> Reshape) resolve at import while a scalar
broadcast to an activation's shape stays a broadcast (folding it would turn
one number into a weight).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from aot.errors import AotError, IRError, ModelError, UnsupportedError
from aot.ir import Builder, DType, Graph, Value
from aot.ir.builder import normalize_attr
from aot.ir.types import FLOAT8_FORMATS
from aot.ir.types import TensorType
from aot.ir.ops import evaluate, infer_type
from aot.registry import registry

from .loader import tensor_to_array

# Fold results up to this many elements even when they grow (shape vectors, small masks).
FOLD_SMALL_ELEMENTS = 64


class Ctx:
    """State of one import: the IR graph, ONNX name -> Value, and the node being lowered."""

    def __init__(self, graph: Graph, opset: int, tables: Mapping[str, Mapping[str, Lowering]]):
        self.graph = graph
        self.opset = opset
        self.tables = tables  # node domain -> ONNX op type -> lowering
        self.env: dict[str, Value] = {}
        self.pending: dict[str, onnx.TensorProto] = {}  # initializers not materialised yet
        self.unavailable: dict[str, str] = {}  # outputs aot does not produce -> why
        self.b = Builder(graph)

    # -- nodes ----------------------------------------------------------------
    def lower_node(self, node: onnx.NodeProto, index: int) -> None:
        """Lower one ONNX node through the op tables, binding its outputs' names.

        Subgraphs (If, Loop, Scan) come back here for their nodes: the tables
        are the context's, so the op modules need not import the one that
        assembles them.
        """
        name = node_name(node, index)
        self.node_name, self.node_op = name, node.op_type
        self.b.loc = name
        operands: list[Value | None] = []
        for input_name in node.input:
            if not input_name:
                operands.append(None)
                continue
            if input_name in self.unavailable:
                raise UnsupportedError(self.unavailable[input_name])
            if input_name not in self.env and input_name not in self.pending:
                raise ModelError(f"node '{name}' ({node.op_type}) reads '{input_name}', which is defined nowhere before it")
            operands.append(self.value(input_name))
        args = NodeArgs(node, operands, parse_attrs(node))
        try:
            outputs = self.tables[node.domain or ""][node.op_type](self, args)
        except AotError as err:
            if name in str(err):
                raise
            # a shape rule refusing the operands means the model is inconsistent, not that the IR is broken
            kind = ModelError if isinstance(err, IRError) else type(err)
            raise kind(f"node '{name}' ({node.op_type}, opset {self.opset}): {err}") from None
        for i, out_name in enumerate(node.output):
            if not out_name:
                continue
            if i >= len(outputs) or outputs[i] is None:
                # only an error if something reads it (Dropout's mask, MaxPool's indices)
                self.unavailable[out_name] = (f"node '{name}' ({node.op_type}, opset {self.opset}): "
                                              f"output {i} ('{out_name}') is not supported")
                continue
            self.env[out_name] = outputs[i]

    # -- values -------------------------------------------------------------
    def value(self, name: str) -> Value:
        if name not in self.env and name in self.pending:
            array = tensor_to_array(self.pending.pop(name), f"initializer '{name}'")
            self.env[name] = Builder(self.graph).constant(array, name=self.graph.fresh_name(name))
        return self.env[name]

    def const(self, v: Value | None) -> np.ndarray | None:
        return None if v is None else self.graph.constant_value(v)

    # -- op emission ----------------------------------------------------------
    def op(self, op: str, inputs: Sequence[Value], **attrs: Any) -> Value:
        arrays = [self.graph.constant_value(v) for v in inputs]
        if inputs and all(a is not None for a in arrays):
            norm = {k: normalize_attr(v) for k, v in attrs.items()}
            out_type = infer_type(op, [v.type for v in inputs], norm)
            largest = max(a.size for a in arrays)
            if out_type.size <= max(largest, FOLD_SMALL_ELEMENTS):
                return self.constant(evaluate(op, arrays, norm, out_type))
        return self.b.op(op, inputs, **attrs)

    def constant(self, array: np.ndarray | float | int | bool, dtype: DType | None = None) -> Value:
        return self.b.constant(array, dtype)

    def scalar(self, value: float | int | bool, dtype: DType) -> Value:
        return self.b.constant(np.array(value).astype(dtype.to_numpy()))

    def full(self, value: float | int | bool, type: TensorType) -> Value:
        """`value` broadcast to `type` (a scalar constant plus a broadcast, never a folded weight)."""
        s = self.scalar(value, type.dtype)
        if type.shape == ():
            return s
        return self.op("broadcast", [s], shape=type.shape, dims=())

    # -- shape helpers --------------------------------------------------------
    def broadcast_to(self, v: Value, shape: Sequence[int]) -> Value:
        """Numpy-style (right-aligned) broadcast of `v` to `shape`."""
        shape = tuple(shape)
        if v.type.shape == shape:
            return v
        offset = len(shape) - v.type.rank
        return self.op("broadcast", [v], shape=shape, dims=tuple(range(offset, len(shape))))

    def broadcast_in_dims(self, v: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        if v.type.shape == tuple(shape) and tuple(dims) == tuple(range(len(shape))):
            return v
        return self.op("broadcast", [v], shape=tuple(shape), dims=tuple(dims))

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        shape = tuple(int(d) for d in shape)
        if v.type.shape == shape:
            return v
        return self.op("reshape", [v], shape=shape)

    def transpose(self, v: Value, perm: Sequence[int]) -> Value:
        perm = tuple(perm)
        if perm == tuple(range(len(perm))):
            return v
        return self.op("transpose", [v], perm=perm)

    def convert(self, v: Value, dtype: DType, saturate: bool = True) -> Value:
        """v in `dtype`. To float8 the IR's convert saturates (ONNX Cast's default, saturate=1);
        saturate=False gives what ONNX's saturate=0 does: a finite value that rounds past the
        largest float8 value, or an infinity, becomes infinity (e5m2) or NaN (the others)."""
        if v.type.dtype is dtype:
            return v
        out = self.op("convert", [v], dtype=dtype)
        if saturate or not dtype.is_float8 or not v.type.dtype.is_float:
            return out
        fmt = FLOAT8_FORMATS[dtype]
        threshold, inclusive = fmt.overflow_threshold()
        magnitude = self.op("abs", [v])
        past = self.op("compare", [magnitude, self.full(threshold, magnitude.type)], direction="ge" if inclusive else "gt")
        if fmt.inf_code is None:
            special = self.full(float("nan"), out.type)
        else:
            negative = self.op("compare", [v, self.full(0.0, v.type)], direction="lt")
            special = self.op("select", [negative, self.full(float("-inf"), out.type), self.full(float("inf"), out.type)])
        return self.op("select", [past, special, out])

    def binary(self, op: str, a: Value, b: Value, **attrs: Any) -> Value:
        """Elementwise binary op with ONNX multidirectional broadcasting."""
        shape = broadcast_shape(self, a.type.shape, b.type.shape)
        return self.op(op, [self.broadcast_to(a, shape), self.broadcast_to(b, shape)], **attrs)

    def binary_scalar(self, op: str, a: Value, value: float | int) -> Value:
        return self.op(op, [a, self.full(value, a.type)])

    def reduce(self, v: Value, kind: str, axes: Sequence[int], keepdims: bool = False) -> Value:
        axes = tuple(sorted(set(axes)))
        out = self.op("reduce", [v], kind=kind, axes=axes)
        if keepdims:
            out = self.reshape(out, [1 if i in axes else d for i, d in enumerate(v.type.shape)])
        return out

    def unreduce(self, v: Value, shape: Sequence[int], axes: Sequence[int]) -> Value:
        """Broadcast a reduced value (axes removed) back to `shape`."""
        kept = tuple(i for i in range(len(shape)) if i not in set(axes))
        return self.broadcast_in_dims(v, shape, kept)

    # -- errors ---------------------------------------------------------------
    def unsupported(self, what: str) -> UnsupportedError:
        return UnsupportedError(f"node '{self.node_name}' ({self.node_op}, opset {self.opset}): {what}")

    def error(self, what: str) -> ModelError:
        return ModelError(f"node '{self.node_name}' ({self.node_op}, opset {self.opset}): {what}")

    node_name = ""
    node_op = ""


def broadcast_shape(ctx: Ctx, *shapes: Sequence[int]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ctx.error(f"operand shapes {[list(s) for s in shapes]} do not broadcast") from None


@dataclass
class NodeArgs:
    """One ONNX node as a lowering sees it: operand Values (None where omitted) and attributes."""

    node: onnx.NodeProto
    inputs: list[Value | None]
    attrs: dict[str, Any] = field(default_factory=dict)

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def input(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None

    @property
    def num_outputs(self) -> int:
        return len(self.node.output)


def node_name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def parse_attrs(node: onnx.NodeProto) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        attrs[attr.name] = value
    return attrs


def norm_axis(ctx: Ctx, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.unsupported(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


Lowering = Callable[[Ctx, NodeArgs], list[Value]]


def op_registry() -> tuple[dict[str, Lowering], Callable[..., Callable[[Lowering], Lowering]]]:
    """A module's op table and its `@op("OpType", ...)` decorator."""
    return registry()


def static_ints(ctx: Ctx, v: Value | None, what: str) -> list[int] | None:
    """The integer contents of a compile-time-known operand (None if the operand is omitted)."""
    if v is None:
        return None
    array = ctx.const(v)
    if array is None:
        raise ctx.unsupported(f"{what} must be known at compile time (an initializer, a Constant, or foldable)")
    return [int(x) for x in array.reshape(-1)]


def take_index(ctx: Ctx, v: Value, axis: int, index: int) -> Value:
    """v[..., index, ...] with `axis` dropped."""
    shape = v.type.shape
    start = [0] * len(shape)
    limit = list(shape)
    start[axis], limit[axis] = index, index + 1
    part = ctx.op("slice", [v], start=tuple(start), limit=tuple(limit), stride=(1,) * len(shape))
    return ctx.reshape(part, shape[:axis] + shape[axis + 1:])
