"""f32 pooling kernel: reduce_window (max, min, sum) over the last two dims.

Work item (plane, oh) computes one output row, where a plane is one index of
the leading dims (N, C for NCHW), in blocks of LANES output columns, with the
row loads of the depthwise conv kernel (depthwise.py):

    acc = splat(identity)
    for i in 0..KH, j in 0..KW (unrolled up to MAX_TAPS; longer windows loop over i):
      acc = combine(acc, x[plane, oh*sh + i*dh - ph, (ow0 + l)*sw + j*dw - pw  for l in lanes])

Padding reads the identity (-inf for max, +inf for min, 0 for sum) through
masked loads, as the reference pads; max and min propagate NaN (llvm.maximum,
as the elemental path). A fused elementwise epilogue (average pooling's
division, a following activation) runs per lane (epilogue.py).

Declined (elemental path): non-f32, a window, stride, padding or dilation
other than trivial on any dim but the last two, base dilation, an input that
is not a materialized param, size 0, kernels whose root reads the
reduce_window other than elementwise, and windows wider than MAX_TAPS.
"""
from __future__ import annotations

from llvmlite import ir

from aot.codegen.constants import constant
from aot.codegen.cpu.depthwise import (LANES, MAX_TAPS, Window, column_order, for_blocks, load_columns, restore_order,
                                       store_block)
from aot.codegen.fused_epilogue import elementwise_epilogue
from aot.codegen.cpu.body import BodyEmitter, KernelContext, any_target
from aot.codegen.elemental import ACCUMULATE
from aot.codegen.loops import const_i64, delinearize, for_range
from aot.codegen.math import intrinsic
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.vector import vector_of
from aot.ir.graph import Node
from aot.ir.types import DType
from aot.ir.ops.reduction import reduce_identity, window_dilations
from aot.plan import Kernel


def is_pool(node: Node) -> bool:
    """reduce_window over the last two dims of an f32 input (any rank >= 2)."""
    if node.op != "reduce_window" or node.out.type.dtype is not DType.F32 or node.out.type.rank < 2:
        return False
    (x,) = node.inputs
    if x.type.size == 0 or node.out.type.size == 0:
        return False
    attrs = node.attrs
    base_dilation, window_dilation = window_dilations(attrs, x.type.rank)
    if any(d != 1 for d in base_dilation):
        return False
    lead = range(x.type.rank - 2)
    if any(attrs["window"][d] != 1 or attrs["strides"][d] != 1 or attrs["padding"][d] != (0, 0) or window_dilation[d] != 1
           for d in lead):
        return False
    return attrs["window"][-1] <= MAX_TAPS


def _pool_node(kernel: Kernel) -> Node | None:
    pool = elementwise_epilogue(kernel, is_pool)
    if pool is None or id(pool.inputs[0]) not in {id(p) for p in kernel.params}:
        return None
    return pool


def pool_window(pool: Node) -> Window:
    (x,) = pool.inputs
    attrs = pool.attrs
    _, window_dilation = window_dilations(attrs, x.type.rank)
    return Window(x.type.shape[-2], x.type.shape[-1], pool.out.type.shape[-2], pool.out.type.shape[-1],
                  attrs["window"][-2], attrs["window"][-1], tuple(attrs["strides"][-2:]), tuple(window_dilation[-2:]),
                  (attrs["padding"][-2][0], attrs["padding"][-1][0]))


def _applies(kernel: Kernel, target: CpuTarget) -> bool:
    return _pool_node(kernel) is not None


def _items(kernel: Kernel) -> int:
    pool = _pool_node(kernel)
    assert pool is not None
    shape = pool.out.type.shape
    items = 1
    for dim in shape[:-1]:
        items *= dim
    return items


def _combine(b: ir.IRBuilder, kind: str, acc: ir.Value, x: ir.Value) -> ir.Value:
    if kind == "sum":
        return b.fadd(acc, x, flags=ACCUMULATE, name="acc")
    ty = acc.type
    fn = intrinsic(b.module, f"llvm.{'maximum' if kind == 'max' else 'minimum'}.v{ty.count}f32", ty, [ty, ty])
    return b.call(fn, [acc, x], name="acc")


def _emit(ctx: KernelContext) -> None:
    pool = _pool_node(ctx.kernel)
    assert pool is not None
    b = ctx.builder
    (x,) = pool.inputs
    kind = pool.attrs["kind"]
    identity = float(reduce_identity(kind, DType.F32))
    shape = pool.out.type.shape
    w = pool_window(pool)
    x_ptr = ctx.params[id(x)]
    unrolled = w.kh * w.kw <= MAX_TAPS
    order = column_order(w, ctx.target)  # stride 2: a cheaper lane order, restored before the store
    with for_range(b, ctx.begin, ctx.end, "item") as item:
        index = delinearize(b, item, shape[:-1], "item")
        plane_index, oh = index[:-1], index[-1]
        plane_linear = b.udiv(item, const_i64(w.out_h)) if w.out_h > 1 else item
        plane = b.gep(x_ptr, [b.mul(plane_linear, const_i64(w.height * w.width), flags=["nuw", "nsw"])], inbounds=True, name="plane")
        out_row = b.mul(item, const_i64(w.out_w), flags=["nuw", "nsw"], name="out.row")

        def row_taps(i: int | ir.Value, acc: ir.Value, checked: bool, ow0: ir.Value) -> ir.Value:
            h = b.add(b.mul(oh, const_i64(w.strides[0])), _row_offset(b, w, i), name="h")
            row, row_ok = w.row_pointer(b, plane, h, checked)
            for j in range(w.kw):
                acc = _combine(b, kind, acc, load_columns(b, ctx.target, w, row, row_ok, ow0, j, checked, identity, order))
            return acc

        def block(ow0: ir.Value, checked: bool) -> None:
            acc: ir.Value = constant(vector_of(LANES), [identity] * LANES)
            if unrolled:
                for i in range(w.kh):
                    acc = row_taps(i, acc, checked, ow0)
            else:  # a tall window: one loop trip per window row
                slot = ctx.elemental.alloca(vector_of(LANES), "pool.acc")
                b.store(acc, slot)
                with for_range(b, 0, w.kh, "pool.i") as i:
                    b.store(row_taps(i, b.load(slot), checked, ow0), slot)
                acc = b.load(slot)
            store_block(ctx, pool, w, restore_order(b, acc, order), plane_index, out_row, oh, ow0)

        for_blocks(ctx, w, oh, block)


def _row_offset(b: ir.IRBuilder, w: Window, i: int | ir.Value) -> ir.Value:
    """i*dh - ph: the input row of window row i, relative to oh*sh."""
    if isinstance(i, int):
        return const_i64(i * w.dilation[0] - w.pad_low[0])
    return b.sub(b.mul(i, const_i64(w.dilation[0])), const_i64(w.pad_low[0]))


POOL_EMITTER = BodyEmitter(_applies, any_target(_items), _emit)
