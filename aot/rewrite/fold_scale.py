"""Fold per-channel scales (what BatchNormalization lowers to) into conv/dot weights.

Inference BatchNorm is y = x * s + t with s, t constant per channel. After a
conv (or a dot with constant weights) the multiply is folded into the weights
once, here, and the shift merges with the bias, so the kernel runs just
conv + bias. Three rules, applied to a fixed point by the pipeline:

    mul(conv(x, W), bcast(s))            -> conv(x, W * s[o])          # (x*W)*s = x*(W*s)
    mul(add(y, bcast(b)), bcast(s))      -> add(mul(y, bcast(s)), bcast(b*s))   # (y+b)*s = y*s + b*s
    add(add(y, bcast(b1)), bcast(b2))    -> add(y, bcast(b1 + b2))     # (y+b1)+b2 = y+(b1+b2)

The scale is a constant per output channel: a vector broadcast along the
output-channel dim (dim 1 of conv, the last dim of a dot whose weights have
one free dim), or a scalar. Only single-use producers are rewritten: another
reader of the unscaled value would otherwise need it computed twice.
"""
from __future__ import annotations

import numpy as np

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.ir.ops.linalg import dot_free_dims
from aot.rewrite.base import Pass
from aot.rewrite.rules import RuleTable, apply_rules, format_counts


def channel_constant(value: Value, channel_dim: int) -> np.ndarray | None:
    """The per-channel vector (length of `channel_dim`) that `value` broadcasts, or None.

    Accepts a broadcast of a scalar or of a vector along `channel_dim` alone, from a constant.
    """
    node = value.producer
    if node is None or node.op != "broadcast":
        return None
    source = node.inputs[0].producer
    if source is None or source.op != "constant":
        return None
    array: np.ndarray = source.attrs["value"]
    channels = value.type.shape[channel_dim]
    if array.size == 1:
        return np.full(channels, array.reshape(-1)[0], dtype=array.dtype)
    if node.attrs["dims"] == (channel_dim,) and array.shape == (channels,):
        return array
    return None


def _channel_dim(producer: Node) -> int | None:
    """Output dim that indexes the weights' output channel, for conv and dot."""
    if producer.op == "conv":
        return 1
    if producer.op == "dot":
        rhs = producer.inputs[1]
        free = dot_free_dims(rhs.type.rank, producer.attrs["rhs_batch"], producer.attrs["rhs_contract"])
        return producer.out.type.rank - 1 if len(free) == 1 and not producer.attrs["rhs_batch"] else None
    return None


def _single_use(value: Value, uses: dict[int, int]) -> bool:
    return uses.get(id(value), 0) == 1


class FoldScale(Pass):
    """Fold constant per-channel mul/add chains into conv/dot weights and one bias."""

    name = "fold-scale"

    def __init__(self) -> None:
        self.summary = ""

    def run(self, graph: Graph) -> bool:
        uses: dict[int, int] = {}
        for node in graph.nodes:
            for v in node.inputs:
                uses[id(v)] = uses.get(id(v), 0) + 1
        for v in graph.outputs:
            uses[id(v)] = uses.get(id(v), 0) + 2  # an output is always read outside the graph

        def scale_weights(node: Node, b: Builder) -> Value | None:
            # mul(conv(x, W), bcast(s)) -> conv(x, W * s[o])
            for product, scale_value in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
                producer = product.producer
                if producer is None or not _single_use(product, uses):
                    continue
                dim = _channel_dim(producer)
                if dim is None:
                    continue
                weights = graph.constant_value(producer.inputs[1])
                if weights is None or weights.dtype.kind != "f":
                    continue  # integer weights cannot absorb a scale exactly
                scale = channel_constant(scale_value, dim)
                if scale is None:
                    continue
                axis = 0 if producer.op == "conv" else dot_free_dims(
                    weights.ndim, producer.attrs["rhs_batch"], producer.attrs["rhs_contract"])[0]
                shape = [1] * weights.ndim
                shape[axis] = -1
                if scale.dtype == weights.dtype:
                    # the exact product rounded once, as the float64 route below gives it, without
                    # widening the whole weight (resnet18: 47 MB; ~0.1 s of each compile)
                    product = weights * scale.reshape(shape)
                else:
                    product = (weights.astype(np.float64) * scale.astype(np.float64).reshape(shape)).astype(weights.dtype)
                folded = b.constant(product)
                return b.op(producer.op, [producer.inputs[0], folded], **producer.attrs)
            return None

        def scale_through_bias(node: Node, b: Builder) -> Value | None:
            # mul(add(y, bcast(c)), bcast(s)) -> add(mul(y, bcast(s)), bcast(c*s))
            for total, scale_value in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
                add = total.producer
                if add is None or add.op != "add" or not _single_use(total, uses):
                    continue
                for y, bias_value in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
                    if y.producer is None or _channel_dim(y.producer) is None:
                        continue
                    dim = _channel_dim(y.producer)
                    bias = channel_constant(bias_value, dim)
                    scale = channel_constant(scale_value, dim)
                    if bias is None or scale is None:
                        continue
                    scaled = b.op("mul", [y, scale_value])
                    return b.op("add", [scaled, _channel_broadcast(b, bias * scale, node.out.type.shape, dim)])
            return None

        def merge_biases(node: Node, b: Builder) -> Value | None:
            # add(add(y, bcast(b1)), bcast(b2)) -> add(y, bcast(b1 + b2))
            for total, outer_value in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
                add = total.producer
                if add is None or add.op != "add" or not _single_use(total, uses):
                    continue
                for y, inner_value in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
                    dim = _channel_dim(y.producer) if y.producer is not None else None
                    if dim is None:
                        continue
                    b1, b2 = channel_constant(inner_value, dim), channel_constant(outer_value, dim)
                    if b1 is None or b2 is None:
                        continue
                    return b.op("add", [y, _channel_broadcast(b, b1 + b2, node.out.type.shape, dim)])
            return None

        rules: RuleTable = {
            "mul": [("mul into weights", scale_weights), ("scale moved before bias", scale_through_bias)],
            "add": [("biases merged", merge_biases)],
        }
        counts = apply_rules(graph, rules)
        self.summary = format_counts(counts)
        return bool(counts)


def _channel_broadcast(b: Builder, vector: np.ndarray, shape: tuple[int, ...], dim: int) -> Value:
    return b.op("broadcast", [b.constant(vector)], dims=(dim,), shape=shape)
