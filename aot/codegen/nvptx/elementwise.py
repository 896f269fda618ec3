"""The elemental GPU bodies: any kernel the CPU's elemental emitter can compute, one thread per
output element (or per four), or per output row where the kernel has a fused reduction.

elementwise: kernels with no op that loops (no reduction, contraction or pooling): each
    thread computes VECTOR consecutive elements of the root's innermost dim and stores
    them at once (st.global.v4 where the row length allows); the output index is
    delinearized once per thread.
rows: everything else the elemental emitter lowers: thread t of the launch runs work
    item t of the CPU kernel (codegen/work_item.py emit_work_item: one innermost output row,
    its reductions hoisted to the row's preamble). Correct for every such kernel; the
    faster bodies for rows, contractions and pooling come before it in bodies.py.
"""
from __future__ import annotations

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.work_item import emit_work_item, work_items
from aot.codegen.loops import const_i64, delinearize
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.plan import Kernel

# ops whose elemental lowering loops (over a reduced or contracted extent, or a window)
LOOPING_OPS = frozenset({"reduce", "dot", "packed_dot", "conv", "packed_conv", "reduce_window"})
# ops the elemental emitter does not lower at all: a kernel holding one needs a body of its own
NOT_ELEMENTAL = frozenset({"sort", "argsort", "scatter"})
VECTOR = 4  # elements per thread where the innermost dim allows: one 16-byte store
ELEMENT_BLOCK = 256
ROW_BLOCK = 128


def _elements_per_thread(kernel: Kernel) -> int:
    shape = kernel.root.type.shape
    if shape and shape[-1] % VECTOR == 0 and kernel.root.type.dtype.itemsize == 4:
        return VECTOR
    return 1


def _block_dim(units: int, largest: int) -> int:
    """Up to `largest` threads, at least one warp, no more warps than there are units."""
    return max(32, min(largest, ceil_div(units, 32) * 32))


def lowers_elementally(kernel: Kernel) -> bool:
    return not NOT_ELEMENTAL.intersection(kernel.ops)


def is_elementwise(kernel: Kernel) -> bool:
    return lowers_elementally(kernel) and not LOOPING_OPS.intersection(kernel.ops)


def _element_units(kernel: Kernel) -> int:
    """Threads with work: one per element or per VECTOR (none for an empty output; rank 0 has one)."""
    return kernel.root.type.size // _elements_per_thread(kernel)


def emit_elementwise(ctx: GpuContext) -> None:
    simt, b, root = ctx.simt, ctx.builder, ctx.kernel.root
    vector = _elements_per_thread(ctx.kernel)
    units = _element_units(ctx.kernel)
    dtype, shape = root.type.dtype, root.type.shape
    # an empty output still gets a launch (of one block, where no thread has work): a plan
    # kernel is a launch whatever its size, so the launch plan and the kernels stay in step
    with simt.blocks(max(1, ceil_div(units, simt.block_dim))) as block:
        with simt.threads() as tid:
            unit = b.add(b.mul(block, const_i64(simt.block_dim)), tid, name="unit")
            with b.if_then(b.icmp_unsigned("<", unit, const_i64(units), name="in_range")):
                ctx.elemental.push_scope()
                if not shape:
                    b.store(ctx.elemental.to_storage(ctx.elemental.value(root, []), dtype), ctx.out_ptr)
                else:
                    first = b.mul(unit, const_i64(vector), name="first", flags=["nuw"])
                    index = delinearize(b, first, shape, "at")
                    values = []
                    for lane in range(vector):
                        at = [*index[:-1], b.add(index[-1], const_i64(lane), flags=["nuw"]) if lane else index[-1]]
                        values.append(ctx.elemental.to_storage(ctx.elemental.value(root, at), dtype))
                    address = b.gep(ctx.out_ptr, [first], inbounds=True, name="out")
                    if vector == 1:
                        b.store(values[0], address, align=dtype.itemsize)
                    else:
                        vector_type = ir.VectorType(values[0].type, vector)
                        packed = ir.Constant(vector_type, ir.Undefined)
                        for lane, value in enumerate(values):
                            packed = b.insert_element(packed, value, ir.Constant(ir.IntType(32), lane))
                        b.store(packed, b.bitcast(address, vector_type.as_pointer()), align=vector * dtype.itemsize)
                ctx.elemental.pop_scope()


def emit_rows(ctx: GpuContext) -> None:
    simt, b = ctx.simt, ctx.builder
    items = work_items(ctx.kernel.root) if ctx.kernel.root.type.size else 0
    with simt.blocks(max(1, ceil_div(items, simt.block_dim))) as block:
        with simt.threads() as tid:
            item = b.add(b.mul(block, const_i64(simt.block_dim)), tid, name="item")
            with b.if_then(b.icmp_unsigned("<", item, const_i64(items), name="in_range")):
                emit_work_item(b, ctx.elemental, ctx.kernel, ctx.out_ptr, item)


ELEMENTWISE_BODY = GpuBody("elementwise", is_elementwise, lambda k: _block_dim(_element_units(k), ELEMENT_BLOCK),
                           emit_elementwise)
ROWS_BODY = GpuBody("rows", lowers_elementally, lambda k: _block_dim(work_items(k.root), ROW_BLOCK), emit_rows)
