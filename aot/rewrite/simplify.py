"""Algebraic simplification: identities and data-movement chains, as a rule table.

Each rule's identity is its name and its comment. Rules only remove work or
turn an op into a cheaper one, so rewriting converges (no rule undoes another).
before: %1 = mul(%x, %one)   (%one a constant 1.0)      after: uses of %1 read %x
"""
from __future__ import annotations

import numpy as np

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.rewrite.base import Pass
from aot.rewrite.const_fold import TINY_BYTES
from aot.rewrite.rules import RuleTable, apply_rules, format_counts, splat


def _is(value: Value, scalar: float) -> bool:
    s = splat(value)
    return s is not None and not isinstance(s, bool) and s == scalar


def _right_identity(scalar: float):
    """op(x, c) -> x where every element of c is `scalar`."""
    def rule(node: Node, b: Builder) -> Value | None:
        return node.inputs[0] if _is(node.inputs[1], scalar) else None
    return rule


def _square(node: Node, b: Builder) -> Value | None:
    # pow(x, 2) -> x*x: one rounding of the exact square either way, so bit-identical
    # (signed zeros, infinities and NaN included); a norm's x^2 then costs a multiply,
    # not an exp(2 log|x|) in f64 (T5's RMSNorm: 16% of the encoder)
    x = node.inputs[0]
    return b.op("mul", [x, x]) if _is(node.inputs[1], 2) else None


def _left_identity(scalar: float):
    """op(c, x) -> x where every element of c is `scalar`."""
    def rule(node: Node, b: Builder) -> Value | None:
        return node.inputs[1] if _is(node.inputs[0], scalar) else None
    return rule


def _involution(node: Node, b: Builder) -> Value | None:
    # f(f(x)) -> x  (neg, not)
    inner = node.inputs[0].producer
    return inner.inputs[0] if inner is not None and inner.op == node.op else None


def _identity_transpose(node: Node, b: Builder) -> Value | None:
    # transpose(x, [0, 1, ..]) -> x
    return node.inputs[0] if node.attrs["perm"] == tuple(range(len(node.attrs["perm"]))) else None


def _transpose_of_transpose(node: Node, b: Builder) -> Value | None:
    # transpose(transpose(x, p), q) -> transpose(x, p[q])
    inner = node.inputs[0].producer
    if inner is None or inner.op != "transpose":
        return None
    perm = tuple(inner.attrs["perm"][q] for q in node.attrs["perm"])
    x = inner.inputs[0]
    return x if perm == tuple(range(len(perm))) else b.op("transpose", [x], perm=perm)


def _transpose_of_unit_dims(node: Node, b: Builder) -> Value | None:
    # transpose that only moves size-1 dims -> reshape (the element order is unchanged)
    x = node.inputs[0]
    moved = [p for p in node.attrs["perm"] if x.type.shape[p] != 1]
    if moved != sorted(moved) or node.attrs["perm"] == tuple(range(x.type.rank)):
        return None
    return b.op("reshape", [x], shape=node.out.type.shape)


def _same_shape(node: Node, b: Builder) -> Value | None:
    # reshape(x) to x's own shape -> x; broadcast(x) to its own shape -> x
    x = node.inputs[0]
    if x.type.shape != node.out.type.shape:
        return None
    if node.op == "broadcast" and node.attrs["dims"] != tuple(range(x.type.rank)):
        return None
    return x


def _reshape_of_reshape(node: Node, b: Builder) -> Value | None:
    # reshape(reshape(x)) -> reshape(x)
    inner = node.inputs[0].producer
    if inner is None or inner.op != "reshape":
        return None
    return b.op("reshape", [inner.inputs[0]], shape=node.out.type.shape)


def _broadcast_of_broadcast(node: Node, b: Builder) -> Value | None:
    # broadcast(broadcast(x, d1), d2) -> broadcast(x, d2[d1])
    inner = node.inputs[0].producer
    if inner is None or inner.op != "broadcast":
        return None
    dims = tuple(node.attrs["dims"][d] for d in inner.attrs["dims"])
    x = inner.inputs[0]
    # a size-1 dim the inner broadcast expanded must stay expandable: sizes must fit directly
    if any(x.type.shape[i] not in (1, node.out.type.shape[d]) for i, d in enumerate(dims)):
        return None
    return b.op("broadcast", [x], dims=dims, shape=node.out.type.shape)


def _full_slice(node: Node, b: Builder) -> Value | None:
    # slice(x, 0:dim:1 in every dim) -> x
    x = node.inputs[0]
    full = all(s == 0 and e == d and st == 1 for s, e, st, d in
               zip(node.attrs["start"], node.attrs["limit"], node.attrs["stride"], x.type.shape))
    return x if full else None


def _zero_pad(node: Node, b: Builder) -> Value | None:
    # pad(x, low = high = 0) -> x
    return node.inputs[0] if not any(node.attrs["low"]) and not any(node.attrs["high"]) else None


def _same_dtype_convert(node: Node, b: Builder) -> Value | None:
    # convert(x: T) to T -> x
    return node.inputs[0] if node.inputs[0].type.dtype == node.out.type.dtype else None


def _single_concat(node: Node, b: Builder) -> Value | None:
    # concat(x) -> x
    return node.inputs[0] if len(node.inputs) == 1 else None


def _splat_constant(node: Node, b: Builder) -> Value | None:
    # constant c (all elements equal, bigger than TINY_BYTES) -> broadcast(scalar c): a scalar stays a scalar
    array: np.ndarray = node.attrs["value"]
    if array.ndim == 0 or array.nbytes <= TINY_BYTES:
        return None
    value = splat(node.out)
    if value is None:
        return None
    scalar = b.constant(np.asarray(array.reshape(-1)[0]))
    return b.op("broadcast", [scalar], dims=(), shape=node.out.type.shape)


RULES: RuleTable = {
    "add": [("x+0 -> x", _right_identity(0)), ("0+x -> x", _left_identity(0))],
    "sub": [("x-0 -> x", _right_identity(0))],
    "mul": [("x*1 -> x", _right_identity(1)), ("1*x -> x", _left_identity(1))],
    "div": [("x/1 -> x", _right_identity(1))],
    "pow": [("x^1 -> x", _right_identity(1)), ("x^2 -> x*x", _square)],
    "neg": [("-(-x) -> x", _involution)],
    "not": [("!!x -> x", _involution)],
    "transpose": [
        ("identity transpose -> x", _identity_transpose),
        ("transpose(transpose) -> transpose", _transpose_of_transpose),
        ("unit-dim transpose -> reshape", _transpose_of_unit_dims),
    ],
    "reshape": [("no-op reshape -> x", _same_shape), ("reshape(reshape) -> reshape", _reshape_of_reshape)],
    "broadcast": [("no-op broadcast -> x", _same_shape), ("broadcast(broadcast) -> broadcast", _broadcast_of_broadcast)],
    "slice": [("full slice -> x", _full_slice)],
    "pad": [("zero pad -> x", _zero_pad)],
    "convert": [("convert to own dtype -> x", _same_dtype_convert)],
    "concat": [("concat(x) -> x", _single_concat)],
    "constant": [("splat constant -> broadcast(scalar)", _splat_constant)],
}


class Simplify(Pass):
    """Apply the identity rules above; `summary` says which fired how often."""

    name = "simplify"

    def __init__(self) -> None:
        self.summary = ""

    def run(self, graph: Graph) -> bool:
        counts = apply_rules(graph, RULES)
        self.summary = format_counts(counts)
        return bool(counts)
