"""Scatter kernel body: copy the operand, then apply the updates one window at a time.

The copy is skipped when the operand already is the output (one address at run time: a
donated input updated in place, planning/donation.py), so a cache update of T positions
writes those positions alone.

Serial (one work item): updates may hit the same element, and their order is
part of the semantics (assign: the last update wins). Each update scatter
position reads its start index vector, adds the batching index, and skips the
whole window unless it lies inside the operand (see aot/ir/ops/indexing.py).
"""
from __future__ import annotations

from llvmlite import ir

from aot.codegen.constants import constant
from aot.codegen.cpu.body import BodyEmitter, KernelContext, any_target
from aot.codegen.loops import I64, delinearize, for_nest, for_range
from aot.codegen.scatter_window import COMBINE_KIND, update_element, window_origin
from aot.codegen.cpu.target import CpuTarget
from aot.ir.ops.indexing import ScatterDims
from aot.plan import Kernel

def _applies(kernel: Kernel, target: CpuTarget) -> bool:
    return True


def _work_items(kernel: Kernel) -> int:
    return 1


def _copy_operand(ctx: KernelContext, operand, item_name: str) -> None:
    b, e = ctx.builder, ctx.elemental
    shape = operand.type.shape
    dtype = operand.type.dtype
    with for_range(b, 0, operand.type.size, item_name) as linear:
        e.push_scope()
        value = e.value(operand, delinearize(b, linear, shape, item_name))
        b.store(e.to_storage(value, dtype), b.gep(ctx.out_ptr, [linear], inbounds=True), align=dtype.itemsize)
        e.pop_scope()


def _elsewhere(ctx: KernelContext, operand, name: str) -> ir.Value:
    """True unless the operand is a buffer at the output's address (then the copy is a no-op)."""
    b = ctx.builder
    pointer = ctx.params.get(id(operand))
    if pointer is None:  # computed inline: never the output's bytes
        return constant(ir.IntType(1), 1)
    return b.icmp_unsigned("!=", b.ptrtoint(pointer, I64), b.ptrtoint(ctx.out_ptr, I64), name=f"{name}.elsewhere")


def _emit(ctx: KernelContext) -> None:
    node = ctx.kernel.root.producer
    operand, indices, updates = node.inputs
    dims = ScatterDims(operand.type, indices.type, updates.type, node.attrs)
    b, e = ctx.builder, ctx.elemental
    name = node.out.name
    # one item: the range [begin, end) either holds it or is empty
    with for_range(b, ctx.begin, ctx.end, f"{name}.item"):
        with b.if_then(_elsewhere(ctx, operand, name)):
            _copy_operand(ctx, operand, f"{name}.copy")
        with for_nest(b, list(dims.scatter_shape), f"{name}.u") as scatter_index:
            e.push_scope()
            starts, fits = window_origin(b, e, node, dims, scatter_index, name)
            with b.if_then(fits):
                _apply_window(ctx, dims, starts, scatter_index, f"{name}.w")
            e.pop_scope()


def _apply_window(ctx: KernelContext, dims: ScatterDims, starts: list[ir.Value], scatter_index: list[ir.Value], name: str) -> None:
    b, e = ctx.builder, ctx.elemental
    node = ctx.kernel.root.producer
    operand, _, updates = node.inputs
    dtype = operand.type.dtype
    with for_nest(b, list(dims.window_shape), name) as window_index:
        e.push_scope()
        update_index, linear = update_element(b, node, dims, starts, scatter_index, window_index, name)
        address = b.gep(ctx.out_ptr, [linear], inbounds=True)
        new = e.value(updates, update_index)
        if dims.kind != "assign":
            old = e.from_storage(b.load(address, align=dtype.itemsize), dtype, f"{name}.old")
            new = e.combine(COMBINE_KIND[dims.kind], old, new, dtype)
        b.store(e.to_storage(new, dtype), address, align=dtype.itemsize)
        e.pop_scope()


SCATTER_EMITTER = BodyEmitter(_applies, any_target(_work_items), _emit)
