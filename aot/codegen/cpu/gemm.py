"""Register-blocked f32 microkernel for the packed dot of the layout pass.

The layout pass (aot/passes/layout.py) turns `dot(x, W)` with a constant W
into `dot(x, Wp)` with Wp [NB, K, L] (L = vector lanes), followed by the
unpack chain reshape [.., NB*L] (+ slice [.., N]). This kernel body computes
an MR x NCB tile of L-wide vectors per work item:

    for k in 0..K:  b[j] = Wp[nb0 + j, k, :]          (vector loads)
                    a[i] = splat(x[m0 + i, k])        (broadcast)
                    acc[i][j] = fma(a[i], b[j], acc[i][j])

then runs the kernel's fused epilogue (bias, activation, residual, ...) per
output element through the elemental emitter, with the accumulator lane
substituted for the dot (ElementalEmitter.substitute). Work item w is the
row block w % MB of column unit w // MB (unit-major, so consecutive items
reuse one packed weight panel from cache); items are independent.

The epilogue is accepted only when every fused node between the dot and the
root is elementwise or a link of the unpack chain (`Epilogue.find`), so each
root element reads the dot at exactly the position whose accumulator it is
given. Other kernels decline and take the elemental path.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llvmlite import ir

from aot.codegen.cpu.kernel import BODY_EMITTERS, BodyEmitter, KernelContext, matched_body
from aot.codegen.cpu.loops import const_i64, delinearize, for_range
from aot.codegen.cpu.math import F32, intrinsic
from aot.codegen.cpu.target import CpuTarget
from aot.ir.graph import Node
from aot.ops import DATA_MOVEMENT, ELEMENTWISE
from aot.passes.layout import DOT_LINKS, LinkCheck, is_packed_dot
from aot.plan import Kernel

# accumulator tile: rows x column blocks; 6 x 2 (or 3 x 4) vectors leave
# registers for the loaded weight vectors and the broadcast on AVX2 (16 regs)
MAX_ROWS = 6

# A packed weight larger than this is read from memory on every call (it does not
# stay in L2 between calls), so the tile prefetches the next unit's panels into L2
# while it computes: an LM head's 26 MB weight streams behind the FMAs instead of
# stalling them (GPT-2's head at 32 rows: 4.8 -> 4.2 ms on Zen 4; 8 rows 1.75 -> 1.0).
PREFETCH_MIN_WEIGHT_BYTES = 1 << 20
# llvm.prefetch locality 2: prefetcht1 on x86, into L2 (L1, locality 3, was slower:
# the prefetched panels push out the panels being used)
PREFETCH_LOCALITY = 2
ACC_VECTORS = 12
# AVX-512 has 32 registers: a 6 x 4 tile (24 accumulators) halves the broadcasts per FMA
# (an LM head of 32 x 128 x 50,257: 74 -> 82 GFLOP/s)
ACC_VECTORS_AVX512 = 24


def accumulator_budget(target: CpuTarget, lanes: int) -> int:
    """Accumulator vectors a register tile may hold: AVX-512's 32 registers of 16 lanes take 24."""
    return ACC_VECTORS_AVX512 if target.avx512 and lanes == 16 else ACC_VECTORS

# == epilogue analysis (shared with conv.py) ========================================
@dataclass(frozen=True)
class Epilogue:
    """How a kernel's root reads its packed contraction.

    `chain`: the unpack links after the contraction (empty when the root is the
    contraction itself); the root reads the last link at the root's own index,
    through elementwise ops only.
    """

    contraction: Node
    chain: tuple[Node, ...]
    # contractions accumulated into the same accumulators (passes/contraction_sum.py);
    # the epilogue reads them as 0, their sum already being in the contraction's lane
    partners: tuple[Node, ...] = ()

    @property
    def root_is_contraction(self) -> bool:
        return not self.chain

    @staticmethod
    def find(kernel: Kernel, is_packed: Callable[[Node], bool], links: Sequence[LinkCheck]) -> Epilogue | None:
        """The first packed contraction of `kernel` whose epilogue has the safe form, or None.

        `links` check the unpack chain link by link (the last one optional: the
        slice that drops padding). Elementwise ops keep the index; anything else
        between the contraction and the root declines.
        """
        root = kernel.root.producer
        if root is None:
            return None
        for candidate in kernel.nodes:
            if candidate.op in ("dot", "conv") and is_packed(candidate):
                if candidate is root:
                    return Epilogue(candidate, ())
                chain = _match(kernel, candidate, root, links)
                if chain is not None:
                    return Epilogue(candidate, chain)
        return None


def _match(kernel: Kernel, contraction: Node, root: Node, links: Sequence[LinkCheck]) -> tuple[Node, ...] | None:
    # nodes of the kernel that read the contraction, directly or not (topological order)
    reach: list[Node] = [contraction]
    reach_ids = {id(contraction.out)}
    for node in kernel.nodes:
        if node is not contraction and any(id(v) in reach_ids for v in node.inputs):
            reach.append(node)
            reach_ids.add(id(node.out))
    if id(root.out) not in reach_ids:
        return None
    chain = [n for n in reach[1:] if n.op not in ELEMENTWISE]
    if not (len(links) - 1 <= len(chain) <= len(links)):
        return None
    previous = contraction.out
    for node, check in zip(chain, links):
        if node.inputs[0] is not previous or not check(node, previous):
            return None
        previous = node.out
    # an empty chain (no links asked for) leaves the root reading the contraction itself
    last = chain[-1].out if chain else contraction.out
    for node in reach[1:]:
        if node.op in ELEMENTWISE:
            for v in node.inputs:
                if id(v) in reach_ids and v is not last and (v.producer is None or v.producer.op not in ELEMENTWISE):
                    return None
    if root.op not in ELEMENTWISE and (not chain or root is not chain[-1]):
        return None
    return tuple(chain)


# == vector helpers =====================================================================
def vector_of(lanes: int) -> ir.VectorType:
    return ir.VectorType(F32, lanes)


def splat(b: ir.IRBuilder, scalar: ir.Value, lanes: int, name: str) -> ir.Value:
    one = b.insert_element(ir.Constant(vector_of(lanes), None), scalar, ir.Constant(ir.IntType(32), 0), name=f"{name}.ins")
    mask = ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    return b.shuffle_vector(one, ir.Constant(vector_of(lanes), None), mask, name=name)


def fma(b: ir.IRBuilder, a: ir.Value, c: ir.Value, acc: ir.Value, name: str) -> ir.Value:
    """a * c + acc: one fused instruction where the target has FMA, a multiply and an add
    elsewhere (llvm.fmuladd; llvm.fma would call libm's fmaf there, which the code cannot link)."""
    ty = a.type
    fn = intrinsic(b.module, f"llvm.fmuladd.v{ty.count}f32", ty, [ty, ty, ty])
    return b.call(fn, [a, c, acc], name=name)


def load_vector(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, lanes: int, name: str) -> ir.Value:
    """L floats at base[offset:] (any alignment)."""
    addr = b.gep(base, [offset], inbounds=True, name=f"{name}.addr")
    return b.load(b.bitcast(addr, vector_of(lanes).as_pointer()), name=name, align=4)


def masked_load(b: ir.IRBuilder, target: CpuTarget, base: ir.Value, offset: ir.Value, lanes: int,
                lane_mask: Callable[[int, int], ir.Value], fill: float, name: str) -> ir.Value:
    """<lanes x f32> at base[offset:]: lanes where the mask is false are `fill` and their
    memory is not read (offset may point outside the buffer). `lane_mask(first, count)`
    gives the <count x i1> mask of lanes first .. first+count-1.

    A vector wider than one register of `target` is loaded in register-wide pieces, each
    with a mask built at its own width. LLVM 22's X86 back end mishandles a <16 x i1>
    mask on AVX2 when it splits the load itself and proves one half all-false: a
    release build loads that half unmasked and drops the fill (issue 9: the SPP
    block's 13x13 max pool read the next row), a build with assertions aborts.
    """
    piece = min(lanes, target.vector_lanes)
    assert lanes % piece == 0 and (lanes // piece) & (lanes // piece - 1) == 0, (lanes, piece)
    parts = []
    for first in range(0, lanes, piece):
        at = b.add(offset, const_i64(first)) if first else offset
        mask = lane_mask(first, piece)
        bits = mask.constant if isinstance(mask, ir.Constant) and isinstance(mask.constant, list) else None
        if bits is not None and not any(bits):
            parts.append(ir.Constant(vector_of(piece), [fill] * piece))
        elif bits is not None and all(bits):
            parts.append(load_vector(b, base, at, piece, f"{name}.part{first}"))
        else:
            parts.append(_register_masked_load(b, base, at, mask, fill, f"{name}.part{first}"))
    while len(parts) > 1:  # concatenate neighbours: 2 x <p> -> <2p>, until one vector is left
        width = parts[0].type.count
        both = ir.Constant(ir.VectorType(ir.IntType(32), 2 * width), list(range(2 * width)))
        parts = [b.shuffle_vector(lo, hi, both, name=f"{name}.cat") for lo, hi in zip(parts[::2], parts[1::2])]
    return parts[0]


def _register_masked_load(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, mask: ir.Value, fill: float, name: str) -> ir.Value:
    vec = vector_of(mask.type.count)
    fn = intrinsic(b.module, f"llvm.masked.load.v{vec.count}f32.p0", vec, [vec.as_pointer(), mask.type, vec])
    addr = b.bitcast(b.gep(base, [offset]), vec.as_pointer())  # not inbounds: masked-off lanes may lie outside
    return b.call(fn, [addr, mask, ir.Constant(vec, [fill] * vec.count)], name=name)


def store_vector(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, vec: ir.Value, name: str) -> None:
    addr = b.gep(base, [offset], inbounds=True, name=f"{name}.addr")
    b.store(vec, b.bitcast(addr, vec.type.as_pointer()), align=4)


def branch(b: ir.IRBuilder, cond: ir.Value | None, then: Callable[[], None], otherwise: Callable[[], None]) -> None:
    """if (cond) then() else otherwise(); cond None means always `otherwise`."""
    if cond is None:
        otherwise()
        return
    with b.if_else(cond) as (on_true, on_false):
        with on_true:
            then()
        with on_false:
            otherwise()


def store_epilogue(ctx: KernelContext, epilogue: Epilogue, elements: Sequence[tuple[ir.Value, list[ir.Value], ir.Value]]) -> None:
    """out[linear] = root at root_index, reading `scalar` for the contraction, per (scalar, root_index, linear).

    Every element is computed before the first store: with no store between
    them, loads of the same operand merge and LLVM's SLP vectorizer turns the
    isomorphic element chains (activations included) into vector code.
    """
    e = ctx.elemental
    b = ctx.builder
    root = ctx.kernel.root
    results = []
    for scalar, root_index, linear in elements:
        e.push_scope()
        e.substitute(epilogue.contraction.out, scalar)
        for partner in epilogue.partners:
            e.substitute(partner.out, ir.Constant(F32, 0.0))
        results.append((e.to_storage(e.value(root, root_index), root.type.dtype), linear))
        for summed in (epilogue.contraction, *epilogue.partners):
            e.substitute(summed.out, None)
        e.pop_scope()
    for value, linear in results:
        addr = b.gep(ctx.out_ptr, [linear], inbounds=True, name=f"{root.name}.out")
        b.store(value, addr, align=root.type.dtype.itemsize)


# == the packed dot ===================================================================
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
        return -(-self.rows // self.mr)

    @property
    def units(self) -> int:
        return -(-self.blocks // self.ncb)

    @property
    def items(self) -> int:
        return self.row_blocks * self.units if self.rows else 0

    @staticmethod
    def of(epilogue: Epilogue, target: CpuTarget) -> DotTiling:
        dot = epilogue.contraction
        lhs, rhs = dot.inputs
        blocks, depth, lanes = rhs.type.shape
        rows = lhs.type.size // depth if depth else 0
        columns = epilogue.chain[-1].out.type.shape[-1] if epilogue.chain else blocks * lanes
        if not depth:
            rows = dot.out.type.size // (blocks * lanes)
        accumulators = accumulator_budget(target, lanes)
        mr = max(1, min(rows, MAX_ROWS))
        ncb = max(1, min(blocks, accumulators // mr, 4))
        return DotTiling(rows, depth, blocks, lanes, columns, mr, ncb)


def packed_epilogue(kernel: Kernel, is_packed: Callable[[Node], bool], links: Sequence[LinkCheck]) -> Epilogue | None:
    """The epilogue of the kernel's packed contraction, if its packed weight is read from a buffer."""
    epilogue = Epilogue.find(kernel, is_packed, links)
    if epilogue is None or id(epilogue.contraction.inputs[1]) not in {id(p) for p in kernel.params}:
        return None
    return epilogue


@dataclass(frozen=True)
class DotMatch:
    epilogue: Epilogue
    tiling: DotTiling


def _dot_match(kernel: Kernel, target: CpuTarget) -> DotMatch | None:
    epilogue = packed_epilogue(kernel, is_packed_dot, DOT_LINKS)
    return None if epilogue is None else DotMatch(epilogue, DotTiling.of(epilogue, target))


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
            b.store(ir.Constant(vec, [0.0] * t.lanes), slot)
    streams = wp.type.size * wp.type.dtype.itemsize > PREFETCH_MIN_WEIGHT_BYTES
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
    if epilogue.root_is_contraction:  # packed [.., NB, L] output: store whole vectors
        for r in range(mr):
            for j in range(ncb):
                block = b.add(nb0, const_i64(j), flags=["nuw", "nsw"])
                at = b.mul(b.add(b.mul(rows[r], const_i64(t.blocks)), block), const_i64(t.lanes))
                store_vector(b, ctx.out_ptr, at, b.load(slots[r][j]), f"{name}.store{r}_{j}")
        return
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
            elements = []
            for lane in range(count):
                scalar = b.load(b.gep(first, [b.add(base, const_i64(lane))], inbounds=True), name=f"{name}.v")
                n = b.add(n0, const_i64(lane), flags=["nuw", "nsw"])
                elements.append((scalar, [*row_index, n], b.add(out_row, n, flags=["nuw", "nsw"])))
            store_epilogue(ctx, epilogue, elements)

        partial = t.columns % t.lanes
        last = b.icmp_unsigned("==", block, const_i64(t.blocks - 1)) if partial else None
        branch(b, last, lambda: lanes(partial), lambda: lanes(t.lanes))


def _prefetch_next_unit(b: ir.IRBuilder, weights: ir.Value, offsets: list[ir.Value], t: DotTiling) -> None:
    """Prefetch the vectors one unit (ncb panels) past `offsets`: the same k of the panels
    the next unit's tiles read. Past the last unit it names memory beyond the weight,
    which a prefetch may (it never faults), so the address is not `inbounds`."""
    byte_ptr = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    prefetch = intrinsic(b.module, "llvm.prefetch.p0", ir.VoidType(), [byte_ptr, i32, i32, i32])
    ahead = const_i64(t.ncb * t.depth * t.lanes)
    for offset in offsets:
        address = b.bitcast(b.gep(weights, [b.add(offset, ahead)]), byte_ptr)
        # read (0), locality, data cache (1)
        b.call(prefetch, [address, ir.Constant(i32, 0), ir.Constant(i32, PREFETCH_LOCALITY), ir.Constant(i32, 1)])


def _stores_plainly(kernel: Kernel, epilogue: Epilogue) -> bool:
    """The kernel is the dot and its unpack chain alone (an LM head's logits): the root is
    [rows, N] row-major, so accumulators store as whole vectors, with no epilogue to run."""
    chain = {id(n) for n in epilogue.chain}
    return all(n is epilogue.contraction or id(n) in chain or n.op == "constant" for n in kernel.nodes)


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
                    b.store(b.extract_element(vec, ir.Constant(ir.IntType(32), lane)), address, align=4)

            last = b.icmp_unsigned("==", block, const_i64(t.blocks - 1)) if partial else None
            branch(b, last, lanes, whole)


DOT_EMITTER = matched_body(_dot_match, lambda match: match.tiling.items, _emit_dot)

# The root of a dot kernel is the dot, a link of its unpack chain, or the last
# elementwise op of its epilogue; `applies` tells them apart.
ROOT_OPS = sorted(ELEMENTWISE | (DATA_MOVEMENT & {"reshape", "slice", "transpose"}) | {"dot", "conv"})


def register(emitter: BodyEmitter) -> None:
    for op in ROOT_OPS:
        BODY_EMITTERS.setdefault(op, []).append(emitter)


register(DOT_EMITTER)
