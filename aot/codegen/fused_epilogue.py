"""Which contraction a kernel's root reads, and whether only through elementwise ops.

A fast body (dot, conv and pooling bodies on either back end) computes its
contraction itself; the rest of the kernel (bias, activation, residual, ...) runs
per output element through the elemental emitter, with the accumulator substituted
for the contraction (ElementalEmitter.substitute). That is right only where the root
reads the contraction at the root's own index: through elementwise ops alone.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aot.ir.graph import Node
from aot.ir.ops import ELEMENTWISE
from aot.plan import Kernel


@dataclass(frozen=True)
class Epilogue:
    """A kernel's root reads `contraction` through elementwise ops only (or is it)."""

    contraction: Node
    # contractions accumulated into the same accumulators (planning/contraction_sum.py);
    # the epilogue reads them as 0, their sum already being in the contraction's lane
    partners: tuple[Node, ...] = ()

    @staticmethod
    def find(kernel: Kernel, is_contraction: Callable[[Node], bool]) -> Epilogue | None:
        """The first node of `kernel` passing `is_contraction` that the root is, or reads
        through elementwise ops only; None if there is none."""
        root = kernel.root.producer
        if root is None:
            return None
        for candidate in kernel.nodes:
            if is_contraction(candidate) and (candidate is root or _reads_elementwise(kernel, candidate, root)):
                return Epilogue(candidate)
        return None


def _reads_elementwise(kernel: Kernel, contraction: Node, root: Node) -> bool:
    """Every node of `kernel` that reads `contraction`, directly or not, is elementwise, and the root is one."""
    reach_ids = {id(contraction.out)}
    for node in kernel.nodes:  # topological order
        if node is not contraction and any(id(v) in reach_ids for v in node.inputs):
            if node.op not in ELEMENTWISE:
                return False
            reach_ids.add(id(node.out))
    return id(root.out) in reach_ids


def packed_epilogue(kernel: Kernel, is_contraction: Callable[[Node], bool]) -> Epilogue | None:
    """The epilogue of the kernel's contraction, if the contraction's weight is read from a buffer."""
    epilogue = Epilogue.find(kernel, is_contraction)
    if epilogue is None or id(epilogue.contraction.inputs[1]) not in {id(p) for p in kernel.params}:
        return None
    return epilogue


def elementwise_epilogue(kernel: Kernel, is_target: Callable[[Node], bool]) -> Node | None:
    """The first node of `kernel` passing `is_target` that the root reads only through
    elementwise ops (so at the root's own index), or None."""
    root = kernel.root.producer
    if root is None:
        return None
    for candidate in kernel.nodes:
        if not is_target(candidate):
            continue
        if candidate is root:
            return candidate
        reach = {id(candidate.out)}
        safe = True
        for node in kernel.nodes:
            if node is candidate or not any(id(v) in reach for v in node.inputs):
                continue
            if node.op not in ELEMENTWISE or node.out.type.shape != candidate.out.type.shape:
                safe = False
                break
            reach.add(id(node.out))
        if safe and id(root.out) in reach:
            return candidate
    return None
