"""The column GPU body: reductions over outer axes, a thread (or a block's slice) per output element.

For kernels whose fused reductions each yield one root element: a mean over the sequence
([1, T, H] -> [1, H], mean pooling), ReduceSum over axis 0 of [4096, 64], softmax's max
and sum over axis 0 (fusion makes those kernels of their own), a statistic over N, H, W
of an NHWC tensor. The reduce body (reduce.py, row_groups.py) declines them: its group
of threads per root row would read the reduced operand at the row's stride. The rows
body ran them, one thread per root row, so a [1, H] output was one thread's loop.

Here a root element is a *column*: consecutive threads take consecutive elements, so
consecutive innermost indices, and each step of every thread's reduction loop reads
consecutive elements across the warp (coalesced); the stores are consecutive too.

`find` decides from the IR (row_groups.requests, the symbolic index walk, with every
root dim a symbol of its own): each fused reduction is read at exactly one index, made
of the root's dims only (not inside another reduction's loop), and depending on every
non-unit root dim. Then evaluating root elements one by one computes no reduction twice.
A softmax over the innermost dim reads its max and sum at the row's index, the same for
every element of the row: per-element evaluation would redo the row's reductions per
element, so it is declined (the reduce body, before this one in bodies.py, takes it).
A kernel reading a reduction through a broadcast over outer dims (x - mean over axis 0)
would need a loop over those dims per column; fusion never makes one (a reduce fuses into
a broadcast only where it re-expands the innermost dim), so it is declined too.

Two shapes of launch (`layout`):
- a thread a column (`slices` 1): the thread computes each reduction in turn by a loop
  over its whole reduced extent (reduce.GroupEmitter with one lane), then its element,
  the reductions substituted; 128 threads a block. For many columns (they fill the
  GPU alone) or short reductions.
- few columns and long reductions ([4096, 64] -> [64]: 64 threads would be two warps on
  a 132-SM GPU): a block takes `columns` consecutive columns (8 while 32-wide tiles
  would leave SMs idle, else 32) and `slices` threads a column (a power of two, up to
  512 threads a block, while each still folds at least MIN_FOLD elements and the
  launch has fewer than WANTED_THREADS threads). Thread (slice s, column c) folds
  elements s, s + S, s + 2S, ... of c's reduced extent: a warp reads 32 / columns rows
  of `columns` consecutive elements, whole 32-byte sectors for f32 at 8 columns
  (128-byte lines at 32). Each partial goes to shared memory; sync; every thread folds
  its column's S partials in slice order (so the column's threads agree to the bit,
  with no second sync) into a thread variable that the next reduction's phase (a
  reduction reading another) and the final store read; slice 0 stores the element.
A column is never split over blocks: combining partial results of several blocks needs
memory between two launches (the plan has no scratch buffers), a grid-wide sync, or
float atomics (a sum in a run-dependent order). So a kernel of few columns runs on
ceil(columns / 8) SMs ([8, 56, 56, 64] NHWC -> [64]: 8 blocks of 512 threads, 392
elements each): the price of deterministic results in one launch.

The floats fold in another order than the CPU's loop where slices > 1 (strided partials,
then the partials in slice order): sums differ from the CPU's in the last bits;
max/min and integer reductions are exact.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.elemental import register_type
from aot.codegen.loops import const_i64, delinearize, if_present
from aot.codegen.nvptx import row_groups
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.reduce import GroupEmitter
from aot.codegen.nvptx.simt import MAX_GRID, WARP, ThreadVar
from aot.errors import CodegenError
from aot.ir.graph import Node, Value
from aot.ir.ops.reduction import reduce_identity
from aot.plan import Kernel

COLUMN_BLOCK = 128  # threads a block where each thread folds a whole column
MAX_BLOCK = 512  # threads a block where a column's slices share its reductions
MIN_FOLD = 16  # the fewest elements a slice folds: below that the shared-memory combine dominates
WANTED_THREADS = 65536  # threads that keep HBM busy (132 SMs x ~512): no more slices past that
SMS = 132  # H100 / H200: fewer 32-column blocks than this leaves SMs idle, so 8-column ones
NARROW, WIDE = 8, 32  # a block's columns: 8 f32 is one 32-byte sector a load, 32 a 128-byte line
# register types whose partials go through shared memory (Simt.shared sizes these)
SHARED = frozenset({"float", "double", "i32", "i64"})


@dataclass(frozen=True)
class ColumnPlan:
    """`count` root elements (columns), each reading each of `reduces` (in dependency order)
    once; `extent` is the longest reduced extent."""

    count: int
    reduces: tuple[Node, ...]
    extent: int


def find(kernel: Kernel) -> ColumnPlan | None:
    root = kernel.root
    shape = root.type.shape
    if root.producer is None or root.type.size == 0 or any(n.op not in row_groups.WALKED for n in kernel.nodes):
        return None
    reduces = tuple(n for n in kernel.nodes if n.op == "reduce")
    moving = {d for d, n in enumerate(shape) if n != 1}
    if not reduces or not moving:
        return None  # no reduction, or one output element (the reduce body's)
    found = row_groups.requests(kernel, root.type.rank)  # every root dim d as ("o", d)
    if found is None:
        return None
    for r in reduces:
        seen = found.get(id(r))
        if seen is None or len(seen) != 1:
            return None  # read at several indices: computed several times an element
        (index,) = seen
        leaves = [s for term in index for s in row_groups.symbols(term)]
        if any(s[0] != "o" for s in leaves):
            return None  # read inside another reduction's loop: a value per step
        if {s[1] for s in leaves} & moving != moving:
            return None  # one value for several root elements: each would redo it
    extent = max(_product(r.inputs[0].type.shape[a] for a in r.attrs["axes"]) for r in reduces)
    return ColumnPlan(root.type.size, reduces, extent)


def _product(dims: Iterator[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


@dataclass(frozen=True)
class Layout:
    """`columns` consecutive columns a block, `slices` threads a column."""

    plan: ColumnPlan
    columns: int
    slices: int

    @property
    def block_dim(self) -> int:
        return self.columns * self.slices

    @property
    def blocks(self) -> int:
        return ceil_div(self.plan.count, self.columns)

    @property
    def reason(self) -> str:
        """Why the launch has this shape, for a reader of the launch plan."""
        plan = self.plan
        shape = (f"{self.slices} threads a column, {self.columns} columns a block" if self.slices > 1
                 else f"a thread a column, {self.columns} a block")
        return (f"{plan.count} columns, {len(plan.reduces)} reduction(s) over up to {plan.extent} "
                f"elements: {shape} (up to {ceil_div(plan.extent, self.slices)} elements a thread), "
                f"{self.blocks} blocks")


def layout(kernel: Kernel) -> Layout | None:
    plan = find(kernel)
    if plan is None:
        return None
    columns = WIDE if ceil_div(plan.count, WIDE) >= SMS else NARROW
    slices = 1
    if all(str(register_type(r.out.type.dtype)) in SHARED for r in plan.reduces):
        threads = ceil_div(plan.count, columns) * columns
        while (columns * slices * 2 <= MAX_BLOCK and plan.extent >= MIN_FOLD * slices * 2
               and threads * slices < WANTED_THREADS):
            slices *= 2
    if slices == 1 or columns * slices < WARP:  # no slices, or too few to fill a warp: a thread a column
        return Layout(plan, min(COLUMN_BLOCK, ceil_div(plan.count, WARP) * WARP), 1)
    return Layout(plan, columns, slices)


def _layout(kernel: Kernel) -> Layout:
    found = layout(kernel)
    if found is None:
        raise CodegenError(f"kernel {kernel.name}: not a column reduction")
    return found


@dataclass
class _Place:
    """A thread's column (in the launch, and within its block), its slice, and whether its
    column exists (the last block may have fewer)."""

    column: ir.Value
    local: ir.Value
    slice: ir.Value
    valid: ir.Value | None


def _place(b: ir.IRBuilder, lay: Layout, block: ir.Value, tid: ir.Value) -> _Place:
    if lay.slices == 1:
        local, part = tid, const_i64(0)
    else:
        local = b.urem(tid, const_i64(lay.columns), name="column.local")
        part = b.udiv(tid, const_i64(lay.columns), name="slice")
    column = b.add(b.mul(block, const_i64(lay.columns), flags=["nuw"]), local, name="column", flags=["nuw"])
    valid = None
    if lay.plan.count % lay.columns:
        valid = b.icmp_unsigned("<", column, const_i64(lay.plan.count), name="column.valid")
    return _Place(column, local, part, valid)


def _fold(e: GroupEmitter, root: Value, node: Node, index: list[ir.Value], lane: ir.Value, threads: int) -> ir.Value:
    """This thread's fold of `node` (elements lane, lane + threads, ... of its extent): the root is
    evaluated at `index` with the reduce intercepted (reduce.GroupEmitter: reductions done read
    their result, later ones their identity); the rest of that element is dead code LLVM
    removes, and is not cached (it read the reductions not done as identities)."""
    e.push_scope()
    with e.capturing(node, lane, threads):
        e.value(root, index)
    e.pop_scope()
    return e.partial


def _store(ctx: GpuContext, e: GroupEmitter, column: ir.Value, index: list[ir.Value]) -> None:
    """The root element at `index` (linear offset `column`), its reductions in e.results."""
    b, dtype = ctx.builder, ctx.kernel.root.type.dtype
    value = e.to_storage(e.value(ctx.kernel.root, index), dtype)
    b.store(value, b.gep(ctx.out_ptr, [column], inbounds=True, name="out"), align=dtype.itemsize)


def emit_columns(ctx: GpuContext) -> None:
    lay = _layout(ctx.kernel)
    if lay.slices == 1:
        _emit_thread_a_column(ctx, lay)
    else:
        _emit_sliced(ctx, lay)


def _emit_thread_a_column(ctx: GpuContext, lay: Layout) -> None:
    """One phase: each thread folds its column's reductions whole, then stores its element."""
    simt, b, root, plan = ctx.simt, ctx.builder, ctx.kernel.root, lay.plan
    e = GroupEmitter(ctx.elemental, plan.reduces)
    with simt.blocks(lay.blocks) as block:
        with simt.threads() as tid:
            at = _place(b, lay, block, tid)
            e.push_scope()
            with if_present(b, at.valid):
                index = delinearize(b, at.column, root.type.shape, "at")
                for r in plan.reduces:
                    e.results[id(r.out)] = e.round_to(_fold(e, root, r, index, const_i64(0), 1), r.out.type.dtype)
                _store(ctx, e, at.column, index)
            e.pop_scope()
            e.results = {}


def _emit_sliced(ctx: GpuContext, lay: Layout) -> None:
    """Per reduction: a partial per slice to shared memory, sync, each thread folds its column's
    partials into a thread variable; then slice 0 stores the element."""
    simt, b, root, plan = ctx.simt, ctx.builder, ctx.kernel.root, lay.plan
    e = GroupEmitter(ctx.elemental, plan.reduces)
    results: list[ThreadVar] = []
    partials: list[ir.Value] = []
    for r in plan.reduces:
        ty = register_type(r.out.type.dtype)
        results.append(simt.thread_var(ty, f"{r.out.name}.result"))
        partials.append(simt.shared(ty, lay.block_dim, f"{r.out.name}.partials"))

    def done(count: int, tid: ir.Value) -> None:
        e.push_scope()
        e.results = {id(r.out): b.load(v.at(b, tid), name=f"{r.out.name}.result")
                     for r, v in zip(plan.reduces[:count], results)}

    with simt.blocks(lay.blocks) as block:
        for n, r in enumerate(plan.reduces):
            kind, dtype = r.attrs["kind"], r.out.type.dtype
            identity = e.immediate(dtype, reduce_identity(kind, dtype))
            with simt.threads() as tid:
                at = _place(b, lay, block, tid)
                done(n, tid)
                slot = b.gep(partials[n], [tid], inbounds=True)  # tid = slice * columns + local
                b.store(identity, slot)
                with if_present(b, at.valid):
                    index = delinearize(b, at.column, root.type.shape, "at")
                    b.store(_fold(e, root, r, index, at.slice, lay.slices), slot)
                e.pop_scope()
                e.results = {}
            simt.sync()
            with simt.threads() as tid:
                at = _place(b, lay, block, tid)
                acc: ir.Value = identity
                for s in range(lay.slices):  # in slice order: every thread of the column gets the same bits
                    at_slice = b.add(at.local, const_i64(s * lay.columns), flags=["nuw"])
                    acc = e.combine(kind, acc, b.load(b.gep(partials[n], [at_slice], inbounds=True)), dtype)
                b.store(e.round_to(acc, dtype), results[n].at(b, tid))
        with simt.threads() as tid:
            at = _place(b, lay, block, tid)
            done(len(plan.reduces), tid)
            first = b.icmp_unsigned("==", at.slice, const_i64(0))
            with b.if_then(first if at.valid is None else b.and_(first, at.valid)):
                _store(ctx, e, at.column, delinearize(b, at.column, root.type.shape, "at"))
            e.pop_scope()
            e.results = {}
        if lay.blocks > MAX_GRID:
            simt.sync()  # a block's next columns rewrite the partials the last fold read


COLUMNS_BODY = GpuBody("columns", lambda k: layout(k) is not None, lambda k: _layout(k).block_dim, emit_columns)
