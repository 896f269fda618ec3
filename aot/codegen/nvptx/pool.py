"""GPU pooling bodies: windowed pooling (reduce_window) and global pooling (a reduce over
every spatial dim).

window_pool: reduce_window (max, min, sum; average pooling is the sum with its
    division in the epilogue): one thread per output element, consecutive threads
    along the innermost dim (coalesced reads at stride 1), the window in
    registers: its innermost dim unrolled, the others looped (unrolled too while
    the window has at most UNROLLED_TAPS taps). Padding reads the identity; max
    and min propagate NaN as the elemental path does.
global_pool: reduce(x [N, C, *S]) over every spatial dim (GlobalAveragePool's
    sum, GlobalMaxPool's max): one (n, c) row per warp, 8 rows a block, when the
    row is short (ResNet's 7x7); rows of at least BLOCK_ROW elements take a block
    of 8 warps each. Each lane strides over the row (consecutive lanes, consecutive
    elements), the warp combines by shuffles, the warps of a row through shared
    memory.
Both run the fused elementwise epilogue (the average's division, an activation)
on the result through the elemental emitter (cpu/epilogue.py).

Declined (rows body): non-f32, base-dilated windows, size 0, epilogues that read
the pooling other than elementwise at the root's index.
"""
from __future__ import annotations

import math

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.fused_epilogue import elementwise_epilogue
from aot.codegen.loops import const_i64, delinearize, for_range
from aot.codegen.math import F32
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.simt import WARP
from aot.ir.graph import Node
from aot.ir.ops import ELEMENTWISE
from aot.ir.ops.reduction import reduce_identity, window_dilations
from aot.ir.types import DType
from aot.plan import Kernel

WINDOW_BLOCK = 128
UNROLLED_TAPS = 64
ROW_BLOCK = 256
WARPS = ROW_BLOCK // WARP
BLOCK_ROW = 2048  # a row this long is reduced by a whole block
ZERO = const_i64(0)


def _store_result(ctx: GpuContext, pool: Node, value: ir.Value, linear: ir.Value) -> None:
    """out[linear] = the root there, with `value` for the pooling (same shape as the root)."""
    e, b, root = ctx.elemental, ctx.builder, ctx.kernel.root
    e.push_scope()
    e.substitute(pool.out, value)
    result = e.to_storage(e.value(root, delinearize(b, linear, root.type.shape, "out")), root.type.dtype)
    e.substitute(pool.out, None)
    e.pop_scope()
    b.store(result, b.gep(ctx.out_ptr, [linear], inbounds=True), align=4)


# == windowed pooling ===================================================================
def _is_window_pool(node: Node) -> bool:
    if node.op != "reduce_window" or node.out.type.dtype is not DType.F32 or node.attrs["kind"] not in ("max", "min", "sum"):
        return False
    (x,) = node.inputs
    if x.type.size == 0 or node.out.type.size == 0:
        return False
    base_dilation, _ = window_dilations(node.attrs, x.type.rank)
    return all(d == 1 for d in base_dilation)


def _window_pool(kernel: Kernel) -> Node | None:
    return elementwise_epilogue(kernel, _is_window_pool)


def _emit_window(ctx: GpuContext) -> None:
    pool = _window_pool(ctx.kernel)
    assert pool is not None
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    (x,) = pool.inputs
    kind = pool.attrs["kind"]
    window, strides, padding = pool.attrs["window"], pool.attrs["strides"], pool.attrs["padding"]
    _, dilation = window_dilations(pool.attrs, x.type.rank)
    identity = e.immediate(DType.F32, reduce_identity(kind, DType.F32))
    shape = pool.out.type.shape
    total = math.prod(shape)
    looped = [d for d in range(len(window)) if window[d] > 1]
    unrolled = math.prod(window) <= UNROLLED_TAPS
    # the innermost window dim is always unrolled; the others too when the window is small
    inner = looped[-1] if looped else None
    outer = [d for d in looped if d != inner]

    def position(d: int, at: ir.Value, k: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        pos = b.add(b.mul(at, const_i64(strides[d])), b.sub(b.mul(k, const_i64(dilation[d])), const_i64(padding[d][0])))
        last = (shape[d] - 1) * strides[d] + (window[d] - 1) * dilation[d] - padding[d][0]
        if padding[d][0] <= 0 and last < x.type.shape[d]:
            return pos, None
        ok = b.icmp_unsigned("<", pos, const_i64(x.type.shape[d]))
        return b.select(ok, pos, ZERO), ok

    with simt.blocks(ceil_div(total, simt.block_dim)) as block:
        with simt.threads() as tid:
            linear = b.add(b.mul(block, const_i64(simt.block_dim)), tid)
            with b.if_then(b.icmp_unsigned("<", linear, const_i64(total))):
                index = delinearize(b, linear, shape, "out")
                slot = e.alloca(F32, "pool.acc")
                b.store(identity, slot)
                # dims the window does not slide along (their stride and padding still apply)
                fixed = {d: position(d, index[d], ZERO) for d in range(len(shape)) if d not in looped}

                def taps() -> None:
                    acc = b.load(slot)
                    e.push_scope()
                    for k in range(window[inner] if inner is not None else 1):
                        sub, checks = [], []
                        for d in range(len(shape)):
                            pos, ok = position(d, index[d], const_i64(k)) if d == inner else fixed[d]
                            sub.append(pos)
                            if ok is not None:
                                checks.append(ok)
                        value = e.value(x, sub)
                        inside = e.all_of(checks)
                        if inside is not None:
                            value = b.select(inside, value, identity)
                        acc = e.combine(kind, acc, value, DType.F32)
                    e.pop_scope()
                    b.store(acc, slot)

                def nest(level: int) -> None:
                    if level == len(outer):
                        taps()
                        return
                    d = outer[level]
                    if unrolled:
                        for k in range(window[d]):
                            fixed[d] = position(d, index[d], const_i64(k))
                            nest(level + 1)
                    else:
                        with for_range(b, 0, window[d], f"pool.k{d}") as k:
                            fixed[d] = position(d, index[d], k)
                            nest(level + 1)
                    del fixed[d]

                nest(0)
                _store_result(ctx, pool, b.load(slot), linear)


# == global pooling =====================================================================
def _is_global_pool(node: Node) -> bool:
    """reduce (sum, max, min) of an f32 [N, C, *S] over exactly its spatial dims."""
    if node.op != "reduce" or node.out.type.dtype is not DType.F32 or node.attrs["kind"] not in ("max", "min", "sum"):
        return False
    (x,) = node.inputs
    return (x.type.rank >= 3 and tuple(node.attrs["axes"]) == tuple(range(2, x.type.rank))
            and x.type.size > 0 and node.out.type.size > 0)


def _global_pool(kernel: Kernel) -> Node | None:
    """The kernel's global pooling, where the root reads it through elementwise ops and reshapes
    of its size only (GlobalAveragePool's keepdims is a reshape): so at the root's linear index."""
    root = kernel.root.producer
    pool = next((n for n in kernel.nodes if _is_global_pool(n)), None)
    if root is None or pool is None:
        return None
    reach = {id(pool.out)}
    for node in kernel.nodes:
        if node is not pool and any(id(v) in reach for v in node.inputs):
            if (node.op not in ELEMENTWISE and node.op != "reshape") or node.out.type.size != pool.out.type.size:
                return None
            reach.add(id(node.out))
    return pool if id(root.out) in reach else None


def _row_length(pool: Node) -> int:
    return math.prod(pool.inputs[0].type.shape[2:])


def _warps_per_row(pool: Node) -> int:
    return WARPS if _row_length(pool) >= BLOCK_ROW else 1


def _emit_global(ctx: GpuContext) -> None:
    pool = _global_pool(ctx.kernel)
    assert pool is not None
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    (x,) = pool.inputs
    kind = pool.attrs["kind"]
    identity = e.immediate(DType.F32, reduce_identity(kind, DType.F32))
    length = _row_length(pool)
    rows = x.type.size // length
    per_row = _warps_per_row(pool) * WARP  # threads per row
    rows_per_block = ROW_BLOCK // per_row
    acc, other = simt.thread_var(F32, "acc"), simt.thread_var(F32, "other")
    partial = simt.shared(F32, WARPS, "partial") if per_row > WARP else None
    x_ptr = e.params.get(id(x))

    def element(row: ir.Value, p: ir.Value) -> ir.Value:
        if x_ptr is not None:
            return b.load(b.gep(x_ptr, [b.add(b.mul(row, const_i64(length)), p)], inbounds=True), align=4)
        n, c = delinearize(b, row, x.type.shape[:2], "row")
        e.push_scope()
        value = e.value(x, [n, c, *delinearize(b, p, x.type.shape[2:], "at")])
        e.pop_scope()
        return value

    with simt.blocks(ceil_div(rows, rows_per_block)) as block:
        first_row = b.mul(block, const_i64(rows_per_block))
        with simt.threads() as tid:
            row = b.add(first_row, b.udiv(tid, const_i64(per_row)))
            lane = b.urem(tid, const_i64(per_row))
            slot = acc.at(b, tid)
            b.store(identity, slot)
            with b.if_then(b.icmp_unsigned("<", row, const_i64(rows))):
                with for_range(b, 0, ceil_div(length, per_row), "pool.t") as trip:
                    p = b.add(b.mul(trip, const_i64(per_row)), lane)
                    with b.if_then(b.icmp_unsigned("<", p, const_i64(length))):
                        b.store(e.combine(kind, b.load(slot), element(row, p), DType.F32), slot)
        for delta in (16, 8, 4, 2, 1):
            simt.shuffle_down(acc, other, delta)
            with simt.threads() as tid:
                b.store(e.combine(kind, b.load(acc.at(b, tid)), b.load(other.at(b, tid)), DType.F32), acc.at(b, tid))
        if partial is not None:
            with simt.threads() as tid:
                with b.if_then(b.icmp_unsigned("==", b.urem(tid, const_i64(WARP)), ZERO)):
                    b.store(b.load(acc.at(b, tid)), b.gep(partial, [b.udiv(tid, const_i64(WARP))]))
            simt.sync()
        with simt.threads() as tid:
            row = b.add(first_row, b.udiv(tid, const_i64(per_row)))
            first = b.icmp_unsigned("==", b.urem(tid, const_i64(per_row)), ZERO)
            with b.if_then(b.and_(first, b.icmp_unsigned("<", row, const_i64(rows)))):
                total = b.load(acc.at(b, tid))
                if partial is not None:  # one row a block: the warps' partials
                    for w in range(1, WARPS):
                        total = e.combine(kind, total, b.load(b.gep(partial, [const_i64(w)])), DType.F32)
                _store_result(ctx, pool, total, row)
        if partial is not None:
            simt.sync()  # the next block's partials overwrite these


WINDOW_POOL_BODY = GpuBody("window_pool", lambda k: _window_pool(k) is not None, lambda k: WINDOW_BLOCK, _emit_window)
GLOBAL_POOL_BODY = GpuBody("global_pool", lambda k: _global_pool(k) is not None, lambda k: ROW_BLOCK, _emit_global)
