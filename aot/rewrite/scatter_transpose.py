"""A scatter between a transpose and its inverse becomes one scatter on the untransposed operand.

torch's ONNX exporter writes `cache.index_copy_(dim, index, new)` as Transpose (dim to the
front), ScatterND along the first dim, Transpose back. The scatter then reads and writes a
transposed copy of the whole cache, and the two transposes copy it twice more; scattered
into the cache itself, only the updated windows are written (in place, when the cache is
donated: planning/donation.py). Dims map through the permutation: operand dim d of the
transposed scatter is dim p[d] of the cache; the update's window dims are transposed to
the order of the cache dims they land on. Semantics are unchanged: each update's window
and whether it fits are per dim, and the updates apply in the same order.

before: %t = transpose(%x) {perm = p}; %s = scatter(%t, %i, %u); %y = transpose(%s) {perm = p^-1}
after:  %u2 = transpose(%u) {perm = window dims reordered}; %y = scatter(%x, %i, %u2)
Only where every reader of the transposed scatter is a transpose (else it would be computed
twice): each becomes a transpose of the new scatter (none for the inverse), and the new
scatter each one builds is one value after CSE.
"""
from __future__ import annotations

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.ir.ops.indexing import ScatterDims
from aot.rewrite.base import Pass
from aot.rewrite.rules import RuleTable, apply_rules, format_counts


def untransposed_scatter(node: Node, b: Builder, transposed_only: set[int]) -> Value | None:
    # transpose(scatter(transpose(x, p), i, u), q) -> transpose(scatter(x, i, transpose(u)), p[q])
    # (the outer transpose vanishes where q = p^-1)
    scatter = node.inputs[0].producer
    if scatter is None or scatter.op != "scatter" or id(scatter.out) not in transposed_only:
        return None
    inner = scatter.inputs[0].producer
    if inner is None or inner.op != "transpose":
        return None
    p, q = inner.attrs["perm"], node.attrs["perm"]
    x, indices, updates = inner.inputs[0], scatter.inputs[1], scatter.inputs[2]
    dims = ScatterDims(scatter.inputs[0].type, indices.type, updates.type, scatter.attrs)
    if dims.input_batching:
        return None  # batching dims would need their pairing kept too; exporters emit none here
    windows = dims.window_operand_dims  # ascending dims of the transposed operand
    landing = sorted(p[d] for d in windows)  # the same windows, ascending dims of x
    source = {p[d]: k for k, d in enumerate(windows)}  # x dim -> its window's position in the updates
    perm = list(range(updates.type.rank))
    for k, dim in enumerate(landing):
        perm[dims.update_window_dims[k]] = dims.update_window_dims[source[dim]]
    if perm != list(range(updates.type.rank)):
        updates = b.op("transpose", [updates], perm=tuple(perm))
    attrs = dict(scatter.attrs)
    attrs["inserted_window_dims"] = tuple(sorted(p[d] for d in dims.inserted))
    attrs["scatter_dims_to_operand_dims"] = tuple(p[d] for d in dims.to_operand)
    result = b.op("scatter", [x, indices, updates], **attrs)
    order = tuple(p[q[d]] for d in range(len(q)))
    return result if order == tuple(range(len(q))) else b.op("transpose", [result], perm=order)


class ScatterTranspose(Pass):
    """Apply the rewrite above; `summary` says how often it fired."""

    name = "scatter-transpose"

    def __init__(self) -> None:
        self.summary = ""

    def run(self, graph: Graph) -> bool:
        outputs = graph.output_ids()
        # scatters every reader of which is a transpose, none of them a graph output
        transposed_only = {key for key, users in graph.users().items()
                           if key not in outputs and all(u.op == "transpose" for u in users)}

        def rule(node: Node, b: Builder) -> Value | None:
            return untransposed_scatter(node, b, transposed_only)

        table: RuleTable = {"transpose": [("transpose(scatter(transpose)) -> scatter", rule)]}
        counts = apply_rules(graph, table)
        self.summary = format_counts(counts)
        return bool(counts)
