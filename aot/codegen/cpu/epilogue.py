"""The store of a CPU contraction body's fused epilogue: each root element computed from
an accumulator lane (which contraction the root reads: codegen/fused_epilogue.py).

A fast body (packed dot and conv, pointwise conv, run-time dot, depthwise conv,
pooling) computes its contraction itself; the rest of the kernel (bias,
activation, residual, ...) runs per output element through the elemental
emitter, with the accumulator lane substituted for the contraction
(ElementalEmitter.substitute). That is right only where the root reads the
contraction at the root's own index: through elementwise ops alone.
"""
from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from aot.codegen.constants import constant
from aot.codegen.cpu.body import KernelContext
from aot.codegen.fused_epilogue import Epilogue
from aot.codegen.math import F32


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
            e.substitute(partner.out, constant(F32, 0.0))
        results.append((e.to_storage(e.value(root, root_index), root.type.dtype), linear))
        for summed in (epilogue.contraction, *epilogue.partners):
            e.substitute(summed.out, None)
        e.pop_scope()
    for value, linear in results:
        addr = b.gep(ctx.out_ptr, [linear], inbounds=True, name=f"{root.name}.out")
        b.store(value, addr, align=root.type.dtype.itemsize)
