"""The scatter GPU body: one block copies the operand to the output, then applies the updates.

Semantics (aot/ir/ops/indexing.py, the CPU body's): updates apply in row-major order of
the update scatter index, so with duplicate targets `assign` keeps the last and the
other kinds combine in that order; an update window that does not fit in the operand
is skipped whole.

One block, because every update must see the whole copy and a barrier only spans a
block (a grid-wide wait would need a second kernel or a cooperative launch); its
threads copy the operand (a block-stride loop), sync, then apply the updates one of
three ways, chosen at compile time (`strategy`):
- atomic: `add` on f32/f64/i32/i64/u32/u64: every (update, window element) pair at once,
  spread over the threads, each an atomicrmw add (red.global.add). Integers come out
  exact; floats sum duplicates in another order than the CPU, so they may differ in
  the last bits wherever targets repeat (and from run to run on a GPU), as XLA's and
  PyTorch's GPU scatter-add do. Targets that do not repeat are exact.
- window: update windows of at least a warp's elements (ScatterND of rows): the
  updates in order, each one's window spread over the threads, a barrier between
  updates (the next may write the same elements). Exact, every kind.
- serial: the rest (ScatterElements, narrow windows, mul/max/min/assign, half types):
  thread 0 applies every update in order, as the CPU does. Exact, not parallel.
A large operand copies at one SM's bandwidth. An operand that already is the output (one
address at run time: a donated input updated in place, planning/donation.py) is not copied:
a cache update of T positions writes those positions alone.
"""
from __future__ import annotations

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.elemental import ZERO
from aot.codegen.loops import delinearize, for_nest
from aot.codegen.scatter_window import COMBINE_KIND, update_element, window_origin
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.simt import WARP
from aot.codegen.nvptx.sort import phase, strided
from aot.ir.ops.indexing import ScatterDims
from aot.ir.types import DType
from aot.plan import Kernel

MAX_BLOCK = 512
ATOMIC_ADD_DTYPES = frozenset({DType.F32, DType.F64, DType.I32, DType.I64, DType.U32, DType.U64})


def _applies(kernel: Kernel) -> bool:
    producer = kernel.root.producer
    return producer is not None and producer.op == "scatter"


def _dims(kernel: Kernel) -> ScatterDims:
    node = kernel.root.producer
    operand, indices, updates = node.inputs
    return ScatterDims(operand.type, indices.type, updates.type, node.attrs)


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for s in shape:
        size *= s
    return size


def strategy(kernel: Kernel) -> str:
    """How the updates are applied: "atomic", "window" or "serial" (see the module doc)."""
    dims = _dims(kernel)
    if dims.kind == "add" and kernel.root.type.dtype in ATOMIC_ADD_DTYPES:
        return "atomic"
    if _size(dims.window_shape) >= WARP:
        return "window"
    return "serial"


def _block_dim(kernel: Kernel) -> int:
    dims = _dims(kernel)
    units = kernel.root.type.size
    if strategy(kernel) == "atomic":
        units = max(units, _size(dims.scatter_shape) * _size(dims.window_shape))
    return max(WARP, min(MAX_BLOCK, ceil_div(units, WARP) * WARP))


def _elsewhere(ctx: GpuContext, operand) -> ir.Value:
    """True unless the operand is a buffer at the output's address (then the copy is a no-op)."""
    b = ctx.builder
    pointer = ctx.elemental.params.get(id(operand))
    if pointer is None:  # computed inline: never the output's bytes
        return ir.Constant(ir.IntType(1), 1)
    i64 = ir.IntType(64)
    return b.icmp_unsigned("!=", b.ptrtoint(pointer, i64), b.ptrtoint(ctx.out_ptr, i64), name="copy.elsewhere")


def _emit(ctx: GpuContext) -> None:
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    node = ctx.kernel.root.producer
    operand = node.inputs[0]
    dims = _dims(ctx.kernel)
    how = strategy(ctx.kernel)
    updates = _size(dims.scatter_shape)
    window = _size(dims.window_shape)
    with simt.blocks(1):
        with phase(ctx) as tid:
            with b.if_then(_elsewhere(ctx, operand)):  # uniform: every thread takes the same way
                with strided(simt, tid, operand.type.size, "copy") as i:
                    e.push_scope()
                    value = e.value(operand, delinearize(b, i, operand.type.shape, "copy"))
                    b.store(e.to_storage(value, operand.type.dtype), b.gep(ctx.out_ptr, [i], inbounds=True))
                    e.pop_scope()
        simt.sync()
        if how == "atomic":
            with phase(ctx) as tid:
                with strided(simt, tid, updates * window, "item") as item:
                    e.push_scope()
                    index = delinearize(b, item, [*dims.scatter_shape, *dims.window_shape], "item")
                    scatter_index, window_index = index[:len(dims.scatter_shape)], index[len(dims.scatter_shape):]
                    starts, fits = window_origin(ctx.builder, ctx.elemental, ctx.kernel.root.producer, dims, scatter_index, "window")
                    with b.if_then(fits):
                        _apply(ctx, dims, starts, scatter_index, window_index, atomic=True)
                    e.pop_scope()
        elif how == "window":
            with simt.uniform_range(0, updates, "update") as u:
                with phase(ctx) as tid:
                    scatter_index = delinearize(b, u, dims.scatter_shape, "update")
                    starts, fits = window_origin(ctx.builder, ctx.elemental, ctx.kernel.root.producer, dims, scatter_index, "window")
                    with b.if_then(fits):
                        with strided(simt, tid, window, "w") as w:
                            e.push_scope()
                            _apply(ctx, dims, starts, scatter_index, delinearize(b, w, dims.window_shape, "w"))
                            e.pop_scope()
                simt.sync()  # the next update may write this one's elements from other threads
        else:
            with phase(ctx) as tid:
                with b.if_then(b.icmp_unsigned("==", tid, ZERO)):
                    with for_nest(b, list(dims.scatter_shape), "u") as scatter_index:
                        e.push_scope()
                        starts, fits = window_origin(ctx.builder, ctx.elemental, ctx.kernel.root.producer, dims, scatter_index, "window")
                        with b.if_then(fits):
                            with for_nest(b, list(dims.window_shape), "w") as window_index:
                                e.push_scope()
                                _apply(ctx, dims, starts, scatter_index, window_index)
                                e.pop_scope()
                        e.pop_scope()


def _apply(ctx: GpuContext, dims: ScatterDims, starts: list[ir.Value], scatter_index: list[ir.Value],
           window_index: list[ir.Value], atomic: bool = False) -> None:
    """Combine one update element into its operand element (an atomic add where `atomic`)."""
    b, e = ctx.builder, ctx.elemental
    node = ctx.kernel.root.producer
    operand, _, updates = node.inputs
    dtype = operand.type.dtype
    update_index, linear = update_element(b, node, dims, starts, scatter_index, window_index, "target")
    address = b.gep(ctx.out_ptr, [linear], inbounds=True)
    new = e.value(updates, update_index)
    if atomic:
        b.atomic_rmw("fadd" if dtype.is_float else "add", address, e.to_storage(new, dtype), "monotonic")
        return
    if dims.kind != "assign":
        old = e.from_storage(b.load(address, align=dtype.itemsize), dtype, "old")
        new = e.combine(COMBINE_KIND[dims.kind], old, new, dtype)
    b.store(e.to_storage(new, dtype), address, align=dtype.itemsize)


SCATTER_BODY = GpuBody("scatter", _applies, _block_dim, _emit)
