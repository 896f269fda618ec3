"""Scatter kernel body: copy the operand, then apply the updates one window at a time.

Serial (one work item): updates may hit the same element, and their order is
part of the semantics (assign: the last update wins). Each update scatter
position reads its start index vector, adds the batching index, and skips the
whole window unless it lies inside the operand (see aot/ir/ops/indexing.py).
"""
from __future__ import annotations

from llvmlite import ir

from aot.codegen.elemental import ZERO, index_as_i64
from aot.codegen.cpu.body import BodyEmitter, KernelContext, any_target
from aot.codegen.loops import const_i64, delinearize, for_nest, for_range, linearize
from aot.codegen.cpu.target import CpuTarget
from aot.ir.ops.indexing import ScatterDims
from aot.plan import Kernel

_COMBINE_KIND = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


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


def _emit(ctx: KernelContext) -> None:
    node = ctx.kernel.root.producer
    operand, indices, updates = node.inputs
    dims = ScatterDims(operand.type, indices.type, updates.type, node.attrs)
    b, e = ctx.builder, ctx.elemental
    name = node.out.name
    shape = operand.type.shape
    start_map, batching_map = dims.start_map(), dims.batching_map()
    # one item: the range [begin, end) either holds it or is empty
    with for_range(b, ctx.begin, ctx.end, f"{name}.item"):
        _copy_operand(ctx, operand, f"{name}.copy")
        with for_nest(b, list(dims.scatter_shape), f"{name}.u") as scatter_index:
            e.push_scope()
            starts, checks = [], []
            for d in range(operand.type.rank):
                if d in start_map:
                    at = list(scatter_index)
                    if dims.index_vector_dim < indices.type.rank:
                        at.insert(dims.index_vector_dim, const_i64(start_map[d]))
                    start = index_as_i64(e, e.value(indices, at), indices.type.dtype)
                    # 0 <= start <= dim - window (one unsigned compare covers both)
                    room = shape[d] - dims.window_extent(d)
                    checks.append(b.icmp_unsigned("<=", start, const_i64(room), name=f"{name}.fits{d}"))
                elif d in batching_map:
                    start = scatter_index[batching_map[d]]
                else:
                    start = ZERO
                starts.append(start)
            fits = e.all_of(checks)
            if fits is None:
                fits = ir.Constant(ir.IntType(1), 1)
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
        update_index: list[ir.Value] = [ZERO] * updates.type.rank
        for d, i in zip(dims.update_scatter_dims, scatter_index):
            update_index[d] = i
        for d, i in zip(dims.update_window_dims, window_index):
            update_index[d] = i
        offsets = dict(zip(dims.window_operand_dims, window_index))
        target = [b.add(start, offsets[d]) if d in offsets else start for d, start in enumerate(starts)]
        address = b.gep(ctx.out_ptr, [linearize(b, target, operand.type.shape, name)], inbounds=True)
        new = e.value(updates, update_index)
        if dims.kind != "assign":
            old = e.from_storage(b.load(address, align=dtype.itemsize), dtype, f"{name}.old")
            new = e.combine(_COMBINE_KIND[dims.kind], old, new, dtype)
        b.store(e.to_storage(new, dtype), address, align=dtype.itemsize)
        e.pop_scope()


SCATTER_EMITTER = BodyEmitter(_applies, any_target(_work_items), _emit)
