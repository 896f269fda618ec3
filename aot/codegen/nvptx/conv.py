"""GPU convolution bodies: implicit GEMM for convs with many output channels per group,
a direct body for narrow (depthwise-like) ones.

implicit_gemm: packed_conv (weight Wp [OB, C/g, *K, L], each block's channels in
    reversed lanes, ir/ops/packed.py) and plain convs with wide groups (pointwise
    1x1 convs, which the layout pass leaves unpacked on [O, C, 1, 1]). Per group,
    the output [N, O/g, OH, OW] is the GEMM

        out[m, o] = sum_k A[m, k] * B[k, o]     m = (n, oh, ow), k = (c, i, j)
        A[m, k] = x[n, g*C/g + c, oh*sh + i*dh - ph, ow*sw + j*dw - pw]   (0 in the padding)
        B[k, o] = w[o, c, i, j]   = Wp[o / L, k, lane(o)] packed, w[o*K + k] plain

    A block computes a tile of BM pixels x BN channels of one group (256 threads,
    each a TM x TN register tile, 4 x 4 or 8 x 8); per K step of BK it stages the im2col'd A tile
    and the B tile in shared memory (As[BK][BM], Bs[BK][BN]: a thread reads its TM
    pixels and TN channels in runs of 4, one vector load each). The next
    step's global loads are issued into registers before the FMAs on the current
    tile (the register prefetch of SGEMM kernels), so their latency hides behind
    the BK*TM*TN FMAs. A-tile loads run along pixels, so a warp reads consecutive
    input columns (coalesced at stride 1); packed B-tile loads run along a block's
    lanes (contiguous), plain ones along k (contiguous in w[o, :]).
    The epilogue (bias, folded BatchNorm, activation, residual) runs per output
    element through the elemental emitter with the accumulator substituted for the
    conv (cpu/epilogue.py).

direct: convs the layout pass left unpacked because their groups are narrow
    (depthwise, few channels a group): one thread per output element, consecutive
    threads along OW (coalesced input reads, one weight address per warp), the
    taps in registers (KW unrolled, KH unrolled up to UNROLLED_TAPS), input and
    weight read through the elemental emitter (a param or a small fused constant).

Declined (rows body): non-f32, ranks other than 1-d and 2-d, transposed
(lhs-dilated) convs, size 0, epilogues that read the conv other than elementwise
at the root's index.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.fused_epilogue import Epilogue
from aot.codegen.loops import const_i64, delinearize, for_range
from aot.codegen.math import F32, intrinsic
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.ir.graph import Node
from aot.ir.ops import Packing
from aot.ir.types import DType
from aot.plan import Kernel

THREADS = 256
# blocks a 128 x 128 tiling must have to be chosen over 64 x 64 (two per SM of an H200)
WIDE_MIN_BLOCKS = 264
BK = 8  # K per shared-memory step: As and Bs hold BK rows each
# below this many output channels a group (or taps), a GEMM tile would be mostly idle
MIN_GEMM_CHANNELS = 16
MIN_GEMM_K = 8
DIRECT_BLOCK = 128
UNROLLED_TAPS = 49  # KH*KW unrolled in the direct body (7x7); taller windows loop over rows
ZERO = const_i64(0)


# == geometry ==========================================================================
@dataclass(frozen=True)
class ConvShape:
    """A 1-d or 2-d conv as the 2-d one (1-d: a unit height)."""

    batch: int
    channels: int
    height: int
    width: int
    out_channels: int
    groups: int
    kh: int
    kw: int
    oh: int
    ow: int
    strides: tuple[int, int]
    dilation: tuple[int, int]
    pad_low: tuple[int, int]
    planar: bool  # 2-d (else 1-d)

    @property
    def group_channels(self) -> int:
        return self.channels // self.groups

    @property
    def group_outputs(self) -> int:
        return self.out_channels // self.groups

    @property
    def k(self) -> int:
        return self.group_channels * self.kh * self.kw

    @property
    def pixels(self) -> int:
        return self.batch * self.oh * self.ow

    @staticmethod
    def of(conv: Node) -> ConvShape:
        x = conv.inputs[0]
        attrs = conv.attrs
        strides, dilation = tuple(attrs["strides"]), tuple(attrs["dilation"])
        pad_low = tuple(low for low, _ in attrs["padding"])
        kernel = conv.inputs[1].type.shape[2:-1] if conv.op == "packed_conv" else conv.inputs[1].type.shape[2:]
        spatial, out_spatial = x.type.shape[2:], conv.out.type.shape[2:]
        planar = x.type.rank == 4
        if not planar:
            strides, dilation, pad_low = (1, *strides), (1, *dilation), (0, *pad_low)
            kernel, spatial, out_spatial = (1, *kernel), (1, *spatial), (1, *out_spatial)
        return ConvShape(x.type.shape[0], x.type.shape[1], spatial[0], spatial[1], conv.out.type.shape[1],
                         attrs["groups"], kernel[0], kernel[1], out_spatial[0], out_spatial[1],
                         strides, dilation, pad_low, planar)

    def rows_inside(self) -> bool:
        last = (self.oh - 1) * self.strides[0] + (self.kh - 1) * self.dilation[0] - self.pad_low[0]
        return self.pad_low[0] <= 0 and last < self.height

    def columns_inside(self) -> bool:
        last = (self.ow - 1) * self.strides[1] + (self.kw - 1) * self.dilation[1] - self.pad_low[1]
        return self.pad_low[1] <= 0 and last < self.width


def _is_conv(node: Node) -> bool:
    """An f32 1-d or 2-d conv or packed_conv, not transposed, not empty."""
    if node.op not in ("conv", "packed_conv") or node.out.type.dtype is not DType.F32:
        return False
    x, w = node.inputs
    if x.type.rank not in (3, 4) or x.type.size == 0 or w.type.size == 0 or node.out.type.size == 0:
        return False
    return all(d == 1 for d in node.attrs.get("lhs_dilation", (1,) * (x.type.rank - 2)))


def _is_gemm_conv(node: Node) -> bool:
    if not _is_conv(node):
        return False
    if node.op == "packed_conv":
        return True
    s = ConvShape.of(node)
    return s.group_outputs >= MIN_GEMM_CHANNELS and s.k >= MIN_GEMM_K


def _is_direct_conv(node: Node) -> bool:
    return _is_conv(node) and node.op == "conv" and not _is_gemm_conv(node)


def _epilogue(kernel: Kernel, is_conv: Callable[[Node], bool]) -> Epilogue | None:
    epilogue = Epilogue.find(kernel, is_conv)
    if epilogue is None or epilogue.contraction.out.type.shape != kernel.root.type.shape:
        return None
    if epilogue.contraction.op == "packed_conv" and id(epilogue.contraction.inputs[1]) not in {id(p) for p in kernel.params}:
        return None  # the packed weight is read by address
    return epilogue


def _out_index(s: ConvShape, n: ir.Value, o: ir.Value, oh: ir.Value, ow: ir.Value) -> list[ir.Value]:
    return [n, o, oh, ow] if s.planar else [n, o, ow]


def _store_element(ctx: GpuContext, conv: Node, acc: ir.Value, index: list[ir.Value]) -> None:
    """out[index] = the root at `index`, with `acc` for the conv there."""
    e, b, root = ctx.elemental, ctx.builder, ctx.kernel.root
    e.push_scope()
    e.substitute(conv.out, acc)
    value = e.to_storage(e.value(root, index), root.type.dtype)
    e.substitute(conv.out, None)
    e.pop_scope()
    linear = index[0]
    for i, size in zip(index[1:], root.type.shape[1:]):
        linear = b.add(b.mul(linear, const_i64(size)), i)
    b.store(value, b.gep(ctx.out_ptr, [linear], inbounds=True), align=4)


def _input_at(ctx: GpuContext, conv: Node, s: ConvShape, n: ir.Value, channel: ir.Value,
              h: ir.Value, w: ir.Value) -> ir.Value:
    """x[n, channel, h, w], 0 where (h, w) lies in the padding (the read itself stays inside)."""
    b, e = ctx.builder, ctx.elemental
    checks = []
    if not s.rows_inside():
        ok = b.icmp_unsigned("<", h, const_i64(s.height))
        checks.append(ok)
        h = b.select(ok, h, ZERO)
    if not s.columns_inside():
        ok = b.icmp_unsigned("<", w, const_i64(s.width))
        checks.append(ok)
        w = b.select(ok, w, ZERO)
    x = conv.inputs[0]
    value = e.value(x, [n, channel, h, w] if s.planar else [n, channel, w])
    inside = e.all_of(checks)
    return value if inside is None else b.select(inside, value, ir.Constant(F32, 0.0))


def _fma(b: ir.IRBuilder, a: ir.Value, c: ir.Value, acc: ir.Value) -> ir.Value:
    fn = intrinsic(b.module, "llvm.fmuladd.f32", F32, [F32, F32, F32])
    return b.call(fn, [a, c, acc])


# == implicit GEMM =====================================================================
@dataclass(frozen=True)
class GemmTile:
    bm: int  # pixels per block
    bn: int  # channels per block (within one group)
    tm: int  # pixels per thread
    tn: int  # channels per thread

    @staticmethod
    def of(s: ConvShape) -> GemmTile:
        """128 x 128 with 8 x 8 per thread (CUTLASS's SGEMM tile: 64 FMAs per 4 shared vector
        loads; ptxas gives it ~160-180 registers, so one block an SM: bounding it to 128 for
        two spilled 44-60 bytes, a trade to measure on a GPU) where the groups are that wide and the grid still has WIDE_MIN_BLOCKS blocks;
        otherwise 4 x 4 per thread and BN the narrowest of 16, 32, 64 holding the group's
        channels, BM filling the 256 threads (more, smaller blocks: at batch 1 a 56x56x64
        conv is 49 blocks of 64 x 64, already fewer than an H200's 132 SMs)."""
        wide = ceil_div(s.pixels, 128) * ceil_div(s.group_outputs, 128) * s.groups
        if s.group_outputs >= 128 and wide >= WIDE_MIN_BLOCKS:
            return GemmTile(128, 128, 8, 8)
        bn = 16
        while bn < 64 and bn < s.group_outputs:
            bn *= 2
        return GemmTile(THREADS * 4 * 4 // bn, bn, 4, 4)

    @property
    def threads_m(self) -> int:
        return self.bm // self.tm

    def rows(self, tx: int | ir.Value, b: ir.IRBuilder) -> list[ir.Value]:
        """The tile rows (pixels) thread column tx holds: runs of 4 (one vector load each),
        threads_m * 4 apart, so a warp's loads of a run are consecutive in shared memory."""
        return _runs(b, tx, self.tm, self.threads_m)

    def columns(self, ty: ir.Value, b: ir.IRBuilder) -> list[ir.Value]:
        return _runs(b, ty, self.tn, THREADS // self.threads_m)


def _runs(b: ir.IRBuilder, t: ir.Value, count: int, threads: int) -> list[ir.Value]:
    first = b.mul(t, const_i64(4))
    return [b.add(first, const_i64(q * threads * 4 + r)) for q in range(count // 4) for r in range(4)]


def _gemm_applies(kernel: Kernel) -> bool:
    return _epilogue(kernel, _is_gemm_conv) is not None


def _emit_gemm(ctx: GpuContext) -> None:
    epilogue = _epilogue(ctx.kernel, _is_gemm_conv)
    assert epilogue is not None
    conv = epilogue.contraction
    s = ConvShape.of(conv)
    t = GemmTile.of(s)
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    m_tiles, n_tiles = ceil_div(s.pixels, t.bm), ceil_div(s.group_outputs, t.bn)
    steps = ceil_div(s.k, BK)
    a_loads, b_loads = ceil_div(BK * t.bm, THREADS), ceil_div(BK * t.bn, THREADS)
    a_smem = simt.shared(F32, BK * t.bm, "a_tile")
    b_smem = simt.shared(F32, BK * t.bn, "b_tile")
    acc = [[simt.thread_var(F32, f"acc{r}_{c}") for c in range(t.tn)] for r in range(t.tm)]
    a_next = [simt.thread_var(F32, f"a_next{i}") for i in range(a_loads)]
    b_next = [simt.thread_var(F32, f"b_next{i}") for i in range(b_loads)]
    packed = conv.op == "packed_conv"
    weight_ptr = e.params.get(id(conv.inputs[1]))
    zero = ir.Constant(F32, 0.0)

    def tile_of(block: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """(first pixel, group, first channel within the group) of the block's tile."""
        mt = b.urem(block, const_i64(m_tiles))
        rest = b.udiv(block, const_i64(m_tiles))
        return (b.mul(mt, const_i64(t.bm)), b.udiv(rest, const_i64(n_tiles)),
                b.mul(b.urem(rest, const_i64(n_tiles)), const_i64(t.bn)))

    def pixel(m: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        n, oh, ow = delinearize(b, m, (s.batch, s.oh, s.ow), "m")
        return n, oh, ow

    def tap(k: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value]:
        """k -> (c, i, j)."""
        c, i, j = delinearize(b, k, (s.group_channels, s.kh, s.kw), "k")
        return c, i, j

    def load_a(tid: ir.Value, step: ir.Value, m0: ir.Value, group: ir.Value) -> None:
        """a_next[r] = A[m0 + tid % BM, step*BK + tid // BM + r * THREADS/BM] (0 past M or K)."""
        mm = b.urem(tid, const_i64(t.bm))
        m = b.add(m0, mm)
        m_ok = b.icmp_unsigned("<", m, const_i64(s.pixels))
        n, oh, ow = pixel(b.select(m_ok, m, ZERO))
        h0 = b.sub(b.mul(oh, const_i64(s.strides[0])), const_i64(s.pad_low[0]))
        w0 = b.sub(b.mul(ow, const_i64(s.strides[1])), const_i64(s.pad_low[1]))
        for r, slot in enumerate(a_next):
            kk = b.add(b.udiv(tid, const_i64(t.bm)), const_i64(r * (THREADS // t.bm)))
            k = b.add(b.mul(step, const_i64(BK)), kk)
            ok = b.and_(m_ok, b.icmp_unsigned("<", k, const_i64(s.k)))
            c, i, j = tap(b.select(ok, k, ZERO))
            channel = b.add(b.mul(group, const_i64(s.group_channels)), c)
            h = b.add(h0, b.mul(i, const_i64(s.dilation[0])))
            w = b.add(w0, b.mul(j, const_i64(s.dilation[1])))
            e.push_scope()
            value = _input_at(ctx, conv, s, n, channel, h, w)
            e.pop_scope()
            if BK * t.bm % THREADS:  # the last round covers part of the tile
                ok = b.and_(ok, b.icmp_unsigned("<", kk, const_i64(BK)))
            b.store(b.select(ok, value, zero), slot.at(b, tid))

    def weight(o: ir.Value, k: ir.Value) -> ir.Value:
        """B[k, o]: output channel o (of the whole conv), k in range."""
        if packed:
            packing = Packing.of(conv.attrs)
            lanes = packing.lanes
            within = b.urem(o, const_i64(lanes))
            lane = b.sub(const_i64(lanes - 1), within) if packing.reversed else within
            block = b.udiv(o, const_i64(lanes))
            at = b.add(b.mul(b.add(b.mul(block, const_i64(s.k)), k), const_i64(lanes)), lane)
            return b.load(b.gep(weight_ptr, [at], inbounds=True), align=4)
        if weight_ptr is not None:  # [O, C/g, *K] row-major: o*K + k
            return b.load(b.gep(weight_ptr, [b.add(b.mul(o, const_i64(s.k)), k)], inbounds=True), align=4)
        c, i, j = tap(k)  # a weight constant fused into the kernel
        e.push_scope()
        value = e.value(conv.inputs[1], [o, c, i, j] if s.planar else [o, c, j])
        e.pop_scope()
        return value

    def load_b(tid: ir.Value, step: ir.Value, group: ir.Value, o0: ir.Value) -> None:
        """b_next[r] = B[step*BK + kk, o0 + nn]: packed along nn (a block's lanes are contiguous),
        plain along kk (w[o, :] is contiguous)."""
        for r, slot in enumerate(b_next):
            linear = b.add(tid, const_i64(r * THREADS))
            if packed:
                kk, nn = b.udiv(linear, const_i64(t.bn)), b.urem(linear, const_i64(t.bn))
            else:
                nn, kk = b.udiv(linear, const_i64(BK)), b.urem(linear, const_i64(BK))
            k = b.add(b.mul(step, const_i64(BK)), kk)
            o_local = b.add(o0, nn)
            ok = b.and_(b.icmp_unsigned("<", k, const_i64(s.k)), b.icmp_unsigned("<", o_local, const_i64(s.group_outputs)))
            if BK * t.bn % THREADS:
                ok = b.and_(ok, b.icmp_unsigned("<", linear, const_i64(BK * t.bn)))
            o = b.add(b.mul(group, const_i64(s.group_outputs)), b.select(ok, o_local, ZERO))
            value = weight(o, b.select(ok, k, ZERO))
            b.store(b.select(ok, value, zero), slot.at(b, tid))

    def stage(tid: ir.Value) -> None:
        """The prefetched registers into shared memory, where the compute phase reads them."""
        for r, slot in enumerate(a_next):
            linear = b.add(tid, const_i64(r * THREADS))
            kk, mm = b.udiv(linear, const_i64(t.bm)), b.urem(linear, const_i64(t.bm))
            store = lambda: b.store(b.load(slot.at(b, tid)), b.gep(a_smem, [b.add(b.mul(kk, const_i64(t.bm)), mm)]))
            _guarded(b, None if BK * t.bm % THREADS == 0 else b.icmp_unsigned("<", kk, const_i64(BK)), store)
        for r, slot in enumerate(b_next):
            linear = b.add(tid, const_i64(r * THREADS))
            if packed:
                kk, nn = b.udiv(linear, const_i64(t.bn)), b.urem(linear, const_i64(t.bn))
            else:
                nn, kk = b.udiv(linear, const_i64(BK)), b.urem(linear, const_i64(BK))
            store = lambda: b.store(b.load(slot.at(b, tid)), b.gep(b_smem, [b.add(b.mul(kk, const_i64(t.bn)), nn)]))
            _guarded(b, None if BK * t.bn % THREADS == 0 else b.icmp_unsigned("<", linear, const_i64(BK * t.bn)), store)

    def compute(tid: ir.Value) -> None:
        tx, ty = b.urem(tid, const_i64(t.threads_m)), b.udiv(tid, const_i64(t.threads_m))
        rows, columns = t.rows(tx, b), t.columns(ty, b)
        accs = [[b.load(slot.at(b, tid)) for slot in row] for row in acc]
        for kk in range(BK):
            a = [v for run in rows[::4] for v in _vector_load(b, a_smem, b.add(const_i64(kk * t.bm), run), 4)]
            w = [v for run in columns[::4] for v in _vector_load(b, b_smem, b.add(const_i64(kk * t.bn), run), 4)]
            for r in range(t.tm):
                for c in range(t.tn):
                    accs[r][c] = _fma(b, a[r], w[c], accs[r][c])
        for row, values in zip(acc, accs):
            for slot, value in zip(row, values):
                b.store(value, slot.at(b, tid))

    def store(tid: ir.Value, m0: ir.Value, group: ir.Value, o0: ir.Value) -> None:
        tx, ty = b.urem(tid, const_i64(t.threads_m)), b.udiv(tid, const_i64(t.threads_m))
        rows, columns = t.rows(tx, b), t.columns(ty, b)
        for r in range(t.tm):
            m = b.add(m0, rows[r])
            m_ok = b.icmp_unsigned("<", m, const_i64(s.pixels))
            n, oh, ow = pixel(b.select(m_ok, m, ZERO))
            for c in range(t.tn):
                o_local = b.add(o0, columns[c])
                ok = b.and_(m_ok, b.icmp_unsigned("<", o_local, const_i64(s.group_outputs)))
                o = b.add(b.mul(group, const_i64(s.group_outputs)), o_local)
                slot = acc[r][c]
                _guarded(b, ok, lambda: _store_element(ctx, conv, b.load(slot.at(b, tid)), _out_index(s, n, o, oh, ow)))

    with simt.blocks(s.groups * n_tiles * m_tiles) as block:
        m0, group, o0 = tile_of(block)
        with simt.threads() as tid:
            for row in acc:
                for slot in row:
                    b.store(zero, slot.at(b, tid))
            load_a(tid, ZERO, m0, group)
            load_b(tid, ZERO, group, o0)
        with simt.uniform_range(0, steps, "k_step") as step:
            with simt.threads() as tid:
                stage(tid)
            simt.sync()
            with simt.threads() as tid:
                after = b.add(step, const_i64(1))
                # the next step's global loads go out before this step's FMAs
                if steps > 1:
                    _guarded(b, b.icmp_unsigned("<", after, const_i64(steps)),
                             lambda: (load_a(tid, after, m0, group), load_b(tid, after, group, o0)))
                compute(tid)
            simt.sync()
        with simt.threads() as tid:
            store(tid, m0, group, o0)


def _guarded(b: ir.IRBuilder, cond: ir.Value | None, then: Callable[[], object]) -> None:
    if cond is None:
        then()
        return
    with b.if_then(cond):
        then()


def _vector_load(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, count: int) -> list[ir.Value]:
    """`count` consecutive floats from base + offset (offset a multiple of count): one vector load."""
    vec = ir.VectorType(F32, count)
    ptr = b.bitcast(b.gep(base, [offset], inbounds=True), vec.as_pointer())
    loaded = b.load(ptr, align=4 * count)
    return [b.extract_element(loaded, ir.Constant(ir.IntType(32), i)) for i in range(count)]


# == direct ============================================================================
def _direct_applies(kernel: Kernel) -> bool:
    return _epilogue(kernel, _is_direct_conv) is not None


def _emit_direct(ctx: GpuContext) -> None:
    epilogue = _epilogue(ctx.kernel, _is_direct_conv)
    assert epilogue is not None
    conv = epilogue.contraction
    s = ConvShape.of(conv)
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    total = s.batch * s.out_channels * s.oh * s.ow
    w = conv.inputs[1]
    with simt.blocks(ceil_div(total, simt.block_dim)) as block:
        with simt.threads() as tid:
            linear = b.add(b.mul(block, const_i64(simt.block_dim)), tid)
            with b.if_then(b.icmp_unsigned("<", linear, const_i64(total))):
                n, o, oh, ow = delinearize(b, linear, (s.batch, s.out_channels, s.oh, s.ow), "out")
                group = b.udiv(o, const_i64(s.group_outputs))
                base = b.mul(group, const_i64(s.group_channels))
                h0 = b.sub(b.mul(oh, const_i64(s.strides[0])), const_i64(s.pad_low[0]))
                w0 = b.sub(b.mul(ow, const_i64(s.strides[1])), const_i64(s.pad_low[1]))
                slot = e.alloca(F32, "direct.acc")
                b.store(ir.Constant(F32, 0.0), slot)

                def row(c: ir.Value, i: ir.Value | int) -> None:
                    i = const_i64(i) if isinstance(i, int) else i
                    h = b.add(h0, b.mul(i, const_i64(s.dilation[0])))
                    acc = b.load(slot)
                    e.push_scope()
                    for j in range(s.kw):
                        col = b.add(w0, const_i64(j * s.dilation[1]))
                        x = _input_at(ctx, conv, s, n, b.add(base, c), h, col)
                        wv = e.value(w, [o, c, i, const_i64(j)] if s.planar else [o, c, const_i64(j)])
                        acc = _fma(b, x, wv, acc)
                    e.pop_scope()
                    b.store(acc, slot)

                with for_range(b, 0, s.group_channels, "direct.c") as c:
                    if s.kh * s.kw <= UNROLLED_TAPS:
                        for i in range(s.kh):
                            row(c, i)
                    else:
                        with for_range(b, 0, s.kh, "direct.i") as i:
                            row(c, i)
                _store_element(ctx, conv, b.load(slot), _out_index(s, n, o, oh, ow))


GEMM_CONV_BODY = GpuBody("implicit_gemm_conv", _gemm_applies, lambda k: THREADS, _emit_gemm)
DIRECT_CONV_BODY = GpuBody("direct_conv", _direct_applies, lambda k: DIRECT_BLOCK, _emit_direct)
