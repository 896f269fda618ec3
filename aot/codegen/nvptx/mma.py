"""The tensor-core matrix-multiply bodies: `dot` / `packed_dot` kernels on mma.sync.

mma: f16 or bf16 operands (the result f16/bf16, or f32 where the graph asks for it),
    mma.sync.m16n8k16 with f32 accumulators. What models hold: an ONNX MatMul on
    float16 inputs imports as a dot on f16 operands with an f16 result, a StableHLO
    bf16 dot_general as a bf16 dot; neither packs its weight (weights are packed for
    f32 only), so both operands are read through their views (gemm.py's Reader).
mma_tf32: f32 operands, only where the user asked for it (--gpu-matmul-precision tf32,
    GpuBody.precision): each operand rounded to tf32 (cvt.rna.tf32.f32: 10 mantissa
    bits, ties away from zero) as it is staged, mma.sync.m16n8k8 .tf32, f32
    accumulators. That changes results (about 2^-11 relative per input), hence the
    option; by default f32 dots keep gemm.py's SIMT bodies.

The problem is gemm.py's (Problem: batch x M x N x K over any dot_general, operand
views, the fused epilogue), and so is the staging of tiles (Staging, 256 threads). A
block of 8 warps computes a BM x BN tile (LARGE 128x128, MEDIUM 64x64, SMALL 16x64:
the largest M fills that still gives every SM a block), each warp a WM x WN part of
it as (WM / 16) x (WN / 8) m16n8 accumulator tiles (Simt.mma). The K loop steps BK (32
f16/bf16 or 16 tf32 elements: two mma k steps) at a time: sync, the A tile (BM x BK)
and B tile (BN x BK) copied from global memory into shared memory, both stored k
contiguous (a lane's fragment register is two consecutive k of one row of A or one
column of B: one 32-bit shared load), rows padded by 16 bytes so the 32 lanes' loads
of a fragment fall in 32 different banks; sync; per mma k step every warp loads its A
and B fragments from shared memory and runs its mmas. Values past M, N or K are
staged as zeros. Each lane then stores its accumulators (rows group and group + 8,
two consecutive columns: the C/D layout) through the fused epilogue: the
accumulator rounded to the dot's type stands in for the dot (elemental.substitute),
as in gemm.py.

The fragment layouts are simt.MmaShape's (the PTX ISA's); on the host the mma is
emulated by those layouts, so emulated runs test everything but the layouts' match
with the hardware, which only a GPU run shows (benchmarks/gpu_check.sh). Not done
here: ldmatrix (a transposed operand is staged element by element), cp.async
double buffering, and Hopper's wgmma (warpgroup MMA from shared memory descriptors).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.loops import const_i64
from aot.codegen.math import F32
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.gemm import FILL_BLOCKS, THREADS, BlockTile, Problem, Staging, _order, _store_result
from aot.codegen.nvptx.simt import MMA_BF16, MMA_F16, MMA_TF32, WARP, GpuSimt, MmaShape, Simt, ThreadVar, affine
from aot.ir.graph import Node
from aot.ir.types import DType
from aot.plan import Kernel

I16 = ir.IntType(16)
I32 = ir.IntType(32)
WARPS = THREADS // WARP
# shared rows padded by 16 bytes: a row of 32 f16 (or 16 f32) is 20 words, so the rows
# g = 0..7 a fragment load touches start 20 g mod 32 = 0, 20, 8, 28, 16, 4, 24, 12 words
# apart and the four threads of a group fill the 4 words after each: 32 banks
PAD_BYTES = 16
# two 256-thread blocks an SM: at most 128 registers a thread (64 accumulators in LARGE)
BLOCKS_PER_SM = 2


@dataclass(frozen=True)
class MmaTile:
    """BM x BN per block of 8 warps laid out warps_m x warps_n, each warp WM x WN."""

    bm: int
    bn: int
    warps_m: int
    warps_n: int

    @property
    def wm(self) -> int:
        return self.bm // self.warps_m

    @property
    def wn(self) -> int:
        return self.bn // self.warps_n

    @property
    def tiles_m(self) -> int:  # m16 tiles a warp
        return self.wm // 16

    @property
    def tiles_n(self) -> int:  # n8 tiles a warp
        return self.wn // 8


LARGE = MmaTile(128, 128, 2, 4)  # warp 64 x 32: 16 mmas a k step on 4 + 2 x 4 fragment loads
MEDIUM = MmaTile(64, 64, 2, 4)  # warp 32 x 16: 4 mmas a k step
SMALL = MmaTile(16, 64, 1, 8)  # warp 16 x 8: decode-time rows (M <= 16), one mma a k step
SMALL_ROWS = 16


def _is_half_contraction(node: Node) -> bool:
    if node.op not in ("dot", "packed_dot") or len(node.inputs) != 2:
        return False
    x, y = (v.type.dtype for v in node.inputs)
    return x is y and x in (DType.F16, DType.BF16) and node.out.type.dtype in (x, DType.F32)


def _shape_of(p: Problem) -> MmaShape:
    dtype = p.lhs.value.type.dtype
    return {DType.F16: MMA_F16, DType.BF16: MMA_BF16, DType.F32: MMA_TF32}[dtype]


def _tile_of(p: Problem) -> MmaTile:
    """The largest tile that M fills and that gives every SM a block; SMALL for a few rows."""
    for tile in (LARGE, MEDIUM):
        blocks = p.batches * ceil_div(p.rows, tile.bm) * ceil_div(p.columns, tile.bn)
        if p.rows >= tile.bm and blocks >= FILL_BLOCKS:
            return tile
    return SMALL if p.rows <= SMALL_ROWS else MEDIUM


def _tf32(simt: Simt, b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """The f32 `value` rounded to tf32 (nearest, ties away from zero), as its 32 bits: cvt.rna.tf32.f32
    on the GPU; on the host the same rounding on the bits (a NaN stays a NaN)."""
    if isinstance(simt, GpuSimt):
        module = b.module
        fn = module.globals.get("llvm.nvvm.f2tf32.rna") or ir.Function(
            module, ir.FunctionType(I32, [F32]), name="llvm.nvvm.f2tf32.rna")
        return b.call(fn, [value])
    bits = b.bitcast(value, I32)
    rounded = b.and_(b.add(bits, ir.Constant(I32, 0x1000)), ir.Constant(I32, 0xFFFFE000))
    is_nan = b.fcmp_unordered("uno", value, value)
    return b.select(is_nan, ir.Constant(I32, 0x7FFFFFFF), rounded)


def _staged(ctx: GpuContext, shape: MmaShape, value: ir.Value) -> ir.Value:
    """An operand element (f32 register) as the shared tile holds it: its f16/bf16 bits, or tf32 bits."""
    b, e = ctx.builder, ctx.elemental
    if shape.kind == "tf32":
        return _tf32(ctx.simt, b, value)
    stored = e.to_storage(value, DType.F16 if shape.kind == "f16" else DType.BF16)
    return b.bitcast(stored, I16) if stored.type != I16 else stored


def _position(b: ir.IRBuilder, at: Callable[[int, int, int], tuple[int, int]], i: int, group: ir.Value,
              thread: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(row, column) of a lane's fragment element i, from the layout's affine form."""
    row, col = (b.add(const_i64(k), b.add(b.mul(group, const_i64(g)), b.mul(thread, const_i64(t))))
                for k, g, t in affine(at, i))
    return row, col


def _applies(kernel: Kernel) -> bool:
    return Problem.of(kernel, _is_half_contraction) is not None


def _applies_tf32(kernel: Kernel) -> bool:
    return Problem.of(kernel) is not None


def emit_mma(ctx: GpuContext) -> None:
    kernel = ctx.kernel
    p = Problem.of(kernel, _is_half_contraction) or Problem.of(kernel)
    assert p is not None
    shape, t = _shape_of(p), _tile_of(p)
    simt, b = ctx.simt, ctx.builder
    simt.min_blocks_per_sm = BLOCKS_PER_SM
    element = I32 if shape.kind == "tf32" else I16
    bk = 2 * shape.k
    row = bk + PAD_BYTES * 8 // element.width  # shared row length in elements
    a_tile = simt.shared(element, t.bm * row, "a_tile")
    b_tile = simt.shared(element, t.bn * row, "b_tile")
    a_stage = Staging(a_tile, (row, 1), t.bm, bk, *_order(p.lhs, t.bm))
    b_stage = Staging(b_tile, (row, 1), t.bn, bk, *_order(p.rhs, t.bn))
    a_frags = [[simt.thread_var(I32, f"a{i}.{r}") for r in range(shape.a_registers)] for i in range(t.tiles_m)]
    b_frags = [[simt.thread_var(I32, f"b{j}.{r}") for r in range(shape.b_registers)] for j in range(t.tiles_n)]
    accs = [[[simt.thread_var(F32, f"acc{i}.{j}.{c}") for c in range(shape.c_registers)] for j in range(t.tiles_n)]
            for i in range(t.tiles_m)]
    m_tiles, n_tiles = ceil_div(p.rows, t.bm), ceil_div(p.columns, t.bn)
    steps = ceil_div(p.depth, bk)

    def lane_place(tid: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """(first row, first column) of the thread's warp tile, and its (group, thread in group)."""
        warp, lane = b.udiv(tid, const_i64(WARP)), b.urem(tid, const_i64(WARP))
        row0 = b.mul(b.udiv(warp, const_i64(t.warps_n)), const_i64(t.wm), name="warp.m")
        col0 = b.mul(b.urem(warp, const_i64(t.warps_n)), const_i64(t.wn), name="warp.n")
        return row0, col0, b.lshr(lane, const_i64(2), name="group"), b.and_(lane, const_i64(3), name="thread")

    def load_fragment(tile: ir.Value, outer: ir.Value, k: ir.Value, reg: ThreadVar, tid: ir.Value) -> None:
        at = b.gep(tile, [b.add(b.mul(outer, const_i64(row)), k)], inbounds=True)
        if element != I32:  # two consecutive k, low half first: one 32-bit load
            at = b.bitcast(at, I32.as_pointer())
        b.store(b.load(at, align=4), reg.at(b, tid))

    with simt.blocks(p.batches * m_tiles * n_tiles) as block:
        tile = BlockTile.of(ctx, p, block, t.bm, t.bn)
        batch, batch_index, m0, n0, a_reader, b_reader = tile.batch, tile.batch_index, tile.m0, tile.n0, tile.a, tile.b
        with simt.threads() as tid:
            for acc in (v for tiles in accs for frags in tiles for v in frags):
                b.store(ir.Constant(F32, 0.0), acc.at(b, tid))
        with simt.uniform_range(0, steps, "kt") as kt:
            k0 = b.mul(kt, const_i64(bk), name="k0")
            simt.sync()  # the last step's fragment loads are done with the tiles
            with simt.threads() as tid:
                a_stage.stage(b, tid, lambda o, k: _staged(
                    ctx, shape, a_reader.read_or_zero(b.add(m0, o), p.rows, b.add(k0, k), p.depth)))
                b_stage.stage(b, tid, lambda o, k: _staged(
                    ctx, shape, b_reader.read_or_zero(b.add(n0, o), p.columns, b.add(k0, k), p.depth)))
            simt.sync()
            for kk in range(0, bk, shape.k):
                with simt.threads() as tid:
                    row0, col0, group, thread = lane_place(tid)
                    for i, frags in enumerate(a_frags):
                        for r, reg in enumerate(frags):
                            m, k = _position(b, shape.a_at, r * shape.per_register, group, thread)
                            load_fragment(a_tile, b.add(row0, b.add(m, const_i64(16 * i))), b.add(k, const_i64(kk)), reg, tid)
                    for j, frags in enumerate(b_frags):
                        for r, reg in enumerate(frags):
                            k, n = _position(b, shape.b_at, r * shape.per_register, group, thread)
                            load_fragment(b_tile, b.add(col0, b.add(n, const_i64(8 * j))), b.add(k, const_i64(kk)), reg, tid)
                for i in range(t.tiles_m):
                    for j in range(t.tiles_n):
                        simt.mma(shape, a_frags[i], b_frags[j], accs[i][j], accs[i][j])
        with simt.threads() as tid:
            row0, col0, group, thread = lane_place(tid)
            dtype = p.epilogue.contraction.out.type.dtype
            for i in range(t.tiles_m):
                for j in range(t.tiles_n):
                    for c, acc in enumerate(accs[i][j]):
                        r, n = _position(b, shape.c_at, c, group, thread)
                        m = b.add(m0, b.add(row0, b.add(r, const_i64(16 * i))), name="m")
                        n = b.add(n0, b.add(col0, b.add(n, const_i64(8 * j))), name="n")
                        value = ctx.elemental.round_to(b.load(acc.at(b, tid)), dtype)
                        _store_result(ctx, p, batch, batch_index, m, n, value)


MMA_BODY = GpuBody("mma", _applies, lambda k: THREADS, emit_mma)
MMA_TF32_BODY = GpuBody("mma_tf32", _applies_tf32, lambda k: THREADS, emit_mma, precision="tf32")
