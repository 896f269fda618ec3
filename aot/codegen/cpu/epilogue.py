"""The fused epilogue of a contraction body: which contraction a kernel's root reads,
and the store of each root element computed from an accumulator lane.

A fast body (packed dot and conv, pointwise conv, run-time dot, depthwise conv,
pooling) computes its contraction itself; the rest of the kernel (bias,
activation, residual, ...) runs per output element through the elemental
emitter, with the accumulator lane substituted for the contraction
(ElementalEmitter.substitute). That is right only where the root reads the
contraction at the root's own index: through elementwise ops alone.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from aot.codegen.cpu.body import KernelContext
from aot.codegen.cpu.math import F32
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


def store_epilogue(ctx: KernelContext, epilogue: Epilogue, elements: Sequence[tuple[ir.Value, list[ir.Value], ir.Value]]) -> None:
    """out[linear] = root at root_index, reading `scalar` for the contraction, per (scalar, root_index, linear).

    Every element is computed before the first store: with no store between
    them, loads of the same operand merge and LLVM's SLP vectorizer turns the
    isomorphic element chains (activations included) into vector code.
    """
    e = ctx.elemental
    b = ctx.builder
    root = ctx.kernel.root
    results = []
    for scalar, root_index, linear in elements:
        e.push_scope()
        e.substitute(epilogue.contraction.out, scalar)
        for partner in epilogue.partners:
            e.substitute(partner.out, ir.Constant(F32, 0.0))
        results.append((e.to_storage(e.value(root, root_index), root.type.dtype), linear))
        for summed in (epilogue.contraction, *epilogue.partners):
            e.substitute(summed.out, None)
        e.pop_scope()
    for value, linear in results:
        addr = b.gep(ctx.out_ptr, [linear], inbounds=True, name=f"{root.name}.out")
        b.store(value, addr, align=root.type.dtype.itemsize)
