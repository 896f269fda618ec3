"""The sort / argsort GPU body: one block per row along `dim`.

Order (aot/ir/ops/sorting.py, the CPU body's): stable both ways, NaN greater than
every number (last ascending, first descending), -0.0 == 0.0, unsigned ints unsigned.
Each element becomes an unsigned *order key* whose unsigned order is that order:
floats as their bits with the sign flipped (negative: all bits flipped), -0.0 as
+0.0 and every NaN as all ones; signed ints with the sign bit flipped; descending
is the key's complement. With the element's position as the tie-break, (key,
position) entries are all distinct, so any correct sorting network gives exactly
the stable order (NaN payloads and -0.0 keep their place too).

Rows of up to SHARED_ROW elements (SHARED_ROW_WIDE for 64-bit keys): the row's
entries go to shared memory (32-bit keys packed with the position into one u64:
one unsigned compare per step) and a bitonic network sorts them, the variant
whose first step of each merge pairs i with its mirror in the block, so every
comparator puts the smaller entry first (no direction bit). The row is not padded
to a power of two: a comparator whose upper slot lies past the row would compare
with a +inf sentinel, which never moves, so it is skipped. log2(P)(log2(P)+1)/2
stages for P = the row padded to a power of two, one barrier after each (unrolled:
strides are shifts). Then argsort stores each entry's position; sort reads the
input again at that position (so values come out bit-exact, as a gather).

Longer rows: an odd-even transposition sort in the output row itself (no scratch
exists in global memory): n rounds, each comparing disjoint neighbour pairs, a
barrier between rounds; swapping only on "strictly before" keeps it stable. For
argsort the row holds positions and the keys are read from the input. Correct,
O(n^2 / threads): a slow fallback (a 32k-element row is 32k barriers) for what a
segmented radix or merge sort through a scratch buffer would do well.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.loops import I64, const_i64, delinearize, for_range, linearize
from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.simt import MAX_GRID, WARP, Simt
from aot.ir.graph import Value
from aot.ir.types import DType, SIGNED_DTYPES
from aot.plan import Kernel

I1 = ir.IntType(1)
I32 = ir.IntType(32)
# entries per row sorted in shared memory: 8 bytes each (32 KiB), 12 for 64-bit keys (24 KiB);
# under the 48 KiB of static shared memory a block may declare
SHARED_ROW = 4096
SHARED_ROW_WIDE = 2048
MAX_BLOCK = 512
WIDE_DTYPES = frozenset({DType.F64, DType.I64, DType.U64})


def _applies(kernel: Kernel) -> bool:
    producer = kernel.root.producer
    return producer is not None and producer.op in ("sort", "argsort")


def _row(kernel: Kernel) -> tuple[Value, int, int]:
    """(input, dim, row length)."""
    node = kernel.root.producer
    x = node.inputs[0]
    return x, node.attrs["dim"], x.type.shape[node.attrs["dim"]]


def _in_shared(kernel: Kernel) -> bool:
    x, _, n = _row(kernel)
    return n <= (SHARED_ROW_WIDE if x.type.dtype in WIDE_DTYPES else SHARED_ROW)


def _padded(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _block_dim(kernel: Kernel) -> int:
    _, _, n = _row(kernel)
    pairs = _padded(n) // 2 if _in_shared(kernel) else ceil_div(n, 2)
    return max(WARP, min(MAX_BLOCK, ceil_div(pairs, WARP) * WARP))


def order_key(b: ir.IRBuilder, value: ir.Value, dtype: DType, descending: bool) -> ir.Value:
    """The unsigned key (i32, or i64 for 64-bit dtypes) whose order is the sort order."""
    wide = dtype in WIDE_DTYPES
    ty = I64 if wide else I32
    sign = ir.Constant(ty, 1 << (ty.width - 1))
    if dtype.is_float:
        real = value if wide else (value if value.type == ir.FloatType() else b.fpext(value, ir.FloatType()))
        zero = ir.Constant(real.type, 0.0)
        bits = b.select(b.fcmp_ordered("==", real, zero), ir.Constant(ty, 0), b.bitcast(real, ty))  # -0.0 -> +0.0
        negative = b.icmp_signed("<", bits, ir.Constant(ty, 0))
        key = b.select(negative, b.not_(bits), b.or_(bits, sign))
        key = b.select(b.fcmp_unordered("uno", real, real), ir.Constant(ty, -1), key)
    elif dtype in SIGNED_DTYPES:
        key = b.xor(value if value.type == ty else b.sext(value, ty), sign)
    else:
        key = value if value.type == ty else b.zext(value, ty)  # unsigned, bool as 0 / 1
    return b.not_(key) if descending else key


class _SharedRow:
    """A row of (key, position) entries in shared memory. 32-bit keys: one u64 per entry,
    key in the high half, so entries compare as one unsigned number; 64-bit keys: a key
    array and a position array, compared key first."""

    def __init__(self, simt: Simt, wide: bool, n: int, name: str):
        self.simt = simt
        self.wide = wide
        if wide:
            self.keys = simt.shared(I64, n, f"{name}.keys")
            self.positions = simt.shared(I32, n, f"{name}.pos")
        else:
            self.entries = simt.shared(I64, n, f"{name}.entries")

    def put(self, b: ir.IRBuilder, slot: ir.Value, key: ir.Value, position: ir.Value) -> None:
        if self.wide:
            b.store(key, b.gep(self.keys, [slot], inbounds=True))
            b.store(b.trunc(position, I32), b.gep(self.positions, [slot], inbounds=True))
        else:
            b.store(b.or_(b.shl(b.zext(key, I64), const_i64(32)), position), b.gep(self.entries, [slot], inbounds=True))

    def position(self, b: ir.IRBuilder, slot: ir.Value) -> ir.Value:
        if self.wide:
            return b.zext(b.load(b.gep(self.positions, [slot], inbounds=True)), I64)
        entry = self.simt.opaque(b.load(b.gep(self.entries, [slot], inbounds=True)))
        return b.and_(entry, const_i64(0xFFFFFFFF))

    def compare_exchange(self, b: ir.IRBuilder, low: ir.Value, high: ir.Value) -> None:
        """Order slots low < high: the smaller entry ends at low."""
        if not self.wide:
            a_ptr, c_ptr = (b.gep(self.entries, [s], inbounds=True) for s in (low, high))
            a, c = b.load(a_ptr), b.load(c_ptr)
            swap = b.icmp_unsigned("<", c, a)
            b.store(b.select(swap, c, a), a_ptr)
            b.store(b.select(swap, a, c), c_ptr)
            return
        ka_ptr, kc_ptr = (b.gep(self.keys, [s], inbounds=True) for s in (low, high))
        pa_ptr, pc_ptr = (b.gep(self.positions, [s], inbounds=True) for s in (low, high))
        ka, kc, pa, pc = b.load(ka_ptr), b.load(kc_ptr), b.load(pa_ptr), b.load(pc_ptr)
        swap = b.or_(b.icmp_unsigned("<", kc, ka), b.and_(b.icmp_unsigned("==", kc, ka), b.icmp_unsigned("<", pc, pa)))
        b.store(b.select(swap, kc, ka), ka_ptr)
        b.store(b.select(swap, ka, kc), kc_ptr)
        b.store(b.select(swap, pc, pa), pa_ptr)
        b.store(b.select(swap, pa, pc), pc_ptr)


@contextmanager
def strided(simt: Simt, tid: ir.Value, count: int, name: str) -> Iterator[ir.Value]:
    """for (i = tid; i < count; i += block_dim): yields i (a thread's share of count items)."""
    b = simt.builder
    with for_range(b, 0, ceil_div(count, simt.block_dim), name) as r:
        i = b.add(b.mul(r, const_i64(simt.block_dim)), tid, name=f"{name}.i", flags=["nuw"])
        with b.if_then(b.icmp_unsigned("<", i, const_i64(count))):
            yield i


class _Row:
    """Addressing of one row: the input's element at row position j and the output slot of j."""

    def __init__(self, ctx: GpuContext, outer: list[ir.Value]):
        self.ctx = ctx
        self.x, self.dim, self.n = _row(ctx.kernel)
        self.outer = outer

    def index(self, j: ir.Value) -> list[ir.Value]:
        index = list(self.outer)
        index.insert(self.dim, j)
        return index

    def input(self, j: ir.Value) -> ir.Value:
        return self.ctx.elemental.value(self.x, self.index(j))

    def out(self, j: ir.Value) -> ir.Value:
        b = self.ctx.builder
        return b.gep(self.ctx.out_ptr, [linearize(b, self.index(j), self.x.type.shape, "out")], inbounds=True)


@contextmanager
def phase(ctx: GpuContext) -> Iterator[ir.Value]:
    """A phase with its own elemental cache scope (no value computed in it leaks to the next)."""
    with ctx.simt.threads() as tid:
        ctx.elemental.push_scope()
        yield tid
        ctx.elemental.pop_scope()


def _emit(ctx: GpuContext) -> None:
    simt, b = ctx.simt, ctx.builder
    node = ctx.kernel.root.producer
    x, dim, n = _row(ctx.kernel)
    if x.type.size == 0:
        with simt.blocks(1):
            return
    descending = node.attrs["descending"]
    other_shape = [s for d, s in enumerate(x.type.shape) if d != dim]
    rows = x.type.size // n
    shared = _SharedRow(simt, x.type.dtype in WIDE_DTYPES, n, node.out.name) if _in_shared(ctx.kernel) else None
    with simt.blocks(rows) as block:
        row = _Row(ctx, delinearize(b, block, other_shape, "row"))
        if shared is not None:
            _bitonic(ctx, row, shared, descending)
        else:
            _odd_even(ctx, row, descending)


def _bitonic(ctx: GpuContext, row: _Row, shared: _SharedRow, descending: bool) -> None:
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    node = ctx.kernel.root.producer
    dtype, n = row.x.type.dtype, row.n
    with phase(ctx) as tid:
        with strided(simt, tid, n, "load") as j:
            e.push_scope()
            shared.put(b, j, order_key(b, row.input(j), dtype, descending), j)
            e.pop_scope()
    simt.sync()
    padded = _padded(n)
    size = 2
    while size <= padded:
        stride = size // 2
        first = True
        while stride >= 1:
            with phase(ctx) as tid:
                with strided(simt, tid, padded // 2, f"k{size}.j{stride}") as p:
                    # pair p: the slot with bit log2(stride) clear, and its partner
                    block_start = b.shl(b.lshr(p, const_i64(stride.bit_length() - 1)), const_i64(stride.bit_length()))
                    offset = b.and_(p, const_i64(stride - 1))
                    low = b.or_(block_start, offset)
                    # first step of a merge: the mirror slot in the block of `size`; then low + stride
                    high = b.sub(b.add(block_start, const_i64(size - 1)), offset) if first else b.or_(low, const_i64(stride))
                    with b.if_then(b.icmp_unsigned("<", high, const_i64(n))):
                        shared.compare_exchange(b, low, high)
            simt.sync()
            first = False
            stride //= 2
        size *= 2
    with phase(ctx) as tid:
        with strided(simt, tid, n, "store") as j:
            e.push_scope()
            position = shared.position(b, j)
            if node.op == "argsort":
                b.store(e.convert(position, DType.I64, node.out.type.dtype), row.out(j))
            else:
                b.store(e.to_storage(row.input(position), dtype), row.out(j))
            e.pop_scope()
    if simt.block_count > MAX_GRID:
        simt.sync()  # this thread's next row (grid-stride) overwrites slots others still read


def _odd_even(ctx: GpuContext, row: _Row, descending: bool) -> None:
    """Odd-even transposition in the output row: n rounds of disjoint neighbour compare-exchanges."""
    simt, b, e = ctx.simt, ctx.builder, ctx.elemental
    node = ctx.kernel.root.producer
    dtype, n = row.x.type.dtype, row.n
    out_dtype = node.out.type.dtype
    argsort = node.op == "argsort"

    def key_at(address: ir.Value) -> tuple[ir.Value, ir.Value]:
        stored = b.load(address)
        value = row.input(e.convert(stored, out_dtype, DType.I64)) if argsort else e.from_storage(stored, dtype, "v")
        return stored, order_key(b, value, dtype, descending)

    with phase(ctx) as tid:
        with strided(simt, tid, n, "copy") as j:
            e.push_scope()
            first = e.convert(j, DType.I64, out_dtype) if argsort else e.to_storage(row.input(j), dtype)
            b.store(first, row.out(j))
            e.pop_scope()
    simt.sync()
    with simt.uniform_range(0, n, "round") as r:
        parity = b.and_(r, const_i64(1))
        with phase(ctx) as tid:
            with strided(simt, tid, n // 2, "pair") as p:
                low = b.add(b.shl(p, const_i64(1)), parity)
                high = b.add(low, const_i64(1))
                with b.if_then(b.icmp_unsigned("<", high, const_i64(n))):
                    e.push_scope()
                    low_ptr, high_ptr = row.out(low), row.out(high)
                    low_stored, low_key = key_at(low_ptr)
                    high_stored, high_key = key_at(high_ptr)
                    with b.if_then(b.icmp_unsigned("<", high_key, low_key)):
                        b.store(high_stored, low_ptr)
                        b.store(low_stored, high_ptr)
                    e.pop_scope()
        simt.sync()


SORT_BODY = GpuBody("sort", _applies, _block_dim, _emit)
