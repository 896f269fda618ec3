"""Pointwise (1x1, stride 1, unpadded, ungrouped) f32 conv, vectorized along pixels.

In NCHW such a conv is a matrix product per image: with p = h*W + w,

    out[n, o, p] = sum_c W[o, c] * x[n, c, p]

and x is contiguous along p. The layout pass leaves these convs unpacked
(weight [O, C, 1, 1]); here the vector lanes run along pixels, so narrow
outputs waste no lanes. Work item = (n, pixel block, output-channel block);
per item a tile of MR channels x NV vectors of LANES pixels lives in registers:

    for c in 0..C:  xv[j] = x[n, c, p0 + j*L : p0 + (j+1)*L]      (vector loads)
                    a[r]  = splat(W[o0 + r, c])                     (broadcast)
                    acc[r][j] = fma(a[r], xv[j], acc[r][j])

Items are pixel-block-major, so consecutive items (one thread's range) reuse
the same x panel from cache -- except where an image's output is large
(MAX_PIXEL_MAJOR_OUTPUT) and larger than its input: there they are
channel-block-major, writing mr output planes at a time instead of all O. The last pixel block's partial vector is read
with a masked load (nothing past the input is touched) and stored lane by
lane -- except where only a few pixels (up to MAX_TAIL_PIXELS) are left past
the last whole vector and the weight is a buffer: then those tail pixels are
dot products along the channels, computed by the items of the last pixel
block for their channels,

    out[n, o, p] = hsum over c steps of W[o, c : c+L] * xt[p][c : c+L]

with xt[p] the input's column p, copied to the stack once per range and image
(7x7 maps: 3 whole vectors and the 49th pixel, which as a 4th vector cost a
quarter of the FMAs, or of the items on AVX2). The fused elementwise epilogue (bias, ReLU6, residual, ...) runs per
element on the accumulator lanes (epilogue.store_epilogue).
The weight is read through the elemental emitter: a weight param, or a small
constant that fusion put inside the kernel. The dilation of a 1x1 conv has
no effect, so any is taken.
Declined (other paths): anything but the above shape, non-f32, size 0, a
weight that is not a constant (a run-time or a splat one), an input that is
not a materialized param, epilogues that read the conv other than
elementwise at the root's index. The tile is sized for the target's vector
registers (MAX_VECTORS).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.constants import constant
from aot.codegen.cpu.body import BodyEmitter, KernelContext
from aot.codegen.cpu.epilogue import store_epilogue
from aot.codegen.cpu.vector_epilogue import store_run
from aot.codegen.fused_epilogue import Epilogue
from aot.codegen.loops import branch, const_i64, delinearize, for_range, if_present
from aot.codegen.math import F32
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.vector import accumulator_budget, fma, load_vector, masked_load, prefetch, splat, store_vector, vector_of
from aot.ir.graph import Node, Value
from aot.ir.types import DType
from aot.plan import Kernel

LANES = 16  # pixels per vector: one AVX-512 register of f32, two AVX2 ones
# the tile: up to MAX_ROWS channels x as many vectors of pixels as the target's accumulator
# registers hold (vector.accumulator_budget): 6 x 4 on AVX-512, 6 x 1 on AVX2 (measured on
# a haswell build of mobilenetv2: 18.7 ms with 6 x 4, which spills, 9.9 ms with 6 x 1)
MAX_ROWS = 6
MAX_VECTORS = 4
# A conv with few output channels over a large input (an image's over ALL_ROWS_MIN_INPUT_BYTES,
# read from L2 and beyond) takes them all in one tile of one vector of pixels, where the
# target's accumulators hold that many (AVX-512): each input panel is then read once, not
# once per block of MAX_ROWS channels. mobilenetv2's 32 -> 16 conv at 112x112 (1.6 MB in),
# native, in a model run: 0.21 -> 0.14 ms (onnxruntime 0.12). Over inputs that stay near
# the core, the wider tile's fewer loads per FMA win.
ALL_ROWS_MAX = 16
ALL_ROWS_MIN_INPUT_BYTES = 256 << 10
# the pixels past the last whole vector (pixels % LANES), up to this many, are computed as
# dot products along the channels (tail dots) instead of in a vector of mostly empty lanes:
# a 7x7 map is 3 whole vectors and 1 pixel, which as a 4th vector costs a quarter of the
# FMAs (AVX2: a quarter of the items) for 1/49 of the outputs
MAX_TAIL_PIXELS = 4
# the tail pixels' input columns, copied to the stack to be read along the channels: at most
# this many floats
MAX_TAIL_FLOATS = 4096
# an image's output over this many bytes is written channel block by channel block (items
# run pixel block fastest): pixel-block-major items write all O output planes at once, and
# with the output far past L2 those O write streams cost more than reading the input again
# per channel block (mobilenetv2's 16 -> 96 conv at 112x112, 4.8 MB out: 0.79 -> 0.63 ms
# native, 0.88 -> 0.46 AVX2; its 1.8 MB 56x56 ones gain nothing)
MAX_PIXEL_MAJOR_OUTPUT = 2 << 20
# a weight this large is read from DRAM on every run (the model's weights outgrow the caches
# between runs), mr rows at a time, each row a strided stream: the items prefetch the next
# block's rows into L2 (_prefetch_next_block_weights). mobilenetv2's 7x7 convs --cpu
# znver3, 160 -> 960 (614 KB): 0.26 -> 0.165 ms in a model run; 320 -> 1280: 0.62 -> 0.51.
# Small weights stay in cache, and the prefetch would only take a load slot.
PREFETCH_MIN_WEIGHT_BYTES = 64 << 10
WEIGHT_PREFETCH_LOCALITY = 2
I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)


def is_pointwise_conv(node: Node) -> bool:
    """conv(x [N, C, H, W], w [O, C, 1, 1]): f32, stride 1, no padding, one group, not transposed, not empty."""
    if node.op != "conv" or node.out.type.dtype is not DType.F32 or node.out.type.rank != 4:
        return False
    x, weight = node.inputs
    if weight.type.rank != 4 or weight.type.shape[2:] != (1, 1) or x.type.size == 0 or node.out.type.size == 0:
        return False
    attrs = node.attrs
    if attrs["groups"] != 1 or any(d != 1 for d in attrs.get("lhs_dilation", (1, 1))):
        return False
    return tuple(attrs["strides"]) == (1, 1) and all(tuple(p) == (0, 0) for p in attrs["padding"])


def _epilogue(kernel: Kernel) -> Epilogue | None:
    epilogue = Epilogue.find(kernel, is_pointwise_conv)
    if epilogue is None:
        return None
    x, weight = epilogue.contraction.inputs
    params = {id(p) for p in kernel.params}
    # a small weight may be fused into the kernel as a constant: it is read through the elemental emitter
    if id(x) not in params or weight.producer is None or weight.producer.op != "constant":
        return None
    return epilogue


@dataclass(frozen=True)
class Pointwise:
    """Sizes and tiling of one pointwise conv (all compile-time)."""

    batch: int
    channels: int  # C
    out_channels: int  # O
    height: int
    width: int
    mr: int  # channels per tile
    nv: int  # pixel vectors per full block
    tail: int = 0  # last pixels, computed as dot products along the channels (tail dots)

    @property
    def pixels(self) -> int:
        return self.height * self.width

    @property
    def tiled_pixels(self) -> int:
        """Pixels the register tiles compute (all but the tail)."""
        return self.pixels - self.tail

    @property
    def block_pixels(self) -> int:
        return self.nv * LANES

    @property
    def pixel_blocks(self) -> int:
        return ceil_div(self.tiled_pixels, self.block_pixels)

    @property
    def channel_blocks(self) -> int:
        return ceil_div(self.out_channels, self.mr)

    @property
    def items(self) -> int:
        return self.batch * self.pixel_blocks * self.channel_blocks

    @property
    def prefetches_weights(self) -> bool:
        """The items prefetch the next channel block's weight rows (PREFETCH_MIN_WEIGHT_BYTES)."""
        return self.out_channels * self.channels * 4 >= PREFETCH_MIN_WEIGHT_BYTES

    @property
    def channel_major(self) -> bool:
        """Items run pixel block fastest (see MAX_PIXEL_MAJOR_OUTPUT) where an image's output
        outgrows the cache and is larger than its input."""
        out_bytes = self.out_channels * self.pixels * 4
        return out_bytes > MAX_PIXEL_MAJOR_OUTPUT and self.channels < self.out_channels

    @staticmethod
    def of(conv: Node, target: CpuTarget, weight_in_buffer: bool = False) -> Pointwise:
        """`weight_in_buffer`: the weight is a param (tail dots load its rows as vectors; without
        it, no tail dots)."""
        n, c, h, w = conv.inputs[0].type.shape
        o = conv.out.type.shape[1]
        tail = h * w % LANES
        if not (weight_in_buffer and h * w > LANES and tail <= MAX_TAIL_PIXELS and tail * c <= MAX_TAIL_FLOATS):
            tail = 0
        budget = accumulator_budget(target, LANES)
        if o <= min(ALL_ROWS_MAX, budget) and c * h * w * 4 > ALL_ROWS_MIN_INPUT_BYTES:
            return Pointwise(n, c, o, h, w, o, 1, tail)  # every output channel in one tile
        rows = min(MAX_ROWS, budget)
        max_vectors = max(1, min(MAX_VECTORS, budget // rows))
        nv = max(1, min(max_vectors, ceil_div(h * w - tail, LANES)))
        return Pointwise(n, c, o, h, w, max(1, min(o, rows)), nv, tail)


def _pointwise(kernel: Kernel, epilogue: Epilogue, target: CpuTarget) -> Pointwise:
    weight = epilogue.contraction.inputs[1]
    return Pointwise.of(epilogue.contraction, target, any(p is weight for p in kernel.params))


def _applies(kernel: Kernel, target: CpuTarget) -> bool:
    return _epilogue(kernel) is not None


def _items(kernel: Kernel, target: CpuTarget) -> int:
    epilogue = _epilogue(kernel)
    assert epilogue is not None
    return _pointwise(kernel, epilogue, target).items


def _emit(ctx: KernelContext) -> None:
    epilogue = _epilogue(ctx.kernel)
    assert epilogue is not None
    s = _pointwise(ctx.kernel, epilogue, ctx.target)
    b = ctx.builder
    name = epilogue.contraction.out.name
    # the tail pixels' input columns: xt[t*C + c] = x[n, c, tiled_pixels + t], copied for image `copied`
    columns = ctx.elemental.alloca(ir.ArrayType(F32, s.tail * s.channels), f"{name}.tailx") if s.tail else None
    copied = ctx.elemental.alloca(I64, f"{name}.tailn") if s.tail else None
    if copied is not None:
        b.store(const_i64(-1), copied)
    with for_range(b, ctx.begin, ctx.end, f"{name}.item") as item:
        if s.channel_major:
            n, ob, pb = delinearize(b, item, (s.batch, s.channel_blocks, s.pixel_blocks), f"{name}.item")
        else:
            n, pb, ob = delinearize(b, item, (s.batch, s.pixel_blocks, s.channel_blocks), f"{name}.item")
        p0 = b.mul(pb, const_i64(s.block_pixels), name=f"{name}.p0", flags=["nuw", "nsw"])
        o0 = b.mul(ob, const_i64(s.mr), name=f"{name}.o0", flags=["nuw", "nsw"])
        row_tail = s.out_channels % s.mr
        pixel_tail = s.tiled_pixels % s.block_pixels
        last_rows = b.icmp_unsigned("==", ob, const_i64(s.channel_blocks - 1)) if row_tail else None
        last_pixels = b.icmp_unsigned("==", pb, const_i64(s.pixel_blocks - 1)) if pixel_tail else None

        def rows(mr: int) -> None:
            branch(b, last_pixels, lambda: _tile(ctx, epilogue, s, n, o0, p0, mr, pixel_tail),
                   lambda: _tile(ctx, epilogue, s, n, o0, p0, mr, s.block_pixels))

        branch(b, last_rows, lambda: rows(row_tail), lambda: rows(s.mr))
        if columns is not None and copied is not None:
            # the items of the last pixel block also compute the tail pixels of their rows; the
            # columns are copied once per range and image
            with if_present(b, b.icmp_unsigned("==", pb, const_i64(s.pixel_blocks - 1))):
                with if_present(b, b.icmp_signed("!=", b.load(copied), n)):
                    _copy_tail_columns(ctx, epilogue, s, n, columns)
                    b.store(n, copied)
                rows_here = b.select(last_rows, const_i64(row_tail), const_i64(s.mr)) if last_rows is not None else const_i64(s.mr)
                _tail_dots(ctx, epilogue, s, n, o0, columns, rows_here)


def _copy_tail_columns(ctx: KernelContext, epilogue: Epilogue, s: Pointwise, n: ir.Value, columns: ir.Value) -> None:
    """columns[t*C + c] = x[n, c, tiled_pixels + t]."""
    b = ctx.builder
    x = epilogue.contraction.inputs[0]
    name = epilogue.contraction.out.name
    x_ptr = ctx.params[id(x)]
    first = b.gep(columns, [const_i64(0), const_i64(0)], inbounds=True)
    image = b.mul(n, const_i64(s.channels * s.pixels), flags=["nuw", "nsw"])
    with for_range(b, 0, s.channels, f"{name}.tc") as c:
        at = b.add(image, b.add(b.mul(c, const_i64(s.pixels), flags=["nuw", "nsw"]), const_i64(s.tiled_pixels)))
        for t in range(s.tail):
            value = b.load(b.gep(x_ptr, [b.add(at, const_i64(t))], inbounds=True), align=4)
            b.store(value, b.gep(first, [b.add(c, const_i64(t * s.channels))], inbounds=True), align=4)


def _horizontal_sum(b: ir.IRBuilder, vec: ir.Value) -> ir.Value:
    """The sum of `vec`'s lanes: halves added until one lane is left."""
    while vec.type.count > 1:
        half = vec.type.count // 2
        low = b.shuffle_vector(vec, vec, constant(ir.VectorType(I32, half), list(range(half))))
        high = b.shuffle_vector(vec, vec, constant(ir.VectorType(I32, half), list(range(half, 2 * half))))
        vec = b.fadd(low, high)
    return b.extract_element(vec, constant(I32, 0))


def _tail_dots(ctx: KernelContext, epilogue: Epilogue, s: Pointwise, n: ir.Value, o0: ir.Value, columns: ir.Value,
               rows: ir.Value) -> None:
    """out[n, o0 + r, tiled_pixels + t] for r < rows (known at run time), t < tail: each a dot
    product of the weight's row o0 + r (contiguous: [O, C, 1, 1]) and the copied input column
    t, LANES channels a step. A loop over the rows: they are a sliver of the work (4 of 196
    pixels at 14x14), and unrolled over the tile's rows, in both row counts, they were half
    of the IR of mobilenetv2's 14x14 and 7x7 pointwise bodies."""
    b, e = ctx.builder, ctx.elemental
    conv = epilogue.contraction
    weight = conv.inputs[1]
    name = conv.out.name
    w_ptr = ctx.params[id(weight)]
    first = b.gep(columns, [const_i64(0), const_i64(0)], inbounds=True)
    vec = vector_of(LANES)
    steps, rest = divmod(s.channels, LANES)
    slots = [e.alloca(vec, f"{name}.dot{t}") for t in range(s.tail)]
    with for_range(b, 0, rows, f"{name}.dr") as r:
        e.push_scope()
        o = b.add(o0, r, flags=["nuw", "nsw"])
        row = b.mul(o, const_i64(s.channels), flags=["nuw", "nsw"])
        for slot in slots:
            b.store(constant(vec, [0.0] * LANES), slot)
        with for_range(b, 0, steps, f"{name}.dc") as step:
            c = b.mul(step, const_i64(LANES), flags=["nuw", "nsw"])
            wv = load_vector(b, w_ptr, b.add(row, c), LANES, f"{name}.w")
            for t, slot in enumerate(slots):
                xv = load_vector(b, first, b.add(c, const_i64(t * s.channels)), LANES, f"{name}.xt{t}")
                b.store(fma(b, wv, xv, b.load(slot), f"{name}.dot{t}"), slot)
        elements = []
        for t, slot in enumerate(slots):
            total = _horizontal_sum(b, b.load(slot))
            for c in range(steps * LANES, steps * LANES + rest):  # channels past the last whole vector
                wc = b.load(b.gep(w_ptr, [b.add(row, const_i64(c))], inbounds=True), align=4)
                xc = b.load(b.gep(first, [const_i64(c + t * s.channels)], inbounds=True), align=4)
                total = b.fadd(total, b.fmul(wc, xc))
            p = s.tiled_pixels + t
            linear = b.add(b.mul(b.add(b.mul(n, const_i64(s.out_channels)), o), const_i64(s.pixels)), const_i64(p))
            elements.append((total, [n, o, const_i64(p // s.width), const_i64(p % s.width)], linear))
        if conv.out is ctx.kernel.root:
            for value, _, linear in elements:
                b.store(value, b.gep(ctx.out_ptr, [linear], inbounds=True), align=4)
        else:
            store_epilogue(ctx, epilogue, elements)
        e.pop_scope()


def _prefix_mask(count: int) -> Callable[[int, int], ir.Value]:
    """lane_mask for masked_load: the first `count` lanes."""
    def lane_mask(lane0: int, lanes: int) -> ir.Value:
        return constant(ir.VectorType(I1, lanes), [lane0 + lane < count for lane in range(lanes)])
    return lane_mask


def _tile(ctx: KernelContext, epilogue: Epilogue, s: Pointwise, n: ir.Value, o0: ir.Value, p0: ir.Value,
          mr: int, pixels: int) -> None:
    """mr channels (from o0) x `pixels` pixels (from p0) of image n; mr and pixels compile-time."""
    b, e = ctx.builder, ctx.elemental
    conv = epilogue.contraction
    x, weight = conv.inputs
    name = conv.out.name
    vec = vector_of(LANES)
    x_ptr = ctx.params[id(x)]
    vectors = ceil_div(pixels, LANES)
    partial = pixels % LANES
    plane = b.add(b.mul(n, const_i64(s.channels * s.pixels)), p0, name=f"{name}.x0")
    channels = [b.add(o0, const_i64(r), name=f"{name}.o{r}", flags=["nuw", "nsw"]) for r in range(mr)]
    zero = const_i64(0)
    slots = [[e.alloca(vec, f"{name}.acc{r}_{j}") for j in range(vectors)] for r in range(mr)]
    for row in slots:
        for slot in row:
            b.store(constant(vec, [0.0] * LANES), slot)
    with for_range(b, 0, s.channels, f"{name}.c") as c:
        e.push_scope()
        at = b.add(plane, b.mul(c, const_i64(s.pixels)), name=f"{name}.xc")
        xv = []
        for j in range(vectors):
            offset = b.add(at, const_i64(j * LANES))
            if partial and j == vectors - 1:
                xv.append(masked_load(b, ctx.target, x_ptr, offset, LANES, _prefix_mask(partial), 0.0, f"{name}.x{j}"))
            else:
                xv.append(load_vector(b, x_ptr, offset, LANES, f"{name}.x{j}"))
        if s.prefetches_weights and id(weight) in ctx.params:
            _prefetch_next_block_weights(ctx, s, weight, o0, c)
        for r in range(mr):
            a = splat(b, e.value(weight, [channels[r], c, zero, zero]), LANES, f"{name}.a{r}")
            for j in range(vectors):
                b.store(fma(b, a, xv[j], b.load(slots[r][j]), f"{name}.acc{r}_{j}"), slots[r][j])
        e.pop_scope()
    # out[n, o, p] at (n*O + o)*P + p
    out_rows = [b.add(b.mul(b.add(b.mul(n, const_i64(s.out_channels)), b.add(o0, const_i64(r))), const_i64(s.pixels)), p0,
                      name=f"{name}.out{r}") for r in range(mr)]
    if conv.out is ctx.kernel.root:
        for r in range(mr):
            for j in range(vectors):
                acc = b.load(slots[r][j])
                count = min(LANES, pixels - j * LANES)
                if count == LANES:
                    store_vector(b, ctx.out_ptr, b.add(out_rows[r], const_i64(j * LANES)), acc, f"{name}.store{r}_{j}")
                    continue
                for lane in range(count):
                    value = b.extract_element(acc, constant(I32, lane))
                    b.store(value, b.gep(ctx.out_ptr, [b.add(out_rows[r], const_i64(j * LANES + lane))], inbounds=True), align=4)
        return
    _store_epilogue(ctx, epilogue, s, slots, n, o0, p0, pixels)


def _prefetch_next_block_weights(ctx: KernelContext, s: Pointwise, weight: Value, o0: ir.Value, c: ir.Value) -> None:
    """At channel step c, prefetch into L2 weight element [o0 + mr + c % mr, c]: over the
    item's steps, every line of the next channel block's rows (mr rows of C, each its own
    strided stream that the hardware prefetchers lose track of). Past the last block the
    address lies past the weight, which a prefetch may (it never faults)."""
    b = ctx.builder
    row = b.add(b.add(o0, const_i64(s.mr)), b.urem(c, const_i64(s.mr)))
    prefetch(b, ctx.params[id(weight)], b.add(b.mul(row, const_i64(s.channels)), c), WEIGHT_PREFETCH_LOCALITY)


def _store_epilogue(ctx: KernelContext, epilogue: Epilogue, s: Pointwise, slots: list[list[ir.Value]],
                    n: ir.Value, o0: ir.Value, p0: ir.Value, pixels: int) -> None:
    """The fused epilogue per element; the tile goes through a stack scratch so the
    epilogue is one loop over (channel, vector) with LANES unrolled elements (one body of code)."""
    b, e = ctx.builder, ctx.elemental
    name = epilogue.contraction.out.name
    mr, vectors = len(slots), len(slots[0])
    scratch = e.alloca(ir.ArrayType(F32, mr * vectors * LANES), f"{name}.tile")
    first = b.gep(scratch, [const_i64(0), const_i64(0)], inbounds=True)
    for r in range(mr):
        for j in range(vectors):
            store_vector(b, first, const_i64((r * vectors + j) * LANES), b.load(slots[r][j]), f"{name}.spill")
    with for_range(b, 0, mr * vectors, f"{name}.vec") as v:
        e.push_scope()
        o = b.add(o0, b.udiv(v, const_i64(vectors)), name=f"{name}.o", flags=["nuw", "nsw"])
        j = b.urem(v, const_i64(vectors), name=f"{name}.j")
        base = b.mul(v, const_i64(LANES), flags=["nuw", "nsw"])
        p_first = b.add(p0, b.mul(j, const_i64(LANES)), name=f"{name}.pv", flags=["nuw", "nsw"])
        out_row = b.mul(b.add(b.mul(n, const_i64(s.out_channels)), o), const_i64(s.pixels), flags=["nuw", "nsw"])

        # the lanes' outputs at one base plus constants: LLVM's SLP vectorizer then sees
        # consecutive stores (base + p_first + lane, with p_first + lane folded to an `or`,
        # it left the last lanes scalar on AVX2)
        start = b.add(out_row, p_first, flags=["nuw", "nsw"])

        def lanes(count: int) -> None:
            # one run of `count` pixels of channel o: the epilogue on vectors (vector_epilogue)
            def index_of(lane: int) -> list[ir.Value]:
                h, w = delinearize(b, b.add(p_first, const_i64(lane), flags=["nuw", "nsw"]), (s.height, s.width), f"{name}.p")
                return [n, o, h, w]
            values: ir.Value | list[ir.Value]
            if count == LANES:
                values = load_vector(b, first, base, LANES, f"{name}.v")
            else:
                values = [b.load(b.gep(first, [b.add(base, const_i64(lane))], inbounds=True), name=f"{name}.v")
                          for lane in range(count)]
            store_run(ctx, epilogue, values, index_of, start, frozenset({2, 3}))

        partial = pixels % LANES
        last = b.icmp_unsigned("==", j, const_i64(vectors - 1)) if partial else None
        branch(b, last, lambda: lanes(partial), lambda: lanes(LANES))
        e.pop_scope()


POINTWISE_EMITTER = BodyEmitter(_applies, _items, _emit)
