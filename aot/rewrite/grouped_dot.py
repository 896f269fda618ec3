"""A dot against a head-repeated operand becomes one dot per kv head over its query-head group.

torch's ONNX export of grouped-query attention repeats each kv head G times (Unsqueeze,
Expand, Reshape: [B, KVH, S, D] -> [B, KVH*G, S, D]) before the dot with the query-side
operand [B, KVH*G, T, .]; on the K side it transposes and scales the repeated keys too.
Fused as a broadcast, the dot streams every key and value G times. The G query heads of
kv head k are heads k*G .. k*G+G-1 (contiguous), so the query side is [B, KVH, G*T, .]
by a reshape and one dot per (batch, kv head) reads the un-repeated operand once, as
importers/onnx/ops_attention.py lowers ONNX Attention's GQA:

before: %r = reshape(broadcast(%x)); [transposes, reshapes, mul by a constant splat]; %y = dot(%a, %r)
after:  %y = reshape(dot(reshape(%a) [B, KVH, G*T, S], layout(%x) [B, KVH, M, N] [* splat]))

The relayout between the broadcast and the dot is followed dim by dim as "atoms" (the
broadcast's result dims larger than 1; a reshape regroups them, a transpose permutes
them); it matches when the dot's head dim holds exactly the kv-head atoms followed by the
repeated one, so the repeat never mixes with another dim. Elementwise ops with a constant
splat commute with the repeat and move onto the un-repeated operand.
"""
from __future__ import annotations

import math

import numpy as np

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.rewrite.base import Pass
from aot.rewrite.rules import RuleTable, apply_rules, format_counts, splat

Atom = tuple[int, int]  # (dim of the broadcast's result, its size > 1)
Dims = list[list[Atom]]  # per dim, the atoms it holds, outermost first
SPLAT_OPS = frozenset({"mul", "div", "add", "sub"})


def _regroup(dims: Dims, shape: tuple[int, ...]) -> Dims | None:
    """The atoms of a reshape to `shape`, or None where it splits an atom."""
    flat = [atom for dim in dims for atom in dim]
    out: Dims = []
    for size in shape:
        group: list[Atom] = []
        while math.prod(a[1] for a in group) < size and flat:
            group.append(flat.pop(0))
        if math.prod(a[1] for a in group) != size:
            return None
        out.append(group)
    return out if not flat else None


def _trace(value: Value) -> tuple[Node, int, Dims, list[tuple[Node, int]]] | None:
    """Walk from a dot operand back to a broadcast that repeats one dim: (the broadcast, the
    repeated dim, the operand's atoms, the splat ops with the index of their non-splat input)."""
    ops: list[Node] = []
    node = value.producer
    while node is not None and node.op != "broadcast":
        if node.op in ("reshape", "transpose"):
            ops.append(node)
            node = node.inputs[0].producer
        elif node.op in SPLAT_OPS:
            kept = [i for i, v in enumerate(node.inputs) if splat(v) is None]
            if len(kept) != 1:
                return None
            ops.append(node)
            node = node.inputs[kept[0]].producer
        else:
            return None
    if node is None:
        return None
    source, shape = node.inputs[0], node.out.type.shape
    into = node.attrs["dims"]
    dims: Dims = [[(d, n)] if n > 1 else [] for d, n in enumerate(shape)]
    splats: list[tuple[Node, int]] = []
    for op in reversed(ops):
        if op.op == "reshape":
            regrouped = _regroup(dims, op.out.type.shape)
            if regrouped is None:
                return None
            dims = regrouped
        elif op.op == "transpose":
            dims = [dims[p] for p in op.attrs["perm"]]
        else:
            splats.append((op, next(i for i, v in enumerate(op.inputs) if splat(v) is None)))
    repeated = [d for d, n in enumerate(shape) if n > 1 and (d not in into or source.type.shape[into.index(d)] == 1)]
    if len(repeated) != 1:
        return None
    return node, repeated[0], dims, splats


def _unreshaped(value: Value) -> Value:
    node = value.producer
    return node.inputs[0] if node is not None and node.op == "reshape" else value


def grouped_dot(node: Node, b: Builder) -> Value | None:
    a, r = node.inputs
    attrs = node.attrs
    if (a.type.rank, r.type.rank) != (4, 4) or attrs["lhs_batch"] != (0, 1) or attrs["rhs_batch"] != (0, 1):
        return None
    if attrs["lhs_contract"] != (3,) or attrs["rhs_contract"] not in ((2,), (3,)):
        return None
    traced = _trace(r)
    if traced is None:
        return None
    bcast, group, dims, splats = traced
    source, into = bcast.inputs[0], bcast.attrs["dims"]
    heads = dims[1]  # kv-head atoms, then the repeat: head kvh*G + g reads kv head kvh
    if not heads or heads[-1][0] != group or any(d == group for dim in (dims[0], dims[2], dims[3]) for d, _ in dim):
        return None
    g = bcast.out.type.shape[group]
    batch, query_heads, rows, width = a.type.shape
    kv_heads = query_heads // g
    # the un-repeated operand: its size-1 dims dropped, atoms in the order the dot reads them
    atoms = [(into[i], n) for i, n in enumerate(source.type.shape) if n > 1]
    wanted = [atom for dim in (dims[0], heads[:-1], dims[2], dims[3]) for atom in dim]
    if sorted(wanted) != sorted(atoms):
        return None
    # the reshape of a reshape is one reshape (torch's Unsqueeze before the Expand)
    x = _unreshaped(source)
    perm = tuple(atoms.index(atom) for atom in wanted)
    if perm != tuple(range(len(perm))):
        if tuple(n for _, n in atoms) != x.type.shape:
            x = b.op("reshape", [x], shape=tuple(n for _, n in atoms))
        x = b.op("transpose", [x], perm=perm)
    shape = (r.type.shape[0], kv_heads, r.type.shape[2], r.type.shape[3])
    if x.type.shape != shape:
        x = b.op("reshape", [x], shape=shape)
    for op, kept in splats:  # a splat reads the same at every position: apply it after the relayout
        other = op.inputs[1 - kept]
        constant = b.constant(np.asarray(splat(other)), other.type.dtype)
        spread = b.op("broadcast", [constant], dims=(), shape=x.type.shape)
        x = b.op(op.op, [x, spread] if kept == 0 else [spread, x])
    lhs = b.op("reshape", [a], shape=(batch, kv_heads, g * rows, width))
    out = b.op("dot", [lhs, x], **attrs)
    return b.op("reshape", [out], shape=node.out.type.shape)


class GroupedDot(Pass):
    """Apply the rewrite above; `summary` says how often it fired."""

    name = "grouped-dot"

    def __init__(self) -> None:
        self.summary = ""

    def run(self, graph: Graph) -> bool:
        table: RuleTable = {"dot": [("dot(a, repeat(x)) -> dot per kv head", grouped_dot)]}
        counts = apply_rules(graph, table)
        self.summary = format_counts(counts)
        return bool(counts)
