"""Per-layer updates of a stacked cache become a chain of updates of the cache itself.

torch's export of a decoder whose cache is one [L, ...] tensor updates each layer's slice
and stacks the results back: present = concat_i(reshape(scatter(reshape(slice(past, i)),
idx_i, u_i))) along the layer axis. Each layer's scatter copies its slice and the concat
copies them all again. As a chain on the whole cache, S_{i+1} = scatter(S_i, (i, idx_i),
u_i) with the layer index an extra component of every index vector, each update writes its
T rows alone (in place when the cache is donated: planning/donation.py), and every other
reader of layer i's update reads layer i of S_{i+1}, which holds exactly what that update
made (later layers' updates have not happened yet, and touch other layers anyway).
Semantics are unchanged: an update's window fits in layer i of the cache exactly where it
fitted in the slice, and the updates apply in the same order.

before: %s0 = scatter(%y0, %i0, %u0)   %y0 = reshape(slice(%past) {layer 0})   (and %s1 ...)
        %present = concat(reshape(%s0), reshape(%s1)) {axis = 0}
after:  %c0 = scatter(%past, concat(0, %i0), %u0); %c1 = scatter(%c0, concat(1, %i1), %u1)
        uses of %present read %c1; of %s0, reshape(slice(%c0) {layer 0}); of %s1, of %c1
Only where the slices are whole layers of one cache, in order, the scatters come in layer
order in the graph, and the reshapes (where there are any) only drop and restore the
layer's unit dim.
"""
from __future__ import annotations

import numpy as np

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.ir.ops.indexing import ScatterDims
from aot.rewrite.base import Pass


class _Layer:
    """One stacked update: its scatter and whether reshapes drop and restore the layer's dim."""

    def __init__(self, scatter: Node, reshaped: bool):
        self.scatter = scatter
        self.reshaped = reshaped


def _layer(value: Value, cache: Value | None, axis: int, layer: int) -> tuple[Value, _Layer] | None:
    """(cache, its update) when `value` is layer `layer` of `cache` (None: any cache) updated
    by a scatter, as concat's input `layer`."""
    node = value.producer
    reshaped = node is not None and node.op == "reshape"
    scatter = node.inputs[0].producer if reshaped else node
    if scatter is None or scatter.op != "scatter" or scatter.attrs.get("input_batching_dims"):
        return None
    if not reshaped and axis in scatter.attrs["scatter_dims_to_operand_dims"]:
        return None  # it indexes the layer dim itself: the layer could not be a component more
    operand = scatter.inputs[0].producer
    if reshaped:
        if operand is None or operand.op != "reshape":
            return None
        operand = operand.inputs[0].producer
    if operand is None or operand.op != "slice":
        return None
    x = operand.inputs[0]
    if cache is not None and x is not cache:
        return None
    whole = tuple(0 if d != axis else layer for d in range(x.type.rank)), \
        tuple(n if d != axis else layer + 1 for d, n in enumerate(x.type.shape))
    if (operand.attrs["start"], operand.attrs["limit"]) != whole or any(s != 1 for s in operand.attrs["stride"]):
        return None
    sliced = operand.out.type.shape
    dropped = sliced[:axis] + sliced[axis + 1:]
    if reshaped and (scatter.inputs[0].type.shape != dropped or value.type.shape != sliced):
        return None
    return x, _Layer(scatter, reshaped)


def _stacked(node: Node) -> tuple[Value, list[_Layer]] | None:
    """The cache and its per-layer updates when `node` is such a concat, in graph order."""
    axis = node.attrs["axis"]
    cache: Value | None = None
    layers: list[_Layer] = []
    for i, value in enumerate(node.inputs):
        found = _layer(value, cache, axis, i)
        if found is None:
            return None
        cache, layer = found
        layers.append(layer)
    if cache is None or cache.type.shape[axis] != len(layers) or cache.type != node.out.type:
        return None
    return cache, layers


def _with_layer(b: Builder, indices: Value, index_vector_dim: int, layer: int) -> Value:
    """`indices` with `layer` as a first component of every index vector."""
    if index_vector_dim == indices.type.rank:  # one-component vectors, implicit: make the dim
        indices = b.op("reshape", [indices], shape=(*indices.type.shape, 1))
    shape = tuple(1 if d == index_vector_dim else n for d, n in enumerate(indices.type.shape))
    first = b.op("broadcast", [b.constant(np.array(layer, indices.type.dtype.to_numpy()))], dims=(), shape=shape)
    return b.op("concat", [first, indices], axis=index_vector_dim)


def _chain(graph: Graph, node: Node, cache: Value, layers: list[_Layer]) -> None:
    axis = node.attrs["axis"]
    current = cache
    for i, layer in enumerate(layers):
        scatter = layer.scatter
        _, indices, updates = scatter.inputs
        dims = ScatterDims(scatter.inputs[0].type, indices.type, updates.type, scatter.attrs)
        # a dim of the update's operand -> the cache's (the layer dim dropped, where reshaped)
        lift = (lambda d: d + 1 if d >= axis else d) if layer.reshaped else (lambda d: d)
        inserted = {lift(d) for d in dims.inserted} | ({axis} if layer.reshaped else set())
        attrs = dict(scatter.attrs, inserted_window_dims=tuple(sorted(inserted)),
                     scatter_dims_to_operand_dims=(axis, *(lift(d) for d in dims.to_operand)))
        b = Builder(graph, graph.index_of(scatter) + 1, loc=scatter.loc)
        vectors = _with_layer(b, indices, dims.index_vector_dim, i)
        current = b.op("scatter", [current, vectors, updates], **attrs)
        rank = cache.type.rank
        start = tuple(i if d == axis else 0 for d in range(rank))
        limit = tuple(i + 1 if d == axis else n for d, n in enumerate(cache.type.shape))
        mine = b.op("slice", [current], start=start, limit=limit, stride=(1,) * rank)
        if layer.reshaped:
            mine = b.op("reshape", [mine], shape=scatter.out.type.shape)
        graph.replace_uses(scatter.out, mine)
    graph.replace_uses(node.out, current)


class StackedUpdates(Pass):
    """Rewrite every such concat (module docstring); `summary` says how many."""

    name = "stacked-updates"

    def __init__(self) -> None:
        self.summary = ""

    def run(self, graph: Graph) -> bool:
        count = 0
        for node in list(graph.nodes):
            found = _stacked(node) if node.op == "concat" else None
            if found is None:
                continue
            cache, layers = found
            positions = [graph.index_of(layer.scatter) for layer in layers]
            if positions != sorted(positions):
                continue  # a later layer's update first: the chain would not be in graph order
            _chain(graph, node, cache, layers)
            count += 1
        self.summary = f"{count} stacked cache update(s) chained" if count else "no change"
        return bool(count)
