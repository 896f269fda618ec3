"""Estimated single-core time of a kernel: the manifest's `cost_ns`.

The C runtime splits a kernel across a context's threads only when this
estimate gives at least two chunks of five microseconds or more
(AOT__MIN_CHUNK_NS, runtime_c/src/internal.h): handing work to another core
costs about a microsecond, plus moving the operands and results between the
cores' caches, and most kernels of a small transformer take less than that. Below the threshold the
calling thread runs the kernel whole and no other thread is woken.

The estimate decides whether a context starts threads at all, and splits
the kernels it puts far above the threshold from the first run. A context's
first two runs time the kernels near the threshold on the calling thread,
and from then on their measured times on the machine at hand replace the
estimates (runtime_c/src/threadpool.c). So an estimate that is off on
another CPU (an AVX2 machine, a slower core) costs two runs, not every run.

The estimate decides only who runs which items, never what they compute, so
it needs to be right within a factor of two or so, not exact. It is a sum of
per-node terms over the fused nodes (multiply-adds of dot and conv, elements
of elementwise, transcendental, reduced, moved and transposed values) plus the bytes the
kernel reads and writes, with coefficients fitted on the kernels of the
transformers zoo (models/make_zoo.py) timed one at a time on one AMD EPYC
Zen 4 core.
"""
from __future__ import annotations

import math

from aot.ir.graph import Node
from aot.ir.ops import PACKED
from aot.plan import Kernel

# nanoseconds per unit of each term (see the module docstring); the fit's
# typical error is a factor of 1.6
NS_PER_MAC = 0.018  # dot and conv bodies run at about 110 GFLOP/s
NS_PER_ELEMENT = 0.005  # one vectorized elementwise op on one element
NS_PER_TRANSCENDENTAL = 0.9  # exp, tanh, erf, ... on one element
NS_PER_REDUCED = 0.09  # one input element of a reduce or a pooling window
NS_PER_MOVED = 0.005  # one element of a broadcast, transpose, gather, ...
NS_PER_STRIDED = 0.25  # one element of a transpose that moves the last axis: a strided read each
NS_PER_BYTE = 0.0085  # operands and result from cache (about 120 GB/s)
NS_PER_ITEM = 4.7  # a work item's loop set-up

TRANSCENDENTAL = frozenset({
    "exp", "log", "tanh", "logistic", "erf", "sin", "cos", "expm1", "log1p", "tan", "pow", "atan2",
    "sqrt", "rsqrt",
})
DATA_MOVEMENT = frozenset({
    "broadcast", "reshape", "transpose", "slice", "concat", "pad", "gather", "scatter", "iota", "reverse",
})


def _features(node: Node, logical: int) -> int:
    """Output features (columns, channels) the node computes: a packed op computes whole
    blocks, its weight's padding included (ir/ops/packed.py)."""
    if node.op in PACKED:
        wp = node.inputs[1].type
        return wp.shape[0] * wp.shape[-1]
    return logical


def _dot_macs(node: Node) -> int:
    lhs = node.inputs[0].type
    contracted = math.prod(lhs.shape[d] for d in node.attrs["lhs_contract"])
    out = node.out.type
    return math.prod(out.shape[:-1]) * _features(node, out.shape[-1]) * contracted


def _taps(size: int, out: int, kernel: int, stride: int, pad_lo: int, dilation: int, lhs_dilation: int) -> int:
    """(output position, kernel tap) pairs of one spatial dim that read the input, not its padding."""
    extent = (size - 1) * lhs_dilation + 1
    pairs = 0
    for tap in range(kernel):
        offset = tap * dilation - pad_lo  # input position of output 0
        first = max(0, -(offset // stride) if offset < 0 else 0)  # smallest o with o*stride + offset >= 0
        last = min(out - 1, (extent - 1 - offset) // stride)
        if last >= first:
            pairs += last - first + 1
    return pairs // lhs_dilation if lhs_dilation > 1 else pairs


def _conv_macs(node: Node) -> int:
    x, w, out = node.inputs[0].type, node.inputs[1].type, node.out.type
    attrs = node.attrs
    lhs_dilation = attrs.get("lhs_dilation") or (1,) * (x.rank - 2)
    taps = 1
    for d in range(x.rank - 2):
        taps *= _taps(x.shape[2 + d], out.shape[2 + d], w.shape[2 + d], attrs["strides"][d],
                      attrs["padding"][d][0], attrs["dilation"][d], lhs_dilation[d])
    return out.shape[0] * _features(node, out.shape[1]) * w.shape[1] * taps


def _node_term(node: Node) -> tuple[str, float]:
    """(term, amount) of one fused node."""
    size = node.out.type.size
    if node.op in ("dot", "packed_dot"):
        return "macs", _dot_macs(node)
    if node.op in ("conv", "packed_conv"):
        return "macs", _conv_macs(node)
    if node.op == "reduce":
        return "reduced", node.inputs[0].type.size
    if node.op == "reduce_window":
        return "reduced", size * math.prod(node.attrs["window"])
    if node.op in TRANSCENDENTAL:
        return "transcendental", size
    if node.op == "transpose" and node.attrs["perm"][-1] != len(node.attrs["perm"]) - 1:
        return "strided", size
    if node.op in DATA_MOVEMENT:
        return "moved", size
    return "elements", size


def _bytes(kernel: Kernel) -> int:
    """Bytes the kernel reads and writes: a table it only gathers from or slices counts the part read."""
    total = kernel.root.type.nbytes
    for p in kernel.params:
        users = [n for n in kernel.nodes if any(v is p for v in n.inputs)]
        if users and all(n.op in ("gather", "slice") and n.inputs[0] is p for n in users):
            total += min(p.type.nbytes, sum(n.out.type.nbytes for n in users))
        else:
            total += p.type.nbytes
    return total


def cost_terms(kernel: Kernel) -> dict[str, float]:
    """What the estimate counts in `kernel`: multiply-adds, elements by kind, bytes."""
    terms = dict.fromkeys(("macs", "elements", "transcendental", "reduced", "moved", "strided"), 0.0)
    for n in kernel.nodes:
        if n.op != "constant":
            term, amount = _node_term(n)
            terms[term] += amount
    terms["bytes"] = _bytes(kernel)
    return terms


def kernel_cost_ns(kernel: Kernel, work: int) -> int:
    """Estimated nanoseconds for one core to run all `work` items of `kernel`.

    Compute and memory traffic overlap (a roofline: the larger of the two),
    and every item pays a loop's set-up.
    """
    t = cost_terms(kernel)
    compute = (NS_PER_MAC * t["macs"] + NS_PER_ELEMENT * t["elements"] + NS_PER_TRANSCENDENTAL * t["transcendental"]
               + NS_PER_REDUCED * t["reduced"] + NS_PER_MOVED * t["moved"] + NS_PER_STRIDED * t["strided"])
    return int(round(max(compute, NS_PER_BYTE * t["bytes"]) + NS_PER_ITEM * work))
