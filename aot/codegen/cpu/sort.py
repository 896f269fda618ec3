"""sort / argsort kernel body: one work item per row along `dim`.

Each row is copied into stack scratch as (key, original position) and
sorted by a bottom-up merge sort: stable, O(n log n), branch-light merges.
The number of passes is known at compile time, so they are unrolled and the
ping-pong between the two scratch halves is static. The order is the one
documented in aot/ir/ops/sorting.py: NaN greater than every number, ties kept
in their original order both ways.
"""
from __future__ import annotations

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.elemental import register_type
from aot.codegen.cpu.body import BodyEmitter, KernelContext, any_target
from aot.codegen.loops import I64, const_i64, delinearize, for_range, linearize
from aot.codegen.cpu.target import CpuTarget
from aot.errors import CodegenError
from aot.ir.types import DType, SIGNED_DTYPES
from aot.plan import Kernel

I1 = ir.IntType(1)
I8 = ir.IntType(8)
# scratch is 2 x (key + i64 position) per row element, on the stack of the calling thread
MAX_SCRATCH_BYTES = 1 << 19


def _applies(kernel: Kernel, target: CpuTarget) -> bool:
    return True


def _work_items(kernel: Kernel) -> int:
    x = kernel.root.producer.inputs[0]
    dim = kernel.root.producer.attrs["dim"]
    items = 1
    for d, size in enumerate(x.type.shape):
        if d != dim:
            items *= size
    return items


def _key_type(dtype: DType) -> ir.Type:
    return I8 if dtype is DType.BOOL else register_type(dtype)


def _before(b: ir.IRBuilder, a: ir.Value, c: ir.Value, dtype: DType, descending: bool) -> ir.Value:
    """a sorts strictly before c (so equal keys never swap: the merge stays stable)."""
    if descending:
        a, c = c, a  # descending: c < a in the ascending order
    if dtype.is_float:
        ordered_less = b.fcmp_ordered("<", a, c)
        nan_last = b.and_(b.fcmp_ordered("ord", a, a), b.fcmp_unordered("uno", c, c))
        return b.or_(ordered_less, nan_last)
    if dtype in SIGNED_DTYPES:
        return b.icmp_signed("<", a, c)
    return b.icmp_unsigned("<", a, c)  # u8 and bool (as 0/1)


def _emit(ctx: KernelContext) -> None:
    node = ctx.kernel.root.producer
    (x,) = node.inputs
    dim, descending = node.attrs["dim"], node.attrs["descending"]
    dtype = x.type.dtype
    n = x.type.shape[dim]
    b, e = ctx.builder, ctx.elemental
    name = node.out.name
    key_ty = _key_type(dtype)
    key_bytes = key_ty.width // 8 if isinstance(key_ty, ir.IntType) else 4 if isinstance(key_ty, ir.FloatType) else 8
    scratch_bytes = 2 * n * (key_bytes + 8)
    if scratch_bytes > MAX_SCRATCH_BYTES:
        raise CodegenError(f"no cpu lowering for {node.op} of rows of {n} elements ({name}): "
                           f"its {scratch_bytes} bytes of stack scratch exceed {MAX_SCRATCH_BYTES}")
    keys = [e.alloca(ir.ArrayType(key_ty, max(n, 1)), f"{name}.keys{k}") for k in range(2)]
    where = [e.alloca(ir.ArrayType(I64, max(n, 1)), f"{name}.pos{k}") for k in range(2)]
    other_shape = [s for d, s in enumerate(x.type.shape) if d != dim]
    out_shape = node.out.type.shape
    with for_range(b, ctx.begin, ctx.end, f"{name}.row") as item:
        outer = delinearize(b, item, other_shape, f"{name}.row")

        def full_index(j: ir.Value) -> list[ir.Value]:
            index = list(outer)
            index.insert(dim, j)
            return index

        with for_range(b, 0, n, f"{name}.load") as j:
            e.push_scope()
            value = e.value(x, full_index(j))
            key = b.zext(value, I8) if dtype is DType.BOOL else value
            b.store(key, _slot(b, keys[0], j))
            b.store(j, _slot(b, where[0], j))
            e.pop_scope()
        source = 0
        width = 1
        while width < n:
            _merge_pass(b, keys[source], where[source], keys[1 - source], where[1 - source], n, width, dtype, descending, f"{name}.m{width}")
            source = 1 - source
            width *= 2
        with for_range(b, 0, n, f"{name}.store") as j:
            index = full_index(j)
            linear = linearize(b, index, out_shape, name)
            if node.op == "sort":
                key = b.load(_slot(b, keys[source], j))
                value = b.icmp_unsigned("!=", key, I8(0)) if dtype is DType.BOOL else key
                stored = e.to_storage(value, dtype)
            else:
                position = b.load(_slot(b, where[source], j))
                stored = e.convert(position, DType.I64, node.out.type.dtype)
            b.store(stored, b.gep(ctx.out_ptr, [linear], inbounds=True), align=node.out.type.dtype.itemsize)


def _slot(b: ir.IRBuilder, array: ir.Value, i: ir.Value) -> ir.Value:
    return b.gep(array, [const_i64(0), i], inbounds=True)


def _merge_pass(b: ir.IRBuilder, src_keys: ir.Value, src_pos: ir.Value, dst_keys: ir.Value, dst_pos: ir.Value,
                n: int, width: int, dtype: DType, descending: bool, name: str) -> None:
    """Merge each pair of sorted runs [lo, lo+width), [lo+width, lo+2 width) from src into dst."""
    runs = ceil_div(n, 2 * width)
    with for_range(b, 0, runs, f"{name}.run") as run:
        lo = b.mul(run, const_i64(2 * width))
        mid = _min(b, b.add(lo, const_i64(width)), n)
        hi = _min(b, b.add(lo, const_i64(2 * width)), n)
        head = b.append_basic_block(f"{name}.head")
        body = b.append_basic_block(f"{name}.body")
        done = b.append_basic_block(f"{name}.done")
        start = b.block
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64, name=f"{name}.k")
        i = b.phi(I64, name=f"{name}.i")
        j = b.phi(I64, name=f"{name}.j")
        k.add_incoming(lo, start)
        i.add_incoming(lo, start)
        j.add_incoming(mid, start)
        b.cbranch(b.icmp_signed("<", k, hi), body, done)
        b.position_at_end(body)
        left_open = b.icmp_signed("<", i, mid)
        right_open = b.icmp_signed("<", j, hi)
        # clamp both cursors to valid slots so the loads never stray; the selects decide
        i_safe = b.select(left_open, i, lo)
        j_safe = b.select(right_open, j, lo)
        left_key = b.load(_slot(b, src_keys, i_safe))
        right_key = b.load(_slot(b, src_keys, j_safe))
        # take the right element only when it sorts strictly before the left one (stability)
        take_right = b.and_(right_open, b.or_(b.not_(left_open), _before(b, right_key, left_key, dtype, descending)))
        from_index = b.select(take_right, j_safe, i_safe)
        b.store(b.select(take_right, right_key, left_key), _slot(b, dst_keys, k))
        b.store(b.load(_slot(b, src_pos, from_index)), _slot(b, dst_pos, k))
        one = const_i64(1)
        k.add_incoming(b.add(k, one), b.block)
        i.add_incoming(b.select(take_right, i, b.add(i, one)), b.block)
        j.add_incoming(b.select(take_right, b.add(j, one), j), b.block)
        b.branch(head)
        b.position_at_end(done)


def _min(b: ir.IRBuilder, value: ir.Value, limit: int) -> ir.Value:
    return b.select(b.icmp_signed("<", value, const_i64(limit)), value, const_i64(limit))


SORT_EMITTER = BodyEmitter(_applies, any_target(_work_items), _emit)
