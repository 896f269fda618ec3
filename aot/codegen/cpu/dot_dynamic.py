"""f32 dot whose operands are strided views of run-time buffers (attention's Q@K^T, probs@V).

The packed microkernel (packed_dot.py) needs a constant weight laid out by the
layout pass. Attention's dots read two values computed at run time, usually
through fused data movement: V is sliced out of the fused QKV projection,
split into heads and transposed. Every such chain of slice, reshape,
transpose, broadcast and reverse is an affine map, so each operand is
`param[offset + sum(index[d] * strides[d])]` (`StridedView.of`); no copy is
made. The kernel then runs the same register tile as packed_dot.py:

    for k in 0..K:  b[j] = rhs[k, n0 + j*L : n0 + (j+1)*L]     (vector loads)
                    a[i] = splat(lhs[m0 + i, k])               (broadcast)
                    acc[i][j] = fma(a[i], b[j], acc[i][j])

When rhs is not contiguous along N (K^T read untransposed: contiguous along
K) or the column unit is a partial one, its K x W panel is first gathered
into a zero-padded stack scratch, once per work item, and the tile reads the
scratch. Work item = (batch, column unit, row chunk); a chunk is many row
blocks, so the packing is amortized over them.

Outputs are row-major [batch, lhs free, N], so whole vectors store directly
when the root is the dot; otherwise the fused elementwise epilogue (scale,
mask, ...) runs per element on the accumulators (epilogue.store_epilogue).
Declined (elemental path, still correct): non-f32, several contracting dims
or rhs free dims, operands reached through non-affine ops (pad, concat,
elementwise), a packing scratch above MAX_SCRATCH_BYTES.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.constants import constant
from aot.codegen.cpu.body import BodyEmitter, KernelContext
from aot.codegen.cpu.epilogue import store_epilogue
from aot.codegen.fused_epilogue import Epilogue
from aot.codegen.strided_view import StridedView
from aot.codegen.loops import branch, const_i64, delinearize, for_range
from aot.codegen.math import F32
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.vector import accumulator_budget, fma, load_vector, max_rows, splat, store_vector, vector_of
from aot.ir.graph import Node
from aot.ir.types import DType
from aot.ir.ops.linalg import dot_free_dims
from aot.plan import Kernel

LANES = 16  # one AVX-512 register of f32 (two AVX2 ones)
# rows per work item: enough row blocks that one packed rhs panel serves many of them
CHUNK_ROWS = 128
# the packed panel lives on the stack of whichever thread runs the item
MAX_SCRATCH_BYTES = 128 * 1024
# rows of a tile when few column blocks leave accumulators over (12 rows x 2 blocks on AVX-512)
MAX_ROWS_FEW_BLOCKS = 12


# == the plan of one dot ==================================================================
@dataclass(frozen=True)
class DynamicDot:
    """Sizes, operand strides and tiling of one dot kernel (all compile-time)."""

    epilogue: Epilogue
    lhs: StridedView
    rhs: StridedView
    batch_shape: tuple[int, ...]
    free_shape: tuple[int, ...]  # lhs free dims (M = their product)
    depth: int  # K
    columns: int  # N
    lhs_batch: tuple[int, ...]  # lhs strides of the batch dims
    lhs_free: tuple[int, ...]
    lhs_k: int
    rhs_batch: tuple[int, ...]
    rhs_k: int
    rhs_n: int
    mr: int
    ncb: int

    @property
    def rows(self) -> int:
        size = 1
        for d in self.free_shape:
            size *= d
        return size

    @property
    def batches(self) -> int:
        size = 1
        for d in self.batch_shape:
            size *= d
        return size

    @property
    def row_blocks(self) -> int:
        return ceil_div(self.rows, self.mr)

    @property
    def chunk_blocks(self) -> int:
        return max(1, CHUNK_ROWS // self.mr)

    @property
    def chunks(self) -> int:
        return ceil_div(self.row_blocks, self.chunk_blocks)

    @property
    def unit_columns(self) -> int:
        return self.ncb * LANES

    @property
    def units(self) -> int:
        return ceil_div(self.columns, self.unit_columns)

    @property
    def items(self) -> int:
        return self.batches * self.units * self.chunks if self.rows and self.columns else 0

    def needs_packing(self, columns: int) -> bool:
        """A unit of `columns` columns reads rhs through the scratch: rhs strided along N, or a partial vector."""
        return self.rhs_n != 1 or columns % LANES != 0

    @staticmethod
    def of(kernel: Kernel, target: CpuTarget) -> DynamicDot | None:
        epilogue = Epilogue.find(kernel, _is_dynamic_dot)
        if epilogue is None:
            return None
        dot = epilogue.contraction
        attrs = dot.attrs
        lhs_v, rhs_v = dot.inputs
        if len(attrs["lhs_contract"]) != 1:
            return None
        rhs_free = dot_free_dims(rhs_v.type.rank, attrs["rhs_batch"], attrs["rhs_contract"])
        if len(rhs_free) != 1:
            return None
        params = {id(p) for p in kernel.params}
        fused = {id(n) for n in kernel.nodes}
        lhs = StridedView.of(lhs_v, params, fused)
        rhs = StridedView.of(rhs_v, params, fused)
        if lhs is None or rhs is None:
            return None
        lhs_free = dot_free_dims(lhs_v.type.rank, attrs["lhs_batch"], attrs["lhs_contract"])
        (lc,), (rc,), (rn,) = attrs["lhs_contract"], attrs["rhs_contract"], rhs_free
        free_shape = tuple(lhs_v.type.shape[d] for d in lhs_free)
        rows = 1
        for d in free_shape:
            rows *= d
        columns = rhs_v.type.shape[rn]
        # AVX-512's 32 registers hold 24 accumulators: four column blocks of 6 rows (Q@K^T), or
        # 12 rows of a narrow head's two blocks (probs@V); AVX2's 16 hold 12 ymm: 6 rows of one block
        accumulators = accumulator_budget(target, LANES)
        ncb = max(1, min(ceil_div(columns, LANES), accumulators // max(1, min(rows, max_rows(target, LANES))), 4))
        mr = max(1, min(rows, accumulators // ncb, MAX_ROWS_FEW_BLOCKS))
        plan = DynamicDot(
            epilogue, lhs, rhs, tuple(lhs_v.type.shape[d] for d in attrs["lhs_batch"]), free_shape,
            lhs_v.type.shape[lc], columns,
            tuple(lhs.strides[d] for d in attrs["lhs_batch"]), tuple(lhs.strides[d] for d in lhs_free), lhs.strides[lc],
            tuple(rhs.strides[d] for d in attrs["rhs_batch"]), rhs.strides[rc], rhs.strides[rn], mr, ncb,
        )
        packs = plan.needs_packing(plan.unit_columns) or plan.needs_packing(plan.columns % plan.unit_columns or plan.unit_columns)
        if packs and plan.depth * plan.unit_columns * 4 > MAX_SCRATCH_BYTES:
            return None
        return plan


def _is_dynamic_dot(node: Node) -> bool:
    """An f32 dot (a packed constant weight is a packed_dot, for packed_dot.py)."""
    return node.op == "dot" and node.out.type.dtype is DType.F32


def _applies(kernel: Kernel, target: CpuTarget) -> bool:
    return DynamicDot.of(kernel, target) is not None


def _items(kernel: Kernel, target: CpuTarget) -> int:
    plan = DynamicDot.of(kernel, target)
    assert plan is not None
    return plan.items


# == emission ===========================================================================
def _dot_offset(b: ir.IRBuilder, base: int, index: list[ir.Value], strides: tuple[int, ...], name: str) -> ir.Value:
    """base + sum(index[d] * strides[d]) as i64 (strides may be negative or zero)."""
    total: ir.Value = const_i64(base)
    for i, stride in zip(index, strides):
        if stride:
            total = b.add(total, b.mul(i, const_i64(stride)), name=name)
    return total


@dataclass(frozen=True)
class _Item:
    """Run-time position of one work item."""

    batch: ir.Value
    batch_index: list[ir.Value]
    lhs_base: ir.Value
    rhs_base: ir.Value
    n0: ir.Value
    chunk: ir.Value


def _emit(ctx: KernelContext) -> None:
    plan = DynamicDot.of(ctx.kernel, ctx.target)
    assert plan is not None
    b = ctx.builder
    name = plan.epilogue.contraction.out.name
    scratch = None
    if plan.needs_packing(plan.unit_columns) or plan.needs_packing(plan.columns % plan.unit_columns or plan.unit_columns):
        array = ctx.elemental.alloca(ir.ArrayType(F32, max(plan.depth, 1) * plan.unit_columns), f"{name}.panel")
        scratch = (array, plan.unit_columns)
    with for_range(b, ctx.begin, ctx.end, f"{name}.item") as item:
        chunk = b.urem(item, const_i64(plan.chunks), name=f"{name}.chunk")
        rest = b.udiv(item, const_i64(plan.chunks))
        unit = b.urem(rest, const_i64(plan.units), name=f"{name}.unit")
        batch = b.udiv(rest, const_i64(plan.units), name=f"{name}.batch")
        batch_index = delinearize(b, batch, plan.batch_shape, f"{name}.batch")
        n0 = b.mul(unit, const_i64(plan.unit_columns), name=f"{name}.n0", flags=["nuw", "nsw"])
        at = _Item(batch, batch_index,
                   _dot_offset(b, plan.lhs.offset, batch_index, plan.lhs_batch, f"{name}.lhs_b"),
                   _dot_offset(b, plan.rhs.offset, batch_index, plan.rhs_batch, f"{name}.rhs_b"), n0, chunk)
        tail = plan.columns % plan.unit_columns
        last = b.icmp_unsigned("==", unit, const_i64(plan.units - 1)) if tail else None
        branch(b, last, lambda: _unit(ctx, plan, at, tail, scratch), lambda: _unit(ctx, plan, at, plan.unit_columns, scratch))


def _unit(ctx: KernelContext, plan: DynamicDot, at: _Item, columns: int, scratch: tuple[ir.Value, int] | None) -> None:
    """All row blocks of this item's chunk, for a column unit of `columns` (compile-time) columns."""
    b = ctx.builder
    name = plan.epilogue.contraction.out.name
    rhs_ptr = ctx.params[id(plan.rhs.param)]
    if plan.needs_packing(columns):
        assert scratch is not None
        panel = b.gep(scratch[0], [const_i64(0), const_i64(0)], inbounds=True, name=f"{name}.panel0")
        _pack(b, plan, rhs_ptr, at, columns, panel, name)
        source = (panel, const_i64(0), scratch[1], 1)  # (pointer, base, k stride, n stride)
    else:
        source = (rhs_ptr, b.add(at.rhs_base, at.n0), plan.rhs_k, 1)
    blocks = ceil_div(columns, LANES)
    first = b.mul(at.chunk, const_i64(plan.chunk_blocks), name=f"{name}.rb0")
    stop = b.add(first, const_i64(plan.chunk_blocks))
    limit = const_i64(plan.row_blocks)
    stop = b.select(b.icmp_unsigned("<", stop, limit), stop, limit, name=f"{name}.rb1")
    row_tail = plan.rows % plan.mr
    with for_range(b, first, stop, f"{name}.rb") as rb:
        m0 = b.mul(rb, const_i64(plan.mr), name=f"{name}.m0", flags=["nuw", "nsw"])
        last_rows = b.icmp_unsigned("==", rb, const_i64(plan.row_blocks - 1)) if row_tail else None
        branch(b, last_rows, lambda: _tile(ctx, plan, at, source, row_tail, blocks, columns, m0),
               lambda: _tile(ctx, plan, at, source, plan.mr, blocks, columns, m0))


def _pack(b: ir.IRBuilder, plan: DynamicDot, rhs_ptr: ir.Value, at: _Item, columns: int, panel: ir.Value, name: str) -> None:
    """panel[k * W + c] = rhs[k, n0 + c] for c < columns, 0 up to the unit's last whole vector."""
    width = plan.unit_columns
    padded = ceil_div(columns, LANES) * LANES
    with for_range(b, 0, plan.depth, f"{name}.pk") as k:
        row = b.add(at.rhs_base, b.mul(k, const_i64(plan.rhs_k)))
        dest = b.mul(k, const_i64(width), flags=["nuw", "nsw"])
        with for_range(b, 0, columns, f"{name}.pc") as c:
            n = b.add(at.n0, c, flags=["nuw", "nsw"])
            src = b.add(row, b.mul(n, const_i64(plan.rhs_n)))
            value = b.load(b.gep(rhs_ptr, [src], inbounds=True), name=f"{name}.rhs", align=4)
            b.store(value, b.gep(panel, [b.add(dest, c)], inbounds=True))
        for c in range(columns, padded):
            b.store(constant(F32, 0.0), b.gep(panel, [b.add(dest, const_i64(c))], inbounds=True))


def _tile(ctx: KernelContext, plan: DynamicDot, at: _Item, source: tuple[ir.Value, ir.Value, int, int],
          mr: int, blocks: int, columns: int, m0: ir.Value) -> None:
    """One mr x blocks tile of LANES-wide vectors (compile-time sizes) at rows m0.., columns n0.."""
    b, e = ctx.builder, ctx.elemental
    name = plan.epilogue.contraction.out.name
    vec = vector_of(LANES)
    lhs_ptr = ctx.params[id(plan.lhs.param)]
    rhs_ptr, rhs_base, rhs_k, _ = source
    rows = [b.add(m0, const_i64(r), name=f"{name}.m{r}", flags=["nuw", "nsw"]) for r in range(mr)]
    row_index = [delinearize(b, m, plan.free_shape, f"{name}.m{r}") for r, m in enumerate(rows)]
    lhs_rows = [b.add(at.lhs_base, _dot_offset(b, 0, idx, plan.lhs_free, f"{name}.lhs_m"), name=f"{name}.lhs{r}")
                for r, idx in enumerate(row_index)]
    slots = [[e.alloca(vec, f"{name}.acc{r}_{j}") for j in range(blocks)] for r in range(mr)]
    for row in slots:
        for slot in row:
            b.store(constant(vec, [0.0] * LANES), slot)
    with for_range(b, 0, plan.depth, f"{name}.k") as k:
        rhs_row = b.add(rhs_base, b.mul(k, const_i64(rhs_k)), name=f"{name}.rhs_k")
        rhs_vectors = [load_vector(b, rhs_ptr, b.add(rhs_row, const_i64(j * LANES)), LANES, f"{name}.b{j}")
                       for j in range(blocks)]
        lhs_k = b.mul(k, const_i64(plan.lhs_k))
        for r in range(mr):
            scalar = b.load(b.gep(lhs_ptr, [b.add(lhs_rows[r], lhs_k)], inbounds=True), name=f"{name}.a{r}s", align=4)
            a = splat(b, scalar, LANES, f"{name}.a{r}")
            for j in range(blocks):
                b.store(fma(b, a, rhs_vectors[j], b.load(slots[r][j]), f"{name}.acc{r}_{j}"), slots[r][j])
    out_rows = [b.mul(b.add(b.mul(at.batch, const_i64(plan.rows)), m), const_i64(plan.columns)) for m in rows]
    if plan.epilogue.contraction.out is ctx.kernel.root:
        _store_tile(ctx, plan, at, slots, out_rows, columns)
        return
    _store_tile_epilogue(ctx, plan, at, slots, m0, columns)


def _store_tile(ctx: KernelContext, plan: DynamicDot, at: _Item, slots: list[list[ir.Value]],
                out_rows: list[ir.Value], columns: int) -> None:
    """The root is the dot: whole vectors go straight to the row-major output, the partial one lane by lane."""
    b = ctx.builder
    name = plan.epilogue.contraction.out.name
    for r, out_row in enumerate(out_rows):
        start = b.add(out_row, at.n0, name=f"{name}.out{r}")
        for j, slot in enumerate(slots[r]):
            count = min(LANES, columns - j * LANES)
            acc = b.load(slot)
            if count == LANES:
                store_vector(b, ctx.out_ptr, b.add(start, const_i64(j * LANES)), acc, f"{name}.store{r}_{j}")
                continue
            for lane in range(count):
                value = b.extract_element(acc, constant(ir.IntType(32), lane))
                b.store(value, b.gep(ctx.out_ptr, [b.add(start, const_i64(j * LANES + lane))], inbounds=True), align=4)


def _store_tile_epilogue(ctx: KernelContext, plan: DynamicDot, at: _Item, slots: list[list[ir.Value]],
                         m0: ir.Value, columns: int) -> None:
    """The fused elementwise epilogue per element, reading the accumulator lane for the dot.

    As in packed_dot.py, the tile goes through a stack scratch so the epilogue is one
    loop over (row, vector) whose body is LANES unrolled elements: its code is
    emitted once, not once per element of the tile.
    """
    b, e = ctx.builder, ctx.elemental
    name = plan.epilogue.contraction.out.name
    mr, blocks = len(slots), len(slots[0])
    scratch = e.alloca(ir.ArrayType(F32, mr * blocks * LANES), f"{name}.tile")
    first = b.gep(scratch, [const_i64(0), const_i64(0)], inbounds=True)
    for r in range(mr):
        for j in range(blocks):
            store_vector(b, first, const_i64((r * blocks + j) * LANES), b.load(slots[r][j]), f"{name}.spill")
    with for_range(b, 0, mr * blocks, f"{name}.vec") as v:
        row = b.add(m0, b.udiv(v, const_i64(blocks)), name=f"{name}.row", flags=["nuw", "nsw"])
        block = b.urem(v, const_i64(blocks), name=f"{name}.block")
        row_index = delinearize(b, row, plan.free_shape, f"{name}.row")
        base = b.mul(v, const_i64(LANES), flags=["nuw", "nsw"])
        n_first = b.add(at.n0, b.mul(block, const_i64(LANES)), name=f"{name}.nv", flags=["nuw", "nsw"])
        out_row = b.mul(b.add(b.mul(at.batch, const_i64(plan.rows)), row), const_i64(plan.columns))

        def lanes(count: int) -> None:
            elements = []
            for lane in range(count):
                scalar = b.load(b.gep(first, [b.add(base, const_i64(lane))], inbounds=True), name=f"{name}.v")
                n = b.add(n_first, const_i64(lane), flags=["nuw", "nsw"])
                elements.append((scalar, [*at.batch_index, *row_index, n], b.add(out_row, n, flags=["nuw", "nsw"])))
            store_epilogue(ctx, plan.epilogue, elements)

        partial = columns % LANES
        last = b.icmp_unsigned("==", block, const_i64(blocks - 1)) if partial else None
        branch(b, last, lambda: lanes(partial), lambda: lanes(LANES))


DYNAMIC_DOT_EMITTER = BodyEmitter(_applies, _items, _emit)
