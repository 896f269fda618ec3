"""Whether a kernel may write its result over an operand's bytes as it runs: it reads the
operand only at the index it writes, or the operand is its scatter's (an arena temporary in
place, buffers.py; a donated input, donation.py)."""
from __future__ import annotations

from aot.ir.graph import Node, Value
from aot.ir.ops import CONTRACTIONS, ELEMENTWISE, NON_ELEMENTAL
from aot.plan import Kernel


def same_index_reads(kernel: Kernel, param: Value) -> bool:
    """True if `kernel` reads `param` only at the index it writes (elementwise paths to the root)."""
    if kernel.root.type.shape != param.type.shape or kernel.root.type.nbytes != param.type.nbytes:
        return False
    if any(n.op in CONTRACTIONS or n.op in NON_ELEMENTAL for n in kernel.nodes):
        return False  # contraction bodies (and fast paths) may store before all reads are done
    inside = {id(n) for n in kernel.nodes}
    same: set[int] = set()
    readers_of: dict[int, list[Node]] = {}
    for n in kernel.nodes:
        for v in n.inputs:
            readers_of.setdefault(id(v), []).append(n)
    for n in reversed(kernel.nodes):
        if n.out is kernel.root:
            ok = n.op in ELEMENTWISE
        else:
            users = [u for u in readers_of.get(id(n.out), []) if id(u) in inside]
            ok = n.op in ELEMENTWISE and bool(users) and all(id(u) in same for u in users)
        if ok and n.out.type.shape == kernel.root.type.shape:
            same.add(id(n))
    readers = readers_of.get(id(param), [])
    return bool(readers) and all(id(r) in same for r in readers)


def writes_over(kernel: Kernel, param: Value) -> bool:
    """`kernel` may overwrite `param`'s bytes as it runs: it reads each element only at the index
    it writes, or `param` is its scatter's operand and nothing else in it reads `param` (the
    scatter body skips its copy when the operand is the output's buffer, then writes the
    updated windows: codegen/cpu/scatter.py, codegen/nvptx/scatter.py)."""
    if same_index_reads(kernel, param):
        return True
    root = kernel.root.producer
    if root is None or root.op != "scatter" or root.inputs[0] is not param:
        return False
    return sum(1 for n in kernel.nodes for v in n.inputs if v is param) == 1
