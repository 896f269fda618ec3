"""Direct f32 kernel for convs with few taps per output: depthwise and other narrow groups.

The layout pass leaves these unpacked (a group's output channels do not fill
the vector lanes), so the packed conv kernel (packed_conv.py) does not take them.
Here the vector lanes run along the output width instead: work item
(n, o, oh) computes one output row in blocks of LANES columns,

    for block:  acc = 0
      for c in 0..C/g, i in 0..KH, j in 0..KW (all unrolled, at most MAX_TAPS):
        acc = fma(x[n, g*C/g + c, oh*sh + i*dh - ph, ow0 + l*sw + j*dw - pw  for l in lanes],
                  splat(w[o, c, i, j]), acc)

The weight scalars are loaded and broadcast once per item. A block whose
every read is inside the input takes plain vector loads; border blocks use
masked loads that read 0 for padding (rows above/below the input mask every
lane). Stride 2 loads two overlapping vectors and keeps the even columns, on
x86 in a lane order where each register is one in-lane shuffle of its two
loads (column_order), the block's sum put back in order once before its store;
other strides load lane by lane. The last block of a row starts at OW - LANES
and overlaps its neighbour (the overlap is recomputed, not read back), so no
partial vector except for rows narrower than LANES. Rows of 2 to
MAX_UNROLLED_BLOCKS blocks whose tap rows are all inside the input run their
blocks unrolled at compile-time columns: a border block's column masks are
constants (no per-block mask arithmetic; on AVX2 the register piece away
from the border is a plain load), an inner block has none.

Plane mode (plane_mode: stride 1, output rows as wide as the input's, planes of
LANES to MAX_PLANE_VECTORS vectors): a work item is a whole output plane (n, o),
flattened, so rows of 28 pixels and narrower do not each cost one or two masked,
partly empty border blocks (mobilenetv2's 7x7 planes: 4 vectors instead of 7
blocks of 7 lanes). Tap (i, j) of output pixel p reads input p + (i*dh - ph)*W
+ (j*dw - pw): one vector load at a constant offset per tap, its padding lanes
(columns off the row's ends, rows off the plane) a compile-time mask: a select
after a plain load inside the plane, a masked load where it reaches past it.
A tap that is padding in every lane is skipped. The fused epilogue (bias,
ReLU6, residual, ...) runs per element on the accumulator lanes through
ElementalEmitter.substitute (epilogue.py).

`Window` and the row loads are shared with the pooling kernel (pool.py).
Declined (elemental path): non-f32, non-2-d, lhs-dilated, more than
MAX_TAPS taps per output, an input that is not a materialized param, size 0,
and epilogues that read the conv other than elementwise at the root's index.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.constants import constant
from aot.codegen.cpu.body import BodyEmitter, KernelContext, any_target
from aot.codegen.cpu.vector_epilogue import store_run
from aot.codegen.fused_epilogue import Epilogue, elementwise_epilogue
from aot.codegen.loops import branch, const_i64, delinearize, for_range
from aot.codegen.math import F32, intrinsic
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.vector import fma, load_vector, masked_load, splat, store_vector, vector_of
from aot.ir.graph import Node
from aot.ir.types import DType
from aot.plan import Kernel

# output columns per vector: an AVX-512 register of f32 (two registers on AVX2)
LANES = 16
# unrolled taps per output (C/g * KH * KW): each holds a broadcast weight register
MAX_TAPS = 64
# plane mode (plane_mode): output planes of up to this many vectors are unrolled whole. 256
# takes in mobilenetv2's 56x56 planes (196 vectors; 0.155 -> 0.129 ms native, 0.164 -> 0.131
# AVX2 against rows, ~2,000 FMAs of code per plane); its 112x112 ones (784) stay rows
MAX_PLANE_VECTORS = 256
# rows of up to this many blocks are unrolled where every tap row is inside the input
MAX_UNROLLED_BLOCKS = 8
I1 = ir.IntType(1)
I32 = ir.IntType(32)
ZERO = const_i64(0)


# == the window geometry and row loads (shared with pool.py) ==========================
@dataclass(frozen=True)
class Window:
    """A 2-d window sliding over the last two dims (H, W) of a row-major input."""

    height: int
    width: int
    out_h: int
    out_w: int
    kh: int
    kw: int
    strides: tuple[int, int]
    dilation: tuple[int, int]
    pad_low: tuple[int, int]

    @property
    def blocks(self) -> int:
        """Column blocks per output row."""
        return ceil_div(self.out_w, LANES)

    @property
    def stored(self) -> int:
        """Lanes of each block that are output columns (all but in rows narrower than LANES)."""
        return min(LANES, self.out_w)

    def rows_always_inside(self) -> bool:
        last = (self.out_h - 1) * self.strides[0] + (self.kh - 1) * self.dilation[0] - self.pad_low[0]
        return self.pad_low[0] == 0 and last < self.height

    def columns_always_inside(self) -> bool:
        # a block always computes LANES columns, even past out_w in narrow rows
        last = (max(self.out_w, LANES) - 1) * self.strides[1] + (self.kw - 1) * self.dilation[1] - self.pad_low[1]
        return self.pad_low[1] == 0 and last < self.width

    def block_starts(self) -> list[int]:
        """First output column of each block, as block_start computes it."""
        if self.out_w <= LANES:
            return [0]
        return [min(k * LANES, self.out_w - LANES) for k in range(self.blocks)]

    def block_columns_inside(self, ow0: int) -> bool:
        """Every column the block at output column ow0 reads is inside the input."""
        first = ow0 * self.strides[1] - self.pad_low[1]
        return first >= 0 and first + (LANES - 1) * self.strides[1] + (self.kw - 1) * self.dilation[1] < self.width

    def block_start(self, b: ir.IRBuilder, block: ir.Value) -> ir.Value:
        """First output column of `block`: the last block is moved back to end at out_w."""
        if self.out_w <= LANES:
            return ZERO
        start = b.mul(block, const_i64(LANES), flags=["nuw", "nsw"])
        last = const_i64(self.out_w - LANES)
        return b.select(b.icmp_signed(">", start, last), last, start, name="ow0")

    def input_row(self, b: ir.IRBuilder, oh: ir.Value, i: int) -> ir.Value:
        return b.add(b.mul(oh, const_i64(self.strides[0])), const_i64(i * self.dilation[0] - self.pad_low[0]), name="h")

    def rows_inside(self, b: ir.IRBuilder, oh: ir.Value) -> ir.Value | None:
        """Every tap row of output row `oh` is inside the input (None: always)."""
        if self.rows_always_inside():
            return None
        first = self.input_row(b, oh, 0)
        last = b.add(first, const_i64((self.kh - 1) * self.dilation[0]))
        return b.and_(b.icmp_signed(">=", first, ZERO), b.icmp_signed("<", last, const_i64(self.height)), name="rows.inside")

    def columns_inside(self, b: ir.IRBuilder, ow0: ir.Value) -> ir.Value | None:
        """Every column the block at ow0 reads is inside the input (None: always)."""
        if self.columns_always_inside():
            return None
        first = b.sub(b.mul(ow0, const_i64(self.strides[1])), const_i64(self.pad_low[1]))
        span = (LANES - 1) * self.strides[1] + (self.kw - 1) * self.dilation[1]
        return b.and_(b.icmp_signed(">=", first, ZERO), b.icmp_signed("<", b.add(first, const_i64(span)), const_i64(self.width)),
                      name="cols.inside")

    def row_pointer(self, b: ir.IRBuilder, plane: ir.Value, h: ir.Value, checked: bool) -> tuple[ir.Value, ir.Value | None]:
        """(pointer to input row h of `plane` (f32*), h-is-inside or None). A row
        outside the input is clamped to row 0; the caller masks all its lanes."""
        ok = None
        if checked and not self.rows_always_inside():
            ok = b.icmp_unsigned("<", h, const_i64(self.height), name="h.inb")
            h = b.select(ok, h, ZERO)
        offset = b.mul(h, const_i64(self.width), flags=["nsw"])
        return b.gep(plane, [offset], inbounds=True, name="row"), ok


def _int_splat(b: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    vec = ir.VectorType(I32, lanes)
    one = b.insert_element(constant(vec, None), b.trunc(value, I32), constant(I32, 0))
    return b.shuffle_vector(one, constant(vec, None), constant(vec, [0] * lanes))


def _column_mask(b: ir.IRBuilder, w: Window, first: ir.Value, step: int) -> Callable[[int, int], ir.Value]:
    """lane_mask for masked_load: lane l reads column first + l*step, if that is inside the
    input. The row's own check is not in it: a mask that depends on the column alone is
    the same for every tap row, so LLVM computes it once per block and tap column."""
    def lane_mask(lane0: int, count: int) -> ir.Value:
        steps = constant(ir.VectorType(I32, count), [(lane0 + l) * step for l in range(count)])
        positions = b.add(_int_splat(b, first, count), steps)
        return b.icmp_unsigned("<", positions, _int_splat(b, const_i64(w.width), count), name="mask")
    return lane_mask


def _row_filled(b: ir.IRBuilder, vec: ir.Value, row_ok: ir.Value | None, fill: float) -> ir.Value:
    """`vec`, or `fill` in every lane where the row is outside the input (its pointer was
    clamped to row 0, so the load read memory inside the input)."""
    if row_ok is None:
        return vec
    return b.select(row_ok, vec, constant(vec.type, [fill] * vec.type.count), name="rowfill")


# Stride 2 picks every other column of two loads. In natural lane order that is a two-source
# permute per register on AVX-512, and on AVX2 an in-lane shuffle (vshufps) plus a lane-crossing
# fix-up (vpermpd) per register and tap -- two shuffles per FMA, the shuffle ports the limit.
# In these lane orders each register is one vshufps of its two loads: a kernel whose lanes
# combine lane by lane (FMA, max) accumulates in that order and restores the natural one once
# per block (restore_order). Entry l: the output column (from ow0) that lane l holds.
_STRIDE2_ORDERS = {
    8: [0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15],  # AVX2: vshufps $136 / $221 of each ymm pair
    16: [0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15],  # AVX-512: vshufps $216 of the two loads
}


def column_order(w: Window, target: CpuTarget) -> list[int] | None:
    """The lane order load_columns should use for `w` on `target` (None: natural)."""
    if w.strides[1] != 2 or target.arch != "x86_64":
        return None
    return _STRIDE2_ORDERS.get(target.register_lanes)


def restore_order(b: ir.IRBuilder, vec: ir.Value, order: list[int] | None) -> ir.Value:
    """`vec`, whose lane l holds output column order[l], in natural order."""
    if order is None:
        return vec
    inverse = [order.index(column) for column in range(LANES)]
    return b.shuffle_vector(vec, vec, constant(ir.VectorType(I32, LANES), inverse), name="ordered")


def load_columns(b: ir.IRBuilder, target: CpuTarget, w: Window, row: ir.Value, row_ok: ir.Value | None, ow0: ir.Value,
                 j: int, checked: bool, fill: float, order: list[int] | None = None) -> ir.Value:
    """<LANES x f32>: input columns (ow0 + l)*sw + j*dw - pw of `row`; `fill` where they
    are padding (checked) -- unchecked, every column must be inside. `order` (stride 2
    only, from column_order): lane l holds output column ow0 + order[l] instead."""
    sw = w.strides[1]
    first = b.add(b.mul(ow0, const_i64(sw)), const_i64(j * w.dilation[1] - w.pad_low[1]), name=f"col{j}")
    if sw == 1:
        if not checked:
            return load_vector(b, row, first, LANES, f"x{j}")
        return _row_filled(b, masked_load(b, target, row, first, LANES, _column_mask(b, w, first, 1), fill, f"x{j}"),
                           row_ok, fill)
    if sw == 2:  # columns first, first+2, ..: the even lanes of [first, first+16) and [first+15, first+31)
        second = b.add(first, const_i64(LANES - 1))
        if checked:
            low = masked_load(b, target, row, first, LANES, _column_mask(b, w, first, 1), fill, f"x{j}.lo")
            high = masked_load(b, target, row, second, LANES, _column_mask(b, w, second, 1), fill, f"x{j}.hi")
        else:
            low = load_vector(b, row, first, LANES, f"x{j}.lo")
            high = load_vector(b, row, second, LANES, f"x{j}.hi")
        # output column k is input column first + 2k: lane 2k of low for k < LANES/2, else lane 2k - (LANES - 1) of high
        columns = order or list(range(LANES))
        picks = [2 * k if 2 * k < LANES else LANES + 2 * k - (LANES - 1) for k in columns]
        picked = b.shuffle_vector(low, high, constant(ir.VectorType(I32, LANES), picks), name=f"x{j}")
        return _row_filled(b, picked, row_ok, fill) if checked else picked
    # other strides: lane by lane (rare: stride 3+ along the width)
    result: ir.Value = constant(vector_of(LANES), None)
    for lane in range(LANES):
        pos = b.add(first, const_i64(lane * sw))
        value: ir.Value
        if checked:
            ok = b.icmp_unsigned("<", pos, const_i64(w.width))
            if row_ok is not None:
                ok = b.and_(ok, row_ok)
            loaded = b.load(b.gep(row, [b.select(ok, pos, ZERO)], inbounds=True), align=4)
            value = b.select(ok, loaded, constant(F32, fill))
        else:
            value = b.load(b.gep(row, [pos], inbounds=True), align=4)
        result = b.insert_element(result, value, constant(I32, lane))
    return result


def store_block(ctx: KernelContext, target: Node, w: Window, acc: ir.Value, outer: Sequence[ir.Value],
                out_row: ir.Value, oh: ir.Value, ow0: ir.Value) -> None:
    """Store the block's `w.stored` columns of the root, running the fused epilogue on them.

    `outer`: the root's index before (oh, ow); `out_row`: linear offset of row oh in the root.
    """
    b = ctx.builder
    start = b.add(out_row, ow0, flags=["nuw", "nsw"])
    if ctx.kernel.root is target.out and w.stored == LANES:
        store_vector(b, ctx.out_ptr, start, acc, "out")
        return
    if w.stored < LANES:  # a row narrower than the vector: its columns only (the rest is past the row)
        acc = b.shuffle_vector(acc, acc, constant(ir.VectorType(I32, w.stored), list(range(w.stored))), name="row")

    def index_of(lane: int) -> list[ir.Value]:
        return [*outer, oh, b.add(ow0, const_i64(lane), flags=["nuw", "nsw"])]

    store_run(ctx, Epilogue(target), acc, index_of, start, frozenset({len(outer) + 1}))


def for_blocks(ctx: KernelContext, w: Window, oh: ir.Value, block: Callable[[ir.Value, bool], None]) -> None:
    """Run block(ow0, checked) over the column blocks of output row `oh`: unchecked when
    every read of the block is inside the input."""
    b = ctx.builder
    rows_ok = w.rows_inside(b, oh)
    with for_range(b, 0, w.blocks, "block") as index:
        ctx.elemental.push_scope()
        ow0 = w.block_start(b, index)
        cols_ok = w.columns_inside(b, ow0)
        inside = cols_ok if rows_ok is None else rows_ok if cols_ok is None else b.and_(rows_ok, cols_ok)
        # branch(): the fast variant where `inside`, the checked one otherwise (only the fast one if always inside)
        branch(b, inside, lambda: _scoped(ctx, block, ow0, False), lambda: _scoped(ctx, block, ow0, inside is not None))
        ctx.elemental.pop_scope()


def _scoped(ctx: KernelContext, block: Callable[[ir.Value, bool], None], ow0: ir.Value, checked: bool) -> None:
    # each variant gets its own cache scope: a value emitted in one branch does not dominate the other
    ctx.elemental.push_scope()
    block(ow0, checked)
    ctx.elemental.pop_scope()


# == the depthwise conv ===============================================================
def is_narrow_conv(node: Node) -> bool:
    """An unpacked 2-d f32 conv with at most MAX_TAPS taps per output."""
    if node.op != "conv" or node.out.type.dtype is not DType.F32 or node.out.type.rank != 4:
        return False
    x, weight = node.inputs
    if x.type.size == 0 or node.out.type.size == 0 or any(d != 1 for d in node.attrs.get("lhs_dilation", (1, 1))):
        return False
    _, group_channels, kh, kw = weight.type.shape
    return group_channels * kh * kw <= MAX_TAPS


def _conv_node(kernel: Kernel) -> Node | None:
    conv = elementwise_epilogue(kernel, is_narrow_conv)
    if conv is None:
        return None
    params = {id(p) for p in kernel.params}
    return conv if all(id(v) in params for v in conv.inputs) else None


def conv_window(conv: Node) -> Window:
    x, weight = conv.inputs
    attrs = conv.attrs
    return Window(x.type.shape[2], x.type.shape[3], conv.out.type.shape[2], conv.out.type.shape[3],
                  weight.type.shape[2], weight.type.shape[3], tuple(attrs["strides"]), tuple(attrs["dilation"]),
                  (attrs["padding"][0][0], attrs["padding"][1][0]))


def _applies(kernel: Kernel, target: CpuTarget) -> bool:
    return _conv_node(kernel) is not None


def _items(kernel: Kernel) -> int:
    conv = _conv_node(kernel)
    assert conv is not None
    n, o, oh, _ = conv.out.type.shape
    return n * o if plane_mode(conv_window(conv)) else n * o * oh


# == plane mode: a whole output plane per work item ====================================
def plane_mode(w: Window) -> bool:
    """Stride 1 and rows as wide as the input's: output pixel p = oh*W + ow of a plane reads
    input p + (i*dh - ph)*W + (j*dw - pw) at tap (i, j), so the flattened plane is a run of
    vectors and each tap one vector load at a constant offset whose padding lanes are known
    at compile time. Taken for planes of LANES to MAX_PLANE_VECTORS vectors: rows of 28 and
    narrower would otherwise be one or two border blocks each, masked and partly empty, and
    wider ones a masked block at each end."""
    pixels = w.out_h * w.out_w
    return w.strides == (1, 1) and w.out_w == w.width and LANES <= pixels <= MAX_PLANE_VECTORS * LANES


def plane_vector_starts(w: Window) -> list[int]:
    """First pixel of each vector of a flattened output plane; the last one moved back to
    end at the plane's end (it overlaps its neighbour), so every vector is whole."""
    pixels = w.out_h * w.out_w
    return [min(start, pixels - LANES) for start in range(0, pixels, LANES)]


@functools.lru_cache(maxsize=1 << 14)
def _tap_mask(w: Window, start: int, i: int, j: int) -> tuple[bool, ...]:
    """Lanes of the vector at `start` whose tap (i, j) reads inside the input (not padding).
    Memoized: a plane's group signatures and its code ask for each several times."""
    mask = []
    for p in range(start, start + LANES):
        h = p // w.out_w + i * w.dilation[0] - w.pad_low[0]
        col = p % w.out_w + j * w.dilation[1] - w.pad_low[1]
        mask.append(0 <= h < w.height and 0 <= col < w.width)
    return tuple(mask)


def _tap_pieces(target: CpuTarget, w: Window, start: int, i: int, j: int, mask: tuple[bool, ...]) -> list[str]:
    """How _load_tap reads each register-wide piece of tap (i, j) of the vector at `start`:
    "zero" (padding in every lane), "plain" (a load inside the plane) or "masked" (reaching past it)."""
    at = start + (i * w.dilation[0] - w.pad_low[0]) * w.width + j * w.dilation[1] - w.pad_low[1]
    piece = min(LANES, target.register_lanes)
    kinds = []
    for first in range(0, LANES, piece):
        offset = at + first
        if not any(mask[first:first + piece]):
            kinds.append("zero")
        elif 0 <= offset and offset + piece <= w.height * w.width:
            kinds.append("plain")
        else:
            kinds.append("masked")
    return kinds


def _load_tap(b: ir.IRBuilder, target: CpuTarget, w: Window, plane: ir.Value, start: int, i: int, j: int,
              mask: tuple[bool, ...], name: str, base: ir.Value | None = None) -> ir.Value:
    """<LANES x f32>: tap (i, j) of the vector at `start` (plus `base` pixels: a group
    loop's run-time offset, under which every piece reads as at `start`), 0 where it reads
    padding; in pieces one register wide. A piece that stays inside the plane is a plain
    load (a padding lane reads the row before or after), its padding lanes then zeroed (a
    select, never a multiply: that memory may hold NaN); one reaching past the plane is a
    masked load, so nothing outside the buffer is read; an all-padding piece is a constant
    (as masked_load does: LLVM mishandles an all-false piece of a split mask on AVX2, issue 9)."""
    at = start + (i * w.dilation[0] - w.pad_low[0]) * w.width + j * w.dilation[1] - w.pad_low[1]
    piece = min(LANES, target.register_lanes)
    vec = vector_of(piece)
    zero = constant(vec, [0.0] * piece)
    parts = []
    for first, kind in zip(range(0, LANES, piece), _tap_pieces(target, w, start, i, j, mask)):
        bits = mask[first:first + piece]
        offset: ir.Value = const_i64(at + first) if base is None else b.add(base, const_i64(at + first))
        if kind == "zero":
            parts.append(zero)
        elif kind == "plain":
            loaded = load_vector(b, plane, offset, piece, f"{name}.{first}")
            parts.append(loaded if all(bits) else b.select(constant(ir.VectorType(I1, piece), bits), loaded, zero))
        else:
            fn = intrinsic(b.module, f"llvm.masked.load.v{piece}f32.p0", vec, [vec.as_pointer(), ir.VectorType(I1, piece), vec])
            addr = b.bitcast(b.gep(plane, [offset]), vec.as_pointer())  # not inbounds: it may point outside
            parts.append(b.call(fn, [addr, constant(ir.VectorType(I1, piece), bits), zero], name=f"{name}.{first}"))
    while len(parts) > 1:  # concatenate neighbours: 2 x <p> -> <2p>, until one vector is left
        width = parts[0].type.count
        both = constant(ir.VectorType(I32, 2 * width), list(range(2 * width)))
        parts = [b.shuffle_vector(lo, hi, both) for lo, hi in zip(parts[::2], parts[1::2])]
    return parts[0]


def plane_groups(w: Window, target: CpuTarget) -> tuple[int, int, int]:
    """(vectors per group, first looped group, end group) of plane mode's group loop.

    A group is lcm(width, LANES) pixels: whole rows, whole vectors, so the column of each
    lane, and with it every tap's padding mask, repeats from group to group. Groups whose
    taps all read inside the plane and whose masks and loads are alike (the rows away from
    the top and bottom padding) run as one loop over a single copy of the group's code; the
    rest of the plane is unrolled. first == end: no loop (no two groups alike)."""
    per_group = math.lcm(w.out_w, LANES) // LANES
    starts = plane_vector_starts(w)
    groups = len(starts) // per_group
    signatures = []  # per group: each tap's mask and piece kinds, relative to the group's start
    for g in range(groups):
        vectors = range(g * per_group, (g + 1) * per_group)
        if any(starts[v] != v * LANES for v in vectors):  # the moved-back last vector
            break
        masks = [(_tap_mask(w, starts[v], i, j), starts[v], i, j) for v in vectors for i in range(w.kh) for j in range(w.kw)]
        signatures.append(tuple((tuple(mask), tuple(_tap_pieces(target, w, start, i, j, mask))) for mask, start, i, j in masks))
    best = (0, 0)  # the longest run of equal signatures
    g = 0
    while g < len(signatures):
        end = g + 1
        while end < len(signatures) and signatures[end] == signatures[g]:
            end += 1
        if end - g > best[1] - best[0]:
            best = (g, end)
        g = end
    first, end = best
    return (per_group, first, end) if end - first >= 2 else (per_group, 0, 0)


def _emit_plane(ctx: KernelContext, conv: Node, w: Window, n: ir.Value, o: ir.Value, planes: list[ir.Value],
                taps: list[ir.Value]) -> None:
    """Output plane (n, o), flattened, vector by vector (plane_mode): the vectors before and
    after the group loop (plane_groups) unrolled with every offset and mask compile-time,
    the loop's with its group's run-time offset."""
    b = ctx.builder
    pixels = w.out_h * w.out_w
    out_plane = b.mul(b.add(b.mul(n, const_i64(conv.out.type.shape[1])), o), const_i64(pixels), flags=["nuw", "nsw"])
    starts = plane_vector_starts(w)
    per_group, first_group, end_group = plane_groups(w, ctx.target)

    def vector(v: int, start: int, base: ir.Value | None, stored: int) -> None:
        acc: ir.Value = constant(vector_of(LANES), [0.0] * LANES)
        for i in range(w.kh):
            for j in range(w.kw):
                mask = _tap_mask(w, start, i, j)
                if not any(mask):
                    continue  # the tap reads padding in every lane
                for c, plane in enumerate(planes):
                    xv = _load_tap(b, ctx.target, w, plane, start, i, j, mask, f"x{v}_{c}_{i}_{j}", base)
                    acc = fma(b, xv, taps[(c * w.kh + i) * w.kw + j], acc, "acc")
        ctx.elemental.push_scope()
        _store_plane_vector(ctx, conv, w, acc, n, o, out_plane, start, stored, base)
        ctx.elemental.pop_scope()

    for v in range(first_group * per_group):
        vector(v, starts[v], None, v * LANES)
    if end_group > first_group:
        group_pixels = per_group * LANES
        with for_range(b, first_group, end_group, "group") as g:
            # the loop's vectors at the first group's compile-time starts, shifted by whole groups
            base = b.mul(b.sub(g, const_i64(first_group)), const_i64(group_pixels), flags=["nuw", "nsw"])
            for v in range(first_group * per_group, (first_group + 1) * per_group):
                vector(v, starts[v], base, starts[v])
    stored = end_group * per_group * LANES
    for v in range(end_group * per_group if end_group > first_group else first_group * per_group, len(starts)):
        vector(v, starts[v], None, stored)
        stored = starts[v] + LANES


def _store_plane_vector(ctx: KernelContext, conv: Node, w: Window, acc: ir.Value, n: ir.Value, o: ir.Value,
                        out_plane: ir.Value, start: int, stored: int, base: ir.Value | None = None) -> None:
    """Store pixels start .. start+LANES-1 of the plane (shifted by `base` in a group loop),
    those below `stored` (already stored by the previous vector) only where the root is the
    conv itself: an epilogue may read a residual that the root overwrites in place, so a
    pixel's epilogue runs once."""
    b = ctx.builder
    at = const_i64(start) if base is None else b.add(base, const_i64(start), flags=["nuw", "nsw"])
    first = b.add(out_plane, at, flags=["nuw", "nsw"])
    if ctx.kernel.root is conv.out:
        store_vector(b, ctx.out_ptr, first, acc, "out")
        return

    def index_of(lane: int) -> list[ir.Value]:
        if base is None:
            p = start + lane
            return [n, o, const_i64(p // w.out_w), const_i64(p % w.out_w)]
        # base is whole rows: the row moves with it, the column does not
        row = b.add(b.udiv(base, const_i64(w.out_w)), const_i64((start + lane) // w.out_w), flags=["nuw", "nsw"])
        return [n, o, row, const_i64((start + lane) % w.out_w)]

    store_run(ctx, Epilogue(conv), acc, index_of, first, frozenset({2, 3}), range(max(0, stored - start), LANES))


def _emit(ctx: KernelContext) -> None:
    conv = _conv_node(ctx.kernel)
    assert conv is not None
    b = ctx.builder
    x, weight = conv.inputs
    n_size, out_channels, out_h, out_w = conv.out.type.shape
    in_channels = x.type.shape[1]
    _, group_channels, kh, kw = weight.type.shape
    per_group = out_channels // conv.attrs["groups"]
    w = conv_window(conv)
    x_ptr, w_ptr = ctx.params[id(x)], ctx.params[id(weight)]
    whole_planes = plane_mode(w)
    with for_range(b, ctx.begin, ctx.end, "item") as item:
        # an item is an output plane (n, o) in plane mode, an output row (n, o, oh) otherwise
        index = delinearize(b, item, (n_size, out_channels) if whole_planes else (n_size, out_channels, out_h), "item")
        n, o = index[:2]
        # the item's taps, broadcast once: w[o, c, i, j]
        tap_base = b.mul(o, const_i64(group_channels * kh * kw), flags=["nuw", "nsw"])
        taps = [splat(b, b.load(b.gep(w_ptr, [b.add(tap_base, const_i64(t))], inbounds=True), align=4), LANES, f"w{t}")
                for t in range(group_channels * kh * kw)]
        first_channel = b.mul(b.udiv(o, const_i64(per_group)), const_i64(group_channels))
        planes = []
        for c in range(group_channels):
            channel = b.add(first_channel, const_i64(c))
            plane = b.mul(b.add(b.mul(n, const_i64(in_channels)), channel), const_i64(w.height * w.width))
            planes.append(b.gep(x_ptr, [plane], inbounds=True, name=f"plane{c}"))
        if whole_planes:
            _emit_plane(ctx, conv, w, n, o, planes, taps)
        else:
            _emit_row(ctx, conv, w, n, o, index[2], planes, taps)


def _emit_row(ctx: KernelContext, conv: Node, w: Window, n: ir.Value, o: ir.Value, oh: ir.Value,
              planes: list[ir.Value], taps: list[ir.Value]) -> None:
    """Output row (n, o, oh) in blocks of LANES columns."""
    b = ctx.builder
    out_channels = conv.out.type.shape[1]
    out_row = b.mul(b.add(b.mul(b.add(b.mul(n, const_i64(out_channels)), o), const_i64(w.out_h)), oh), const_i64(w.out_w))

    order = column_order(w, ctx.target)

    def block(ow0: ir.Value, rows_checked: bool, columns_checked: bool) -> None:
        acc: ir.Value = constant(vector_of(LANES), [0.0] * LANES)
        for c, plane in enumerate(planes):
            for i in range(w.kh):
                row, row_ok = w.row_pointer(b, plane, w.input_row(b, oh, i), rows_checked)
                for j in range(w.kw):
                    xv = load_columns(b, ctx.target, w, row, row_ok, ow0, j, rows_checked or columns_checked, 0.0, order)
                    acc = fma(b, xv, taps[(c * w.kh + i) * w.kw + j], acc, "acc")
        store_block(ctx, conv, w, restore_order(b, acc, order), [n, o], out_row, oh, ow0)

    def looped() -> None:
        for_blocks(ctx, w, oh, lambda ow0, checked: block(ow0, checked, checked))

    if not 1 < w.blocks <= MAX_UNROLLED_BLOCKS:  # one block: constant masks measured slower (7 wide, stride 2)
        looped()
        return

    def unrolled() -> None:
        # rows inside the input: the blocks at compile-time columns, so a border block's
        # column masks are constants (LLVM folds them; a whole register piece inside the
        # row is a plain load) and an inner block has none
        for start in w.block_starts():
            ctx.elemental.push_scope()
            block(const_i64(start), False, not w.block_columns_inside(start))
            ctx.elemental.pop_scope()

    rows_ok = w.rows_inside(b, oh)
    if rows_ok is None:
        unrolled()
    else:
        branch(b, rows_ok, unrolled, looped)


DEPTHWISE_EMITTER = BodyEmitter(_applies, any_target(_items), _emit)
