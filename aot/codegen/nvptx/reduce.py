"""The row-cooperative GPU body: the threads of a group compute each fused reduction together.

For kernels with fused reductions (softmax, log-softmax, layer and RMS norm, ReduceSum /
Mean / Max ..., ArgMax) whose reductions are each one value per group of root
elements (nvptx/row_groups.py: a root row, or one root element), where the rows body
runs a whole row, reductions and all, on one thread. Here a group of T threads
(T a multiple of 32; G groups per block where rows are short, so that a block has
at least MIN_BLOCK threads) runs, for each reduction in dependency order:

    partial:  lane l folds elements l, l + T, l + 2T, ... of the reduced extent, starting
              from the identity (softmax's sum reads the max found before, substituted)
    warp:     shuffle_down by 16, 8, 4, 2, 1: lane 0 of each warp holds its warp's value
    block:    (groups of W > 1 warps) lane 0 of each warp writes its value to shared
              memory; sync; the group's first W lanes fold those by shuffles again and
              lane 0 writes the group's result to its shared slot; sync
    then each later phase reads the result from shared memory and uses it for the
    reduce wherever the kernel reads it (GroupEmitter.results);

and finally lane l computes and stores root elements l, l + T, ... of its group's row,
what the row reads per group (1 / sum, rsqrt(var + eps)) hoisted before that loop
(ElementalEmitter.begin_row, as the CPU's work items do).
The partial phase reaches the reduce by evaluating the root's first element of the group
with the reduce intercepted (GroupEmitter): the index the reduce is read at comes
from the elemental emitter's own index maps, and the rest of that element's code is
dead (reductions not computed yet read as their identity) and removed by LLVM.

The floats fold in another order than the CPU's loop (strided partials, then a
tree), so sums differ from the CPU's in the last bits; max/min and integer
reductions are exact.

Long rows: a group is at most MAX_GROUP_THREADS threads and loops over its row, however
long; a row is not split over blocks, which would need partial results in memory
between two launches (the plan has no scratch buffers) or a grid-wide sync. At 512
threads a 16K row is 32 elements a thread, which keeps one block busy long enough;
the price is that a kernel of few long rows fills few SMs.

Not done: the row is read from global memory once per reduction plus once for the
output (softmax reads x three times, where the CPU's row_cache.py keeps exp(x - max));
the second and third reads mostly hit L1/L2, and a shared-memory row cache would cap
the row length. Reductions over outer dims only are declined (row_groups.py); columns.py takes them.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.elemental import ElementalEmitter, register_type
from aot.codegen.loops import const_i64, delinearize, if_present, strided_range
from aot.codegen.nvptx import row_groups
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.simt import MAX_GRID, WARP, Simt, ThreadVar
from aot.errors import CodegenError
from aot.ir.graph import Node, Value
from aot.ir.ops.reduction import reduce_identity
from aot.plan import Kernel

ELEMENTS_PER_THREAD = 4  # the fewest a thread folds before a group gets more threads
MAX_GROUP_THREADS = 512  # 128 registers a thread at most: the kernels here use far fewer
MIN_BLOCK = 128  # short rows: several groups (one warp each) per block, for occupancy
DELTAS = (16, 8, 4, 2, 1)


@dataclass(frozen=True)
class Layout:
    """`threads` per group, `groups` per block, over `plan`'s groups."""

    plan: row_groups.RowGroups
    threads: int
    groups: int

    @property
    def warps(self) -> int:  # per group
        return self.threads // WARP

    @property
    def block_dim(self) -> int:
        return self.threads * self.groups

    @property
    def blocks(self) -> int:
        return ceil_div(self.plan.count, self.groups)

    @property
    def reason(self) -> str:
        """Why the launch has this shape, for a reader of the launch plan."""
        plan = self.plan
        what = f"a root row of {plan.row}" if plan.row > 1 else "a root element"
        return (f"{plan.count} groups ({what} each), {len(plan.reduces)} reduction(s) over up to {plan.extent} "
                f"elements: {self.threads} threads a group (up to {ceil_div(plan.extent, self.threads)} elements "
                f"each), {self.groups} group(s) a block")


def layout(kernel: Kernel) -> Layout | None:
    plan = row_groups.find(kernel)
    if plan is None:
        return None
    threads = min(MAX_GROUP_THREADS, max(WARP, ceil_div(ceil_div(plan.extent, ELEMENTS_PER_THREAD), WARP) * WARP))
    groups = max(1, min(MIN_BLOCK // threads, plan.count))
    return Layout(plan, threads, groups)


def _layout(kernel: Kernel) -> Layout:
    found = layout(kernel)
    if found is None:
        raise CodegenError(f"kernel {kernel.name}: not a row-cooperative reduction")
    return found


class GroupEmitter(ElementalEmitter):
    """The elemental emitter with the kernel's reduces intercepted while one is computed:
    the target reduce becomes this lane's strided partial fold, the reduces after it
    (not computed yet) read as their identity, their operands walked once so that a
    target feeding them is still reached."""

    def __init__(self, base: ElementalEmitter, reduces: Sequence[Node]):
        super().__init__(base.b, base.lib, base.target, base.params, base.fused, base.alloca)
        self._reduces = {id(r.out): r for r in reduces}
        # id(reduce output) -> the group's result, read in this phase; not substitute(), which
        # the row preamble ignores (it hoists what the final phase's row loop reads per group)
        self.results: dict[int, ir.Value] = {}
        self._target: Node | None = None
        self._lane: ir.Value | None = None
        self._threads = 0
        self._partial: ir.Value | None = None

    @contextmanager
    def capturing(self, target: Node, lane: ir.Value, threads: int) -> Iterator[None]:
        self._target, self._lane, self._threads, self._partial = target, lane, threads, None
        try:
            yield
        finally:
            self._target = self._lane = None

    @property
    def partial(self) -> ir.Value:
        if self._partial is None:
            raise CodegenError("the root does not read the reduction it was evaluated for")
        return self._partial

    def value(self, v: Value, index: Sequence[ir.Value]) -> ir.Value:
        if id(v) in self.results:
            return self.results[id(v)]
        node = self._reduces.get(id(v))
        if node is None or self._target is None:
            return super().value(v, index)
        if node is self._target:
            if self._partial is None:
                self._partial = self._fold(node, index)
            return self._partial
        x = node.inputs[0]
        self.value(x, _operand_index(node, index, [const_i64(0)] * len(node.attrs["axes"])))
        return self.immediate(v.type.dtype, reduce_identity(node.attrs["kind"], v.type.dtype))

    def _fold(self, node: Node, index: Sequence[ir.Value]) -> ir.Value:
        """acc = identity; for k in lane, lane + T, ... < K: acc = acc (kind) x[..., k]."""
        (x,) = node.inputs
        kind, axes, dtype = node.attrs["kind"], node.attrs["axes"], node.out.type.dtype
        extents = [x.type.shape[a] for a in axes]
        total = 1
        for e in extents:
            total *= e
        slot = self.alloca(register_type(dtype), f"{node.out.name}.partial")
        self.b.store(self.immediate(dtype, reduce_identity(kind, dtype)), slot)
        assert self._lane is not None
        with strided_range(self.b, self._lane, total, self._threads, f"{node.out.name}.k") as k:
            self.push_scope()
            element = self.value(x, _operand_index(node, index, delinearize(self.b, k, extents, f"{node.out.name}.k")))
            self.b.store(self.combine(kind, self.b.load(slot), element, dtype), slot)
            self.pop_scope()
        return self.b.load(slot, name=f"{node.out.name}.partial")


def _operand_index(node: Node, index: Sequence[ir.Value], reduced: Sequence[ir.Value]) -> list[ir.Value]:
    """The reduce's operand index: `index` with the reduced dims set to `reduced`."""
    kept, looped = iter(index), iter(reduced)
    return [next(looped) if d in node.attrs["axes"] else next(kept) for d in range(node.inputs[0].type.rank)]


@dataclass
class _Place:
    """Where a thread is, in a phase: its group (in the launch and in the block), its lane in the
    group, and whether its group exists (the last block may have fewer than G)."""

    group: ir.Value
    slot: ir.Value  # the group's number within the block
    lane: ir.Value
    valid: ir.Value | None


def _place(b: ir.IRBuilder, lay: Layout, block: ir.Value, tid: ir.Value) -> _Place:
    if lay.groups == 1:
        slot, lane = const_i64(0), tid
    else:
        slot = b.udiv(tid, const_i64(lay.threads), name="group.slot")
        lane = b.urem(tid, const_i64(lay.threads), name="lane")
    group = b.add(b.mul(block, const_i64(lay.groups), flags=["nuw"]), slot, name="group", flags=["nuw"])
    valid = None
    if lay.plan.count % lay.groups:
        valid = b.icmp_unsigned("<", group, const_i64(lay.plan.count), name="group.valid")
    return _Place(group, slot, lane, valid)


@dataclass
class _Reduction:
    node: Node
    acc: ThreadVar
    other: ThreadVar
    shared: ir.Value  # G * W partials, then (W > 1) G results

    def result_slot(self, b: ir.IRBuilder, lay: Layout, slot: ir.Value) -> ir.Value:
        if lay.warps == 1:
            return b.gep(self.shared, [slot], inbounds=True)
        at = b.add(slot, const_i64(lay.groups * lay.warps), flags=["nuw"])
        return b.gep(self.shared, [at], inbounds=True)


def emit_reduce(ctx: GpuContext) -> None:
    simt, b, root = ctx.simt, ctx.builder, ctx.kernel.root
    lay = _layout(ctx.kernel)
    plan = lay.plan
    e = GroupEmitter(ctx.elemental, plan.reduces)
    vars_by_type: dict[str, tuple[ThreadVar, ThreadVar]] = {}
    reductions = []
    for node in plan.reduces:
        ty = register_type(node.out.type.dtype)
        if str(ty) not in vars_by_type:
            vars_by_type[str(ty)] = (simt.thread_var(ty, f"acc.{ty}"), simt.thread_var(ty, f"other.{ty}"))
        acc, other = vars_by_type[str(ty)]
        slots = lay.groups * lay.warps + (lay.groups if lay.warps > 1 else 0)
        reductions.append(_Reduction(node, acc, other, simt.shared(ty, slots, f"{node.out.name}.partials")))
    with simt.blocks(lay.blocks) as block:
        done: list[_Reduction] = []
        for r in reductions:
            _reduce_phases(simt, e, lay, block, root, r, done)
            done.append(r)
        with simt.threads() as tid:
            at = _place(b, lay, block, tid)
            _substitute(e, lay, done, at)
            with if_present(b, at.valid):
                outer = delinearize(b, at.group, root.type.shape[:plan.outer], "o")
                row = b.mul(at.group, const_i64(plan.row), name="row", flags=["nuw"])
                # what the row reads per group (1 / sum, rsqrt(var + eps)) is computed once, before
                # the loop: LLVM cannot hoist it past the loop's stores, which may alias the params
                e.begin_row(outer, row, root.type.shape)
                main = b.append_basic_block("row.main")
                b.position_at_end(main)
                with strided_range(b, at.lane, plan.row, lay.threads, "j") as j:
                    e.push_scope()
                    index = [*outer, *delinearize(b, j, root.type.shape[plan.outer:], "j")]
                    value = e.to_storage(e.value(root, index), root.type.dtype)
                    address = b.gep(ctx.out_ptr, [b.add(row, j, flags=["nuw"])], inbounds=True, name="out")
                    b.store(value, address, align=root.type.dtype.itemsize)
                    e.pop_scope()
                e.end_row(main)
            e.pop_scope()
            e.results = {}
        if lay.blocks > MAX_GRID:
            simt.sync()  # a block's next group reuses the shared slots


def _substitute(e: GroupEmitter, lay: Layout, done: Sequence[_Reduction], at: _Place) -> None:
    """Open the phase's scope and read the group's finished reductions from shared memory."""
    e.push_scope()
    e.results = {id(r.node.out): e.b.load(r.result_slot(e.b, lay, at.slot), name=f"{r.node.out.name}.result")
                 for r in done}


def _reduce_phases(simt: Simt, e: GroupEmitter, lay: Layout, block: ir.Value, root: Value, r: _Reduction,
                   done: Sequence[_Reduction]) -> None:
    b, plan, node = simt.builder, lay.plan, r.node
    kind, dtype = node.attrs["kind"], node.out.type.dtype
    identity = e.immediate(dtype, reduce_identity(kind, dtype))
    with simt.threads() as tid:
        at = _place(b, lay, block, tid)
        _substitute(e, lay, done, at)
        b.store(identity, r.acc.at(b, tid))
        with if_present(b, at.valid):
            outer = delinearize(b, at.group, root.type.shape[:plan.outer], "o")
            with e.capturing(node, at.lane, lay.threads):
                e.value(root, [*outer, *[const_i64(0)] * (root.type.rank - plan.outer)])
            b.store(e.partial, r.acc.at(b, tid))
        e.pop_scope()
        e.results = {}
    _warp_fold(simt, e, r, DELTAS)
    warps = lay.warps
    with simt.threads() as tid:
        if warps == 1:
            at = _place(b, lay, block, tid)
            with b.if_then(b.icmp_unsigned("==", at.lane, const_i64(0))):
                b.store(e.round_to(b.load(r.acc.at(b, tid)), dtype), r.result_slot(b, lay, at.slot))
        else:
            first = b.icmp_unsigned("==", b.urem(tid, const_i64(WARP)), const_i64(0))
            with b.if_then(first):
                b.store(b.load(r.acc.at(b, tid)), b.gep(r.shared, [b.udiv(tid, const_i64(WARP))], inbounds=True))
    simt.sync()
    if warps == 1:
        return
    with simt.threads() as tid:
        at = _place(b, lay, block, tid)
        mine = b.icmp_unsigned("<", at.lane, const_i64(warps))
        clamped = b.select(mine, at.lane, const_i64(0))
        slot = b.add(b.mul(at.slot, const_i64(warps), flags=["nuw"]), clamped, flags=["nuw"])
        partial = b.load(b.gep(r.shared, [slot], inbounds=True))
        b.store(b.select(mine, partial, identity), r.acc.at(b, tid))
    _warp_fold(simt, e, r, tuple(d for d in DELTAS if d < warps))
    with simt.threads() as tid:
        at = _place(b, lay, block, tid)
        with b.if_then(b.icmp_unsigned("==", at.lane, const_i64(0))):
            b.store(e.round_to(b.load(r.acc.at(b, tid)), dtype), r.result_slot(b, lay, at.slot))
    simt.sync()


def _warp_fold(simt: Simt, e: GroupEmitter, r: _Reduction, deltas: Sequence[int]) -> None:
    """Lane 0 of each warp folds lanes [0, 2 * deltas[0]) of its warp."""
    b = simt.builder
    kind, dtype = r.node.attrs["kind"], r.node.out.type.dtype
    for delta in deltas:
        simt.shuffle_down(r.acc, r.other, delta)
        with simt.threads() as tid:
            mine, theirs = b.load(r.acc.at(b, tid)), b.load(r.other.at(b, tid))
            b.store(e.combine(kind, mine, theirs, dtype), r.acc.at(b, tid))


REDUCE_BODY = GpuBody("reduce", lambda k: layout(k) is not None, lambda k: _layout(k).block_dim, emit_reduce)
