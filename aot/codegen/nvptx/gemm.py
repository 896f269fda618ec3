"""The GPU matrix-multiply bodies: f32 `dot` and `packed_dot` kernels with their fused epilogue.

A contraction is seen as C[batch, m, n] = sum_k A[batch, m, k] * B[batch, k, n]: m runs
over lhs's free dims, n over rhs's (a packed_dot's columns), k over the contracting
dims, each linearized row-major, so any dot_general (several batch, free or contracting
dims, a contracting dim anywhere) is one shape of problem. Operands are read through
their affine view down to a buffer where there is one (dot_dynamic.StridedView:
slices, transposes, head splits cost no copy), else through the elemental emitter.

gemm: a classic tiled SGEMM. A block of 256 threads computes a BM x BN output tile
    (128x64, 64x64 or 32x64: the largest that still gives every SM a block), each
    thread a TM x TN register tile (8x4, 4x4, 2x4; thread variables: registers on the
    GPU). The K loop steps BK at a time: the block loads the A tile (BM x BK) and the B tile
    (BK x BN) into shared memory, coalesced (the operand's contiguous dim is the one
    consecutive threads walk; a packed weight's [K, L] panel is read lane-fastest as
    one contiguous run) and zero-filled past the edges; sync; each thread runs BK
    rank-1 updates from shared memory (16-byte loads, conflict-free: A stored
    k-major with its rows padded). The next step's global loads are issued into
    registers before those updates, so they land while the FMAs run.
gemv: M <= SMALL_ROWS rows (decode-time shapes, attention of one query). A 64-row
    tile would idle most of its threads, and N / BN blocks are too few to fill a
    GPU, so a block takes GEMV_COLUMNS columns and splits K over its 256 threads
    (KG = 256 / BN groups): each thread streams its own weights straight from
    global memory (a warp reads one contiguous run of a packed panel, each weight
    read once, GEMV_UNROLL loads in flight) and keeps all M rows' accumulators;
    the A chunk is staged in shared memory; the KG partial sums meet in shared
    memory at the end.

Each K step syncs before it stages (the previous step's readers are done) and after
(the tiles are complete); no sync follows the last step's reads. The kernels declare
__launch_bounds__(256, 2): at most 128 registers a thread, and none spilled on the
shapes tested (tests/codegen/nvptx/test_gemm.py).

Both run the kernel's fused epilogue (bias, activation, residual, ...) per output
element through the elemental emitter with the accumulator substituted for the
contraction (cpu/epilogue.py), so only where the root reads the contraction through
elementwise ops. Contraction-sum partners (planning/contraction_sum.py) pair packed
convs only, never a dot, so there are none here. Declined (the rows body takes the
kernel): non-f32 contractions, empty extents, a kernel that loops elsewhere (a
reduction or a second contraction fused into an operand), a packed weight that is
not a buffer.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.fused_epilogue import Epilogue
from aot.codegen.strided_view import StridedView
from aot.codegen.loops import const_i64, delinearize
from aot.codegen.math import F32, intrinsic
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.elementwise import LOOPING_OPS
from aot.codegen.nvptx.simt import GpuSimt, Simt, ThreadVar
from aot.ir.graph import Node, Value
from aot.ir.ops import Packing
from aot.ir.ops.linalg import dot_free_dims
from aot.ir.types import DType
from aot.plan import Kernel

THREADS = 256
# rows up to which a kernel takes the split-K gemv body rather than 64-row tiles
SMALL_ROWS = 16
GEMV_COLUMNS = 16
GEMV_UNROLL = 8  # k steps per thread per staged A chunk: independent weight loads in flight
# shared rows padded by 4 floats: a k-fast store to the k-major tile hits 8 banks, not 1,
# and every row still starts 16-byte aligned for the vector reads
PAD = 4
VECTOR = 4
# two 256-thread blocks per SM at least: at most 128 registers a thread, so one block's
# barrier wait overlaps the other's work
BLOCKS_PER_SM = 2


@dataclass(frozen=True)
class Tile:
    """BM x BN per block in steps of BK, TM x TN per thread."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)


# 32 accumulators a thread where M fills 128-row tiles (the reuse of every shared
# load doubles), 16 or 8 where that leaves SMs idle; all 256 threads, under 9 KiB of
# shared memory
LARGE = Tile(128, 64, 8, 8, 4)
MEDIUM = Tile(64, 64, 16, 4, 4)
SMALL = Tile(32, 64, 16, 2, 4)
# blocks a tile choice wants at least: one per SM of an H100/H200 (132; an A100 has
# 108). Fewer, larger tiles would leave SMs idle for the whole kernel.
FILL_BLOCKS = 132


# == the problem ==========================================================================
@dataclass(frozen=True)
class Axes:
    """How one operand is indexed: which of its dims are batch, outer (m or n) and contracting."""

    batch: tuple[int, ...]
    outer: tuple[int, ...]
    contract: tuple[int, ...]


@dataclass(frozen=True)
class Operand:
    """One contraction input, read at (batch index, outer linear, k linear)."""

    value: Value
    axes: Axes
    view: StridedView | None  # direct addressing, where the value is an affine view of a buffer
    packing: Packing | None  # a packed_dot weight [NB, K, L]: outer is its n

    def strides(self) -> tuple[int, ...]:
        if self.view is not None:
            return self.view.strides
        step, strides = 1, []
        for dim in reversed(self.value.type.shape):
            strides.append(step)
            step *= dim
        return tuple(reversed(strides))

    def k_fast(self) -> bool:
        """Consecutive k lie closer in memory than consecutive outer indices: loads walk k."""
        if self.packing is not None:
            return False
        shape, strides = self.value.type.shape, self.strides()

        def innermost(dims: tuple[int, ...]) -> float:
            real = [d for d in dims if shape[d] > 1]
            return abs(strides[real[-1]]) if real else math.inf

        return innermost(self.axes.contract) < innermost(self.axes.outer)


@dataclass(frozen=True)
class Problem:
    """One f32 contraction kernel: sizes, operands and the epilogue that reads the result."""

    epilogue: Epilogue
    lhs: Operand
    rhs: Operand
    batch_shape: tuple[int, ...]
    m_shape: tuple[int, ...]
    n_shape: tuple[int, ...]
    k_shape: tuple[int, ...]

    @property
    def batches(self) -> int:
        return math.prod(self.batch_shape)

    @property
    def rows(self) -> int:
        return math.prod(self.m_shape)

    @property
    def columns(self) -> int:
        return math.prod(self.n_shape)

    @property
    def depth(self) -> int:
        return math.prod(self.k_shape)

    @staticmethod
    def of(kernel: Kernel, is_contraction: Callable[[Node], bool] | None = None) -> Problem | None:
        """The kernel's problem, for the contraction `is_contraction` takes (default: f32
        operands and result; nvptx/mma.py asks for f16/bf16 ones)."""
        epilogue = Epilogue.find(kernel, is_contraction or _is_f32_contraction)
        if epilogue is None:
            return None
        dot = epilogue.contraction
        if any(n.op in LOOPING_OPS and n is not dot for n in kernel.nodes):
            return None  # an operand that reduces would be recomputed per element loaded
        if kernel.root.type.shape != dot.out.type.shape:
            return None
        params = {id(p) for p in kernel.params}
        fused = {id(n) for n in kernel.nodes}
        x, y = dot.inputs
        if dot.op == "packed_dot":
            if id(y) not in params:
                return None
            (lc,) = dot.attrs["lhs_contract"]
            lhs_axes = Axes((), tuple(d for d in range(x.type.rank) if d != lc), (lc,))
            rhs = Operand(y, Axes((), (0,), (1,)), None, Packing.of(dot.attrs))
            n_shape: tuple[int, ...] = (dot.attrs["columns"],)
        else:
            a = dot.attrs
            lhs_axes = Axes(a["lhs_batch"], tuple(dot_free_dims(x.type.rank, a["lhs_batch"], a["lhs_contract"])),
                            a["lhs_contract"])
            rhs_axes = Axes(a["rhs_batch"], tuple(dot_free_dims(y.type.rank, a["rhs_batch"], a["rhs_contract"])),
                            a["rhs_contract"])
            rhs = Operand(y, rhs_axes, StridedView.of(y, params, fused), None)
            n_shape = tuple(y.type.shape[d] for d in rhs_axes.outer)
        lhs = Operand(x, lhs_axes, StridedView.of(x, params, fused), None)
        problem = Problem(epilogue, lhs, rhs, tuple(x.type.shape[d] for d in lhs_axes.batch),
                          tuple(x.type.shape[d] for d in lhs_axes.outer), n_shape,
                          tuple(x.type.shape[d] for d in lhs_axes.contract))
        if not (problem.batches and problem.rows and problem.columns and problem.depth):
            return None
        return problem


def _is_f32_contraction(node: Node) -> bool:
    return (node.op in ("dot", "packed_dot") and node.out.type.dtype is DType.F32
            and all(v.type.dtype is DType.F32 for v in node.inputs))


# == operand reads ==========================================================================
def _merged(shape: Sequence[int], strides: Sequence[int]) -> list[tuple[int, int]]:
    """(size, stride) runs of dims: neighbours that are contiguous with each other merge,
    so [2, 5, 64] rows of a row-major x index as one dim (no division per load)."""
    runs: list[tuple[int, int]] = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if runs and runs[-1][1] == stride * size:
            runs[-1] = (runs[-1][0] * size, stride)
        else:
            runs.append((size, stride))
    return runs


def _strided_offset(b: ir.IRBuilder, linear: ir.Value, shape: Sequence[int], strides: Sequence[int],
                    name: str) -> ir.Value:
    runs = _merged(shape, strides)
    index = delinearize(b, linear, [size for size, _ in runs], name)
    total: ir.Value = const_i64(0)
    for i, (_, stride) in zip(index, runs):
        total = b.add(total, b.mul(i, const_i64(stride)), name=name)
    return total


class Reader:
    """Emits reads of one operand; `base` (the batch's offset) is computed once per block."""

    def __init__(self, ctx: GpuContext, operand: Operand, batch_index: list[ir.Value], name: str):
        self.ctx, self.op, self.batch_index, self.name = ctx, operand, batch_index, name
        b = ctx.builder
        self.base: ir.Value = const_i64(0)
        if operand.view is not None:
            strides = operand.view.strides
            total: ir.Value = const_i64(operand.view.offset)
            for i, d in zip(batch_index, operand.axes.batch):
                if strides[d]:
                    total = b.add(total, b.mul(i, const_i64(strides[d])), name=f"{name}.batch")
            self.base = total

    def read(self, outer: ir.Value, k: ir.Value) -> ir.Value:
        """The operand at (this block's batch, outer linear, k linear), as f32."""
        b, e, op = self.ctx.builder, self.ctx.elemental, self.op
        shape = op.value.type.shape
        if op.packing is not None:
            lanes = op.packing.lanes
            depth = shape[1]
            lane = b.urem(outer, const_i64(lanes))
            if op.packing.reversed:
                lane = b.sub(const_i64(lanes - 1), lane)
            panel = b.mul(b.udiv(outer, const_i64(lanes)), const_i64(depth * lanes))
            at = b.add(b.add(panel, b.mul(k, const_i64(lanes))), lane, name=f"{self.name}.at")
            return e.load_at(op.value, at)
        if op.view is not None:
            strides = op.view.strides
            outer_offset = _strided_offset(b, outer, [shape[d] for d in op.axes.outer],
                                           [strides[d] for d in op.axes.outer], f"{self.name}.o")
            k_offset = _strided_offset(b, k, [shape[d] for d in op.axes.contract],
                                       [strides[d] for d in op.axes.contract], f"{self.name}.k")
            at = b.add(self.base, b.add(outer_offset, k_offset), name=f"{self.name}.at")
            return e.load_at(op.view.param, at)
        index: list[ir.Value] = [const_i64(0)] * len(shape)
        for dims, values in ((op.axes.batch, self.batch_index),
                             (op.axes.outer, delinearize(b, outer, [shape[d] for d in op.axes.outer], f"{self.name}.o")),
                             (op.axes.contract, delinearize(b, k, [shape[d] for d in op.axes.contract], f"{self.name}.k"))):
            for d, v in zip(dims, values):
                index[d] = v
        e.push_scope()
        value = e.value(op.value, index)
        e.pop_scope()
        return value

    def read_or_zero(self, outer: ir.Value, outer_size: int, k: ir.Value, depth: int) -> ir.Value:
        """read() where outer < outer_size and k < depth, else 0; the read itself is clamped in bounds."""
        b = self.ctx.builder
        inside = b.and_(b.icmp_unsigned("<", outer, const_i64(outer_size)), b.icmp_unsigned("<", k, const_i64(depth)))
        value = self.read(_clamp(b, outer, outer_size), _clamp(b, k, depth))
        return b.select(inside, value, ir.Constant(F32, 0.0), name=f"{self.name}.v")


def _clamp(b: ir.IRBuilder, i: ir.Value, size: int) -> ir.Value:
    last = const_i64(size - 1)
    return b.select(b.icmp_unsigned("<", i, last), i, last)


def _pin(simt: Simt, values: list[ir.Value]) -> list[ir.Value]:
    """The values through an empty volatile asm on the GPU: their FMAs stay in the phase that
    computes them. Where the K loop runs once, LLVM otherwise sinks the FMA chains into the
    epilogue's conditional stores, behind all the step's shared loads, and ptxas holds 128
    loaded floats at once (spills). The asm emits no instruction."""
    if not isinstance(simt, GpuSimt):
        return values
    b = simt.builder
    pin = ir.InlineAsm(ir.FunctionType(F32, [F32]), "", "=f,0", side_effect=True)
    return [b.call(pin, [v]) for v in values]


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, acc: ir.Value) -> ir.Value:
    fn = intrinsic(b.module, "llvm.fmuladd.f32", F32, [F32, F32, F32])
    return b.call(fn, [x, y, acc])


def _load_run(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, count: int) -> list[ir.Value]:
    """`count` consecutive floats at base[offset], in 16-byte loads where count allows (offset
    a multiple of 4 floats from a 16-byte aligned base)."""
    if count % VECTOR:
        return [b.load(b.gep(base, [b.add(offset, const_i64(i))], inbounds=True)) for i in range(count)]
    vector = ir.VectorType(F32, VECTOR)
    values = []
    for first in range(0, count, VECTOR):
        addr = b.gep(base, [b.add(offset, const_i64(first))], inbounds=True)
        packed = b.load(b.bitcast(addr, vector.as_pointer()), align=16)
        values += [b.extract_element(packed, ir.Constant(ir.IntType(32), i)) for i in range(VECTOR)]
    return values


# == block-level helpers ====================================================================
def _block_batch(ctx: GpuContext, p: Problem, batch: ir.Value) -> tuple[list[ir.Value], Reader, Reader]:
    batch_index = delinearize(ctx.builder, batch, p.batch_shape, "batch")
    return batch_index, Reader(ctx, p.lhs, batch_index, "a"), Reader(ctx, p.rhs, batch_index, "b")


@dataclass(frozen=True)
class BlockTile:
    """What a tiled body's block computes: output rows m0.., columns n0.. of batch `batch`."""

    batch: ir.Value
    batch_index: list[ir.Value]
    m0: ir.Value
    n0: ir.Value
    a: Reader
    b: Reader

    @staticmethod
    def of(ctx: GpuContext, p: Problem, block: ir.Value, bm: int, bn: int) -> BlockTile:
        """Block `block`'s tile, m tiles fastest: consecutive blocks share one B (weight) panel in L2."""
        b = ctx.builder
        m_tiles, n_tiles = ceil_div(p.rows, bm), ceil_div(p.columns, bn)
        mt = b.urem(block, const_i64(m_tiles), name="mt")
        rest = b.udiv(block, const_i64(m_tiles))
        nt = b.urem(rest, const_i64(n_tiles), name="nt")
        batch = b.udiv(rest, const_i64(n_tiles), name="batch")
        m0 = b.mul(mt, const_i64(bm), name="m0")
        n0 = b.mul(nt, const_i64(bn), name="n0")
        batch_index, a_reader, b_reader = _block_batch(ctx, p, batch)
        return BlockTile(batch, batch_index, m0, n0, a_reader, b_reader)


def _store_result(ctx: GpuContext, p: Problem, batch: ir.Value, batch_index: list[ir.Value], m: ir.Value,
                  n: ir.Value, acc: ir.Value) -> None:
    """out[batch, m, n] = the root there, reading `acc` for the contraction; nothing past the edges."""
    b, e, root = ctx.builder, ctx.elemental, ctx.kernel.root
    inside = b.and_(b.icmp_unsigned("<", m, const_i64(p.rows)), b.icmp_unsigned("<", n, const_i64(p.columns)))
    with b.if_then(inside):
        e.push_scope()
        e.substitute(p.epilogue.contraction.out, acc)
        index = [*batch_index, *delinearize(b, m, p.m_shape, "m"), *delinearize(b, n, p.n_shape, "n")]
        value = e.to_storage(e.value(root, index), root.type.dtype)
        e.substitute(p.epilogue.contraction.out, None)
        e.pop_scope()
        linear = b.add(b.mul(b.add(b.mul(batch, const_i64(p.rows)), m), const_i64(p.columns)), n)
        b.store(value, b.gep(ctx.out_ptr, [linear], inbounds=True, name="out"), align=root.type.dtype.itemsize)


@dataclass(frozen=True)
class Staging:
    """An outer_size x k_size tile in shared[outer * strides[0] + k * strides[1]], each thread
    copying a strided share of its elements in `order`: "k" (k fastest), "outer", or "packed"
    (lane, k, block: one contiguous run of a packed panel per warp)."""

    shared: ir.Value
    strides: tuple[int, int]
    outer_size: int
    k_size: int
    order: str
    lanes: int = 1

    @property
    def per_thread(self) -> int:
        return ceil_div(self.outer_size * self.k_size, THREADS)

    def each(self, b: ir.IRBuilder, tid: ir.Value, copy: Callable[[int, ir.Value, ir.Value], None]) -> None:
        """copy(j, outer, k) for this thread's j-th element (guarded where the tile does not
        fill every thread's last share)."""
        size = self.outer_size * self.k_size
        for j in range(self.per_thread):
            e = b.add(tid, const_i64(j * THREADS), name="e")
            if self.order == "k":
                kk, oo = b.urem(e, const_i64(self.k_size)), b.udiv(e, const_i64(self.k_size))
            elif self.order == "packed":
                kk = b.urem(b.udiv(e, const_i64(self.lanes)), const_i64(self.k_size))
                block = b.udiv(e, const_i64(self.lanes * self.k_size))
                oo = b.add(b.mul(block, const_i64(self.lanes)), b.urem(e, const_i64(self.lanes)))
            else:
                oo, kk = b.urem(e, const_i64(self.outer_size)), b.udiv(e, const_i64(self.outer_size))
            if size % THREADS and (j + 1) * THREADS > size:
                with b.if_then(b.icmp_unsigned("<", e, const_i64(size))):
                    copy(j, oo, kk)
            else:
                copy(j, oo, kk)

    def at(self, b: ir.IRBuilder, outer: ir.Value, k: ir.Value) -> ir.Value:
        offset = b.add(b.mul(outer, const_i64(self.strides[0])), b.mul(k, const_i64(self.strides[1])))
        return b.gep(self.shared, [offset], inbounds=True)

    def stage(self, b: ir.IRBuilder, tid: ir.Value, read: Callable[[ir.Value, ir.Value], ir.Value]) -> None:
        """Every element of the tile, read(outer, k), into shared memory."""
        self.each(b, tid, lambda j, o, k: b.store(read(o, k), self.at(b, o, k)))

    def fetch(self, b: ir.IRBuilder, tid: ir.Value, regs: list[ThreadVar],
              read: Callable[[ir.Value, ir.Value], ir.Value]) -> None:
        """This thread's elements, read(outer, k), into its registers (the next step's tile,
        loaded while the FMAs of this one run)."""
        self.each(b, tid, lambda j, o, k: b.store(read(o, k), regs[j].at(b, tid)))

    def deposit(self, b: ir.IRBuilder, tid: ir.Value, regs: list[ThreadVar]) -> None:
        """What fetch() loaded, into shared memory."""
        self.each(b, tid, lambda j, o, k: b.store(b.load(regs[j].at(b, tid)), self.at(b, o, k)))


def _order(operand: Operand, outer_tile: int) -> tuple[str, int]:
    """How a tile of `operand` is walked: along its contiguous dim."""
    if operand.packing is not None and outer_tile % operand.packing.lanes == 0:
        return "packed", operand.packing.lanes
    return ("k" if operand.k_fast() else "outer"), 1


# == gemm: the tiled body ====================================================================
def _tile_of(p: Problem) -> Tile:
    """The largest tile that M fills and that gives every SM a block; else the smallest."""
    for tile in (LARGE, MEDIUM):
        blocks = p.batches * ceil_div(p.rows, tile.bm) * ceil_div(p.columns, tile.bn)
        if p.rows >= tile.bm and blocks >= FILL_BLOCKS:
            return tile
    return SMALL


def _gemm_applies(kernel: Kernel) -> bool:
    p = Problem.of(kernel)
    return p is not None and p.rows > SMALL_ROWS


def emit_gemm(ctx: GpuContext) -> None:
    p = Problem.of(ctx.kernel)
    assert p is not None
    t = _tile_of(p)
    simt, b = ctx.simt, ctx.builder
    simt.min_blocks_per_sm = BLOCKS_PER_SM
    a_row, b_row = t.bm + PAD, t.bn + PAD
    a_tile = simt.shared(F32, t.bk * a_row, "a_tile")
    b_tile = simt.shared(F32, t.bk * b_row, "b_tile")
    accs = [simt.thread_var(F32, f"acc{i}") for i in range(t.tm * t.tn)]
    m_tiles, n_tiles = ceil_div(p.rows, t.bm), ceil_div(p.columns, t.bn)
    a_stage = Staging(a_tile, (1, a_row), t.bm, t.bk, *_order(p.lhs, t.bm))
    b_stage = Staging(b_tile, (1, b_row), t.bn, t.bk, *_order(p.rhs, t.bn))
    a_regs = [simt.thread_var(F32, f"a{j}") for j in range(a_stage.per_thread)]
    b_regs = [simt.thread_var(F32, f"b{j}") for j in range(b_stage.per_thread)]
    steps = ceil_div(p.depth, t.bk)
    across = t.bn // t.tn  # threads along n
    with simt.blocks(p.batches * m_tiles * n_tiles) as block:
        tile = BlockTile.of(ctx, p, block, t.bm, t.bn)
        batch, batch_index, m0, n0, a_reader, b_reader = tile.batch, tile.batch_index, tile.m0, tile.n0, tile.a, tile.b

        def fetch(tid: ir.Value, k0: ir.Value) -> None:
            a_stage.fetch(b, tid, a_regs, lambda o, k: a_reader.read_or_zero(b.add(m0, o), p.rows, b.add(k0, k), p.depth))
            b_stage.fetch(b, tid, b_regs,
                          lambda o, k: b_reader.read_or_zero(b.add(n0, o), p.columns, b.add(k0, k), p.depth))

        with simt.threads() as tid:
            for acc in accs:
                b.store(ir.Constant(F32, 0.0), acc.at(b, tid))
            fetch(tid, const_i64(0))
        with simt.uniform_range(0, steps, "kt") as kt:
            simt.sync()  # the last step's readers are done with the tiles
            with simt.threads() as tid:
                a_stage.deposit(b, tid, a_regs)
                b_stage.deposit(b, tid, b_regs)
            simt.sync()
            with simt.threads() as tid:
                following = b.add(kt, const_i64(1), name="kt.next")
                # the next step's global loads go out before this step's FMAs and land
                # while they run (one tile of registers: 8 floats a thread)
                with b.if_then(b.icmp_unsigned("<", following, const_i64(steps))):
                    fetch(tid, b.mul(following, const_i64(t.bk), name="k0"))
                _rank_updates(simt, t, tid, accs, a_tile, b_tile, a_row, b_row, across)
        with simt.threads() as tid:
            ty, tx = b.udiv(tid, const_i64(across)), b.urem(tid, const_i64(across))
            for i in range(t.tm):
                m = b.add(m0, b.add(b.mul(ty, const_i64(t.tm)), const_i64(i)), name="m")
                for j in range(t.tn):
                    n = b.add(n0, b.add(b.mul(tx, const_i64(t.tn)), const_i64(j)), name="n")
                    _store_result(ctx, p, batch, batch_index, m, n, b.load(accs[i * t.tn + j].at(b, tid)))


def _rank_updates(simt: Simt, t: Tile, tid: ir.Value, accs: list[ThreadVar], a_tile: ir.Value,
                  b_tile: ir.Value, a_row: int, b_row: int, across: int) -> None:
    """acc[i][j] += A[k][ty*TM + i] * B[k][tx*TN + j] for every k of the staged tiles."""
    b = simt.builder
    ty, tx = b.udiv(tid, const_i64(across)), b.urem(tid, const_i64(across))
    a_at = b.mul(ty, const_i64(t.tm))
    b_at = b.mul(tx, const_i64(t.tn))
    values = [b.load(acc.at(b, tid)) for acc in accs]
    for k in range(t.bk):
        a = _load_run(b, a_tile, b.add(a_at, const_i64(k * a_row)), t.tm)
        w = _load_run(b, b_tile, b.add(b_at, const_i64(k * b_row)), t.tn)
        values = [_fma(b, a[i], w[j], values[i * t.tn + j]) for i in range(t.tm) for j in range(t.tn)]
    for acc, value in zip(accs, _pin(simt, values)):
        b.store(value, acc.at(b, tid))


# == gemv: split-K for few rows ===============================================================
def _gemv_applies(kernel: Kernel) -> bool:
    p = Problem.of(kernel)
    return p is not None and p.rows <= SMALL_ROWS


def emit_gemv(ctx: GpuContext) -> None:
    p = Problem.of(ctx.kernel)
    assert p is not None
    simt, b = ctx.simt, ctx.builder
    simt.min_blocks_per_sm = BLOCKS_PER_SM
    groups = THREADS // GEMV_COLUMNS
    chunk = groups * GEMV_UNROLL  # k per staged A chunk
    rows = p.rows
    a_chunk = simt.shared(F32, rows * chunk, "a_chunk")
    partial = simt.shared(F32, THREADS * rows, "partial")
    accs = [simt.thread_var(F32, f"acc{i}") for i in range(rows)]
    n_tiles = ceil_div(p.columns, GEMV_COLUMNS)
    k_fast = p.rhs.k_fast()
    # stored [m][k]: the update phase reads one m row at consecutive k per warp
    a_stage = Staging(a_chunk, (chunk, 1), rows, chunk, "k" if p.lhs.k_fast() or rows == 1 else "outer")

    def position(tid: ir.Value) -> tuple[ir.Value, ir.Value]:
        """(k group, column) of a thread: consecutive threads walk B's contiguous dim."""
        if k_fast:
            return b.urem(tid, const_i64(groups)), b.udiv(tid, const_i64(groups))
        return b.udiv(tid, const_i64(GEMV_COLUMNS)), b.urem(tid, const_i64(GEMV_COLUMNS))

    with simt.blocks(p.batches * n_tiles) as block:
        nt = b.urem(block, const_i64(n_tiles), name="nt")
        batch = b.udiv(block, const_i64(n_tiles), name="batch")
        n0 = b.mul(nt, const_i64(GEMV_COLUMNS), name="n0")
        batch_index, a_reader, b_reader = _block_batch(ctx, p, batch)
        with simt.threads() as tid:
            for acc in accs:
                b.store(ir.Constant(F32, 0.0), acc.at(b, tid))
        with simt.uniform_range(0, ceil_div(p.depth, chunk), "kc") as kc:
            k0 = b.mul(kc, const_i64(chunk), name="k0")
            simt.sync()  # first, as in emit_gemm
            with simt.threads() as tid:
                a_stage.stage(b, tid, lambda o, k: a_reader.read_or_zero(o, rows, b.add(k0, k), p.depth))
            simt.sync()
            with simt.threads() as tid:
                group, column = position(tid)
                n = _clamp(b, b.add(n0, column), p.columns)
                values = [b.load(acc.at(b, tid)) for acc in accs]
                for u in range(GEMV_UNROLL):
                    kk = b.add(group, const_i64(u * groups), name="kk")
                    k = b.add(k0, kk)
                    # past K the weight read is clamped and the staged A is 0
                    w = b_reader.read(n, _clamp(b, k, p.depth))
                    for m in range(rows):
                        a = b.load(b.gep(a_chunk, [b.add(kk, const_i64(m * chunk))], inbounds=True))
                        values[m] = _fma(b, a, w, values[m])
                for acc, value in zip(accs, _pin(simt, values)):
                    b.store(value, acc.at(b, tid))
        with simt.threads() as tid:
            group, column = position(tid)
            for m in range(rows):
                slot = b.add(b.mul(b.add(b.mul(group, const_i64(rows)), const_i64(m)), const_i64(GEMV_COLUMNS)), column)
                b.store(b.load(accs[m].at(b, tid)), b.gep(partial, [slot], inbounds=True))
        simt.sync()
        with simt.threads() as tid:
            with b.if_then(b.icmp_unsigned("<", tid, const_i64(rows * GEMV_COLUMNS))):
                m, column = b.udiv(tid, const_i64(GEMV_COLUMNS)), b.urem(tid, const_i64(GEMV_COLUMNS))
                total: ir.Value = ir.Constant(F32, 0.0)
                for g in range(groups):
                    total = b.fadd(total, b.load(b.gep(partial, [b.add(tid, const_i64(g * rows * GEMV_COLUMNS))],
                                                       inbounds=True)))
                _store_result(ctx, p, batch, batch_index, m, b.add(n0, column), total)


def _gemm_threads(kernel: Kernel) -> int:
    p = Problem.of(kernel)
    assert p is not None
    return _tile_of(p).threads


GEMM_BODY = GpuBody("gemm", _gemm_applies, _gemm_threads, emit_gemm)
GEMV_BODY = GpuBody("gemv", _gemv_applies, lambda k: THREADS, emit_gemv)
