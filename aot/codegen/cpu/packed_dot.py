"""Register-blocked f32 microkernel for packed_dot (ir/ops/packed.py), the dot whose
constant weight the layout pass (rewrite/layout.py) packed as Wp [NB, K, L]
(L = vector lanes, N columns padded to NB*L). This kernel body computes an
MR x NCB tile of L-wide vectors per work item:

    for k in 0..K:  b[j] = Wp[nb0 + j, k, :]          (vector loads)
                    a[i] = splat(x[m0 + i, k])        (broadcast)
                    acc[i][j] = fma(a[i], b[j], acc[i][j])

then runs the kernel's fused epilogue (bias, activation, residual, ...) per
output element through the elemental emitter, with the accumulator lane
substituted for the dot (epilogue.py). Work item w is the row block w % MB
of column unit w // MB (unit-major, so consecutive items reuse one packed
weight panel from cache); items are independent.

The epilogue is accepted only when every fused node between the dot and the
root is elementwise (`Epilogue.find`), so each root element reads the dot at
exactly the position whose accumulator it is given. Other kernels decline
and take the elemental path.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.constants import constant
from aot.codegen.cpu.body import KernelContext, matched_body
from aot.codegen.cpu.vector_epilogue import store_run
from aot.codegen.fused_epilogue import Epilogue, packed_epilogue
from aot.codegen.loops import branch, const_i64, delinearize, for_range
from aot.codegen.math import F32
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.vector import (accumulator_budget, fma, load_vector, max_rows, prefetch, registers_per_vector,
                                   splat, store_vector, vector_of)
from aot.ir.graph import Node
from aot.ir.types import DType
from aot.ir.ops import Packing
from aot.plan import Kernel

# A weight that comes from DRAM on every call is prefetched a unit ahead into L2
# while the tile computes: an LM head's 26 MB weight then streams behind the FMAs
# instead of stalling them (GPT-2's head on Zen 4: 32 rows 4.8 -> 4.2 ms, 8 rows
# 1.75 -> 1.0, 1 row 1.14x faster). A weight comes from DRAM when it is larger than
# L2 and the model's weights together are larger than a share of L3 (on Zen 4 the
# L3 slice is 32 MiB). Where the weights stay in L3 between calls, the hardware
# prefetcher keeps up and the extra instructions cost: the 7 MB sample MLP, one row,
# ran 1.19x slower with them.
PREFETCH_MIN_WEIGHT_BYTES = 1 << 20
PREFETCH_MIN_MODEL_WEIGHT_BYTES = 16 << 20
# A weight that stays in L3 is still pushed out of L2 by the kernels between two calls,
# and a dot with many rows waits for each of its lines from L3 unless it is prefetched
# too: where a weight vector takes several registers (AVX2, SSE, NEON) and the tiles
# make PREFETCH_L3_MIN_FMAS FMA instructions or more per weight vector (rows x registers
# per vector), the prefetches hide in the FMAs' time. Zen 5, A/B: on AVX2 bert_mini (128
# rows) 6% faster on 1 and 2 threads, mlp_b64 10% / 3%, a 784-1024-1024-10 MLP at 8 rows
# 10%, 16 rows 22%; at 1 row 27% SLOWER (few FMAs per load: the prefetches take load
# slots). On AVX-512 the same rule made bert_mini and mlp_b64 1-2.5% faster on 1 thread
# but 3-7% slower on 2, so there it is left to the hardware prefetcher.
PREFETCH_L3_MIN_WEIGHT_BYTES = 128 << 10
PREFETCH_L3_MIN_FMAS = 16
# llvm.prefetch locality 2: prefetcht1 on x86, into L2 (L1, locality 3, was slower:
# the prefetched panels push out the panels being used)
PREFETCH_LOCALITY = 2


def is_cpu_packed_dot(node: Node) -> bool:
    """An f32 packed_dot in the lane order this body reads (lane l of block b: column b*L + l)."""
    return node.op == "packed_dot" and node.out.type.dtype is DType.F32 and not Packing.of(node.attrs).reversed


@dataclass(frozen=True)
class DotTiling:
    rows: int  # M: product of the lhs free dims
    depth: int  # K
    blocks: int  # NB
    lanes: int  # L
    columns: int  # N (logical, unpadded)
    mr: int  # rows per tile
    ncb: int  # column blocks per tile

    @property
    def row_blocks(self) -> int:
        return ceil_div(self.rows, self.mr)

    @property
    def units(self) -> int:
        return ceil_div(self.blocks, self.ncb)

    @property
    def items(self) -> int:
        return self.row_blocks * self.units if self.rows else 0

    @staticmethod
    def of(dot: Node, target: CpuTarget) -> DotTiling:
        blocks, depth, lanes = dot.inputs[1].type.shape
        rows = math.prod(dot.out.type.shape[:-1])
        columns = dot.attrs["columns"]
        # the tile fits the target's registers: 6 x 4 vectors on AVX-512, 6 x 1 (12 ymm) on AVX2
        accumulators = accumulator_budget(target, lanes)
        mr = max(1, min(rows, max_rows(target, lanes)))
        ncb = max(1, min(blocks, accumulators // mr, 4))
        return DotTiling(rows, depth, blocks, lanes, columns, mr, ncb)


@dataclass(frozen=True)
class DotMatch:
    epilogue: Epilogue
    tiling: DotTiling


def _dot_match(kernel: Kernel, target: CpuTarget) -> DotMatch | None:
    epilogue = packed_epilogue(kernel, is_cpu_packed_dot)
    return None if epilogue is None else DotMatch(epilogue, DotTiling.of(epilogue.contraction, target))


def _emit_dot(ctx: KernelContext, match: DotMatch) -> None:
    epilogue, t = match.epilogue, match.tiling
    b = ctx.builder
    name = epilogue.contraction.out.name
    with for_range(b, ctx.begin, ctx.end, f"{name}.tile") as item:
        unit = b.udiv(item, const_i64(t.row_blocks), name=f"{name}.unit")
        row_block = b.urem(item, const_i64(t.row_blocks), name=f"{name}.rb")
        m0 = b.mul(row_block, const_i64(t.mr), name=f"{name}.m0", flags=["nuw", "nsw"])
        nb0 = b.mul(unit, const_i64(t.ncb), name=f"{name}.nb0", flags=["nuw", "nsw"])
        row_tail = t.rows % t.mr
        col_tail = t.blocks % t.ncb
        last_rows = b.icmp_unsigned("==", row_block, const_i64(t.row_blocks - 1)) if row_tail else None
        last_cols = b.icmp_unsigned("==", unit, const_i64(t.units - 1)) if col_tail else None

        def columns(mr: int) -> None:
            branch(b, last_cols, lambda: _dot_tile(ctx, epilogue, t, mr, col_tail, m0, nb0),
                   lambda: _dot_tile(ctx, epilogue, t, mr, t.ncb, m0, nb0))

        branch(b, last_rows, lambda: columns(row_tail), lambda: columns(t.mr))


def _dot_tile(ctx: KernelContext, epilogue: Epilogue, t: DotTiling, mr: int, ncb: int, m0: ir.Value, nb0: ir.Value) -> None:
    """One mr x ncb tile (compile-time sizes) at rows m0.., column blocks nb0.."""
    b, e = ctx.builder, ctx.elemental
    dot = epilogue.contraction
    lhs, wp = dot.inputs
    name = dot.out.name
    contract = dot.attrs["lhs_contract"][0]
    free_shape = tuple(d for i, d in enumerate(lhs.type.shape) if i != contract)
    vec = vector_of(t.lanes)
    weights = ctx.params[id(wp)]
    rows = [b.add(m0, const_i64(r), name=f"{name}.m{r}", flags=["nuw", "nsw"]) for r in range(mr)]
    row_index = [delinearize(b, m, free_shape, f"{name}.m{r}") for r, m in enumerate(rows)]
    panels = []
    for j in range(ncb):
        block = b.add(nb0, const_i64(j), name=f"{name}.nb{j}", flags=["nuw", "nsw"])
        panels.append(b.mul(block, const_i64(t.depth * t.lanes), name=f"{name}.panel{j}", flags=["nuw", "nsw"]))
    slots = [[e.alloca(vec, f"{name}.acc{r}_{j}") for j in range(ncb)] for r in range(mr)]
    for row in slots:
        for slot in row:
            b.store(constant(vec, [0.0] * t.lanes), slot)
    streams = _streams_weights(wp.type.size * wp.type.dtype.itemsize, t.rows, ctx.model_weight_bytes,
                               registers_per_vector(ctx.target, t.lanes))
    with for_range(b, 0, t.depth, f"{name}.k") as k:
        e.push_scope()
        k_offset = b.mul(k, const_i64(t.lanes), flags=["nuw", "nsw"])
        weight_vectors = [load_vector(b, weights, b.add(panel, k_offset, flags=["nuw", "nsw"]), t.lanes, f"{name}.w{j}")
                          for j, panel in enumerate(panels)]
        if streams:
            _prefetch_next_unit(b, weights, [b.add(panel, k_offset, flags=["nuw", "nsw"]) for panel in panels], t)
        for r in range(mr):
            index = list(row_index[r])
            index.insert(contract, k)
            a = splat(b, e.value(lhs, index), t.lanes, f"{name}.a{r}")
            for j in range(ncb):
                b.store(fma(b, a, weight_vectors[j], b.load(slots[r][j]), f"{name}.acc{r}_{j}"), slots[r][j])
        e.pop_scope()
    if _stores_plainly(ctx.kernel, epilogue):
        _store_tile(ctx, t, mr, ncb, rows, nb0, slots, name)
        return
    # the tile goes through a stack scratch, so the epilogue is one loop over
    # (row, block) with a body of L unrolled columns (code size: one body)
    scratch = e.alloca(ir.ArrayType(F32, mr * ncb * t.lanes), f"{name}.scratch")
    first = b.gep(scratch, [const_i64(0), const_i64(0)], inbounds=True)
    for r in range(mr):
        for j in range(ncb):
            store_vector(b, first, const_i64((r * ncb + j) * t.lanes), b.load(slots[r][j]), f"{name}.spill")
    with for_range(b, 0, mr * ncb, f"{name}.vec") as v:
        r = b.udiv(v, const_i64(ncb), name=f"{name}.r")
        row = b.add(m0, r, name=f"{name}.row", flags=["nuw", "nsw"])
        block = b.add(nb0, b.urem(v, const_i64(ncb)), name=f"{name}.block", flags=["nuw", "nsw"])
        row_index = delinearize(b, row, free_shape, f"{name}.row")
        base = b.mul(v, const_i64(t.lanes), flags=["nuw", "nsw"])
        n0 = b.mul(block, const_i64(t.lanes), name=f"{name}.n0", flags=["nuw", "nsw"])
        out_row = b.mul(row, const_i64(t.columns), flags=["nuw", "nsw"])

        def lanes(count: int) -> None:
            # one run of `count` columns of one row: the epilogue on vectors (vector_epilogue)
            def index_of(lane: int) -> list[ir.Value]:
                return [*row_index, b.add(n0, const_i64(lane), flags=["nuw", "nsw"])]
            values: ir.Value | list[ir.Value]
            if count == t.lanes:
                values = load_vector(b, first, base, count, f"{name}.v")
            else:
                values = [b.load(b.gep(first, [b.add(base, const_i64(lane))], inbounds=True), name=f"{name}.v")
                          for lane in range(count)]
            store_run(ctx, epilogue, values, index_of, b.add(out_row, n0, flags=["nuw", "nsw"]),
                      frozenset({len(row_index)}))

        partial = t.columns % t.lanes
        last = b.icmp_unsigned("==", block, const_i64(t.blocks - 1)) if partial else None
        branch(b, last, lambda: lanes(partial), lambda: lanes(t.lanes))


def _streams_weights(weight_bytes: int, rows: int, model_weight_bytes: int, registers_per_vector: int) -> bool:
    """Whether the tiles prefetch the next unit's weights into L2: where the weight comes from
    DRAM on every call, or from L3 with enough FMAs per weight vector to hide the prefetches
    on a target whose vectors take several registers."""
    from_dram = weight_bytes > PREFETCH_MIN_WEIGHT_BYTES and model_weight_bytes > PREFETCH_MIN_MODEL_WEIGHT_BYTES
    from_l3 = (weight_bytes >= PREFETCH_L3_MIN_WEIGHT_BYTES and registers_per_vector >= 2
               and rows * registers_per_vector >= PREFETCH_L3_MIN_FMAS)
    return from_dram or from_l3


def _prefetch_next_unit(b: ir.IRBuilder, weights: ir.Value, offsets: list[ir.Value], t: DotTiling) -> None:
    """Prefetch the vectors one unit (ncb panels) past `offsets`: the same k of the panels
    the next unit's tiles read. Past the last unit it names memory beyond the weight,
    which a prefetch may (it never faults), so the address is not `inbounds`."""
    ahead = const_i64(t.ncb * t.depth * t.lanes)
    for offset in offsets:
        prefetch(b, weights, b.add(offset, ahead), PREFETCH_LOCALITY)


def _stores_plainly(kernel: Kernel, epilogue: Epilogue) -> bool:
    """The kernel is the dot alone (an LM head's logits): the root is [rows, N] row-major,
    so accumulators store as whole vectors, with no epilogue to run."""
    return all(n is epilogue.contraction or n.op == "constant" for n in kernel.nodes)


def _store_tile(ctx: KernelContext, t: DotTiling, mr: int, ncb: int, rows: list[ir.Value], nb0: ir.Value,
                slots: list[list[ir.Value]], name: str) -> None:
    """out[row, block*L : block*L + L] = acc; the last block of a padded N stores its real lanes one by one
    (an LM head's logits: one vector store instead of L scalar epilogues, 12% of GPT-2's head)."""
    b = ctx.builder
    partial = t.columns % t.lanes
    for r in range(mr):
        out_row = b.mul(rows[r], const_i64(t.columns), flags=["nuw", "nsw"])
        for j in range(ncb):
            block = b.add(nb0, const_i64(j), flags=["nuw", "nsw"])
            at = b.add(out_row, b.mul(block, const_i64(t.lanes), flags=["nuw", "nsw"]), flags=["nuw", "nsw"])
            vec = b.load(slots[r][j])

            def whole(vec: ir.Value = vec, at: ir.Value = at, r: int = r, j: int = j) -> None:
                store_vector(b, ctx.out_ptr, at, vec, f"{name}.store{r}_{j}")

            def lanes(vec: ir.Value = vec, at: ir.Value = at) -> None:
                for lane in range(partial):
                    address = b.gep(ctx.out_ptr, [b.add(at, const_i64(lane))], inbounds=True, name=f"{name}.tail")
                    b.store(b.extract_element(vec, constant(ir.IntType(32), lane)), address, align=4)

            last = b.icmp_unsigned("==", block, const_i64(t.blocks - 1)) if partial else None
            branch(b, last, lanes, whole)


DOT_EMITTER = matched_body(_dot_match, lambda match: match.tiling.items, _emit_dot)
