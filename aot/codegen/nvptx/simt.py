"""SIMT kernels written once and realized twice: for the GPU, and for the host as loops.

A GPU body (codegen/nvptx/bodies.py) emits through a `Simt`, never through thread
indices or barriers of its own:

    with simt.blocks(count) as block:       # every block of the launch (uniform in a block)
        acc = simt.thread_var(F32, "acc")  # (allocated up front, before blocks(), in practice)
        with simt.threads() as tid:        # a phase: code each thread of the block runs
            ...                            # may branch on tid; must not sync
        simt.sync()                        # __syncthreads between phases
        simt.shuffle_down(acc, other, 16)  # a warp shuffle: a phase of its own
        simt.mma(MMA_F16, a, b, c, d)      # a warp's tensor-core multiply-add: a phase of its own
        with simt.uniform_range(0, n, "k") as k:   # a loop every thread runs alike; may hold phases
            ...

GpuSimt emits that for NVPTX: `threads()` is straight-line code on %tid.x, `sync()`
is bar.sync 0, `blocks()` a grid-stride loop over %ctaid.x, a thread variable a
register (an alloca mem2reg promotes), shared memory an addrspace(3) array.

HostSimt emits the same body as host code, the work-item-loop technique of CPU
OpenCL implementations (POCL): `blocks()` loops over [block_begin, block_end) (two
i64 parameters after the buffers), each phase is a loop over the block's threads,
so every thread finishes a phase before any starts the next, which is what
a barrier guarantees; a thread variable is an array with one slot per thread (the
value lives across phases); shared memory is one array per kernel, and a
shuffle reads the source lane's slot. Emulated runs (nvptx/emulate.py) are thus
tested on the CPU against the reference interpreter.

`mma` is mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.f32 or m16n8k8 ... tf32:
on the GPU the NVVM intrinsic (llvm.nvvm.mma.*), on the host a helper that, warp by
warp, gathers the 32 lanes' fragments into dense A, B, C by the PTX ISA's fragment
layouts (MmaShape), computes D = A B + C in f32 and scatters D back, as a shuffle
reads other lanes' slots. What the emulation cannot prove is that the layouts
written down here (from the PTX ISA, "Matrix Fragments for mma.m16n8k8 / m16n8k16
with floating point type", sections 9.7.14.5.7-8) are what the hardware does:
bodies built on them are checked on a GPU only (benchmarks/gpu_check.sh, where a
machine is lent). Nor does it model the tensor core's summation: products of
f16/bf16/tf32 inputs are exact in f32, but the order and rounding of the hardware's
k-sum are not documented; the host sums in k order, rounding each step.

What the two realizations agree on only if a body follows the rules above:
phases that hand data to other threads through shared memory must have a
`sync()` between them (HostSimt runs them in order either way, so a missing sync
is a GPU race the emulation cannot show); a value crossing phases must be in a
thread variable (an SSA value of one phase is not defined in the next on the host).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from llvmlite import ir

from aot.codegen.loops import I64, const_i64, for_range, strided_range
from aot.errors import CodegenError

I32 = ir.IntType(32)
F32 = ir.FloatType()
WARP = 32
# the largest grid (in blocks) a launch asks for; a body with more blocks loops over them
MAX_GRID = 65535
SHARED_ADDRSPACE = 3


@dataclass(frozen=True)
class MmaShape:
    """One mma.sync form: D[16 x 8] = A[16 x k] (row-major) * B[k x 8] (column-major) + C, f32
    C and D. A lane holds its A and B elements in 32-bit registers (two f16/bf16 a register,
    low half first, or one tf32) and C/D in 4 floats; which elements, the *_at maps say, as
    the PTX ISA gives them, with group = lane >> 2 and thread = lane % 4."""

    k: int
    kind: str  # "f16", "bf16" or "tf32": the A and B element type
    m = 16
    n = 8

    @property
    def per_register(self) -> int:
        return 1 if self.kind == "tf32" else 2

    @property
    def a_registers(self) -> int:
        return self.m * self.k // WARP // self.per_register

    @property
    def b_registers(self) -> int:
        return self.k * self.n // WARP // self.per_register

    c_registers = 4

    def a_at(self, group: int, thread: int, i: int) -> tuple[int, int]:
        """(row, k) of element a_i."""
        if self.kind == "tf32":  # m16n8k8 .tf32, Figure 72
            return group + 8 * (i % 2), thread + 4 * (i // 2)
        # m16n8k16 .f16/.bf16, Figure 79
        return group + 8 * ((i // 2) % 2), thread * 2 + i % 2 + 8 * (i // 4)

    def b_at(self, group: int, thread: int, i: int) -> tuple[int, int]:
        """(k, column) of element b_i."""
        if self.kind == "tf32":
            return thread + 4 * i, group
        return thread * 2 + i % 2 + 8 * (i // 2), group

    def c_at(self, group: int, thread: int, i: int) -> tuple[int, int]:
        """(row, column) of accumulator c_i (and d_i): the same for every kind."""
        return group + 8 * (i // 2), thread * 2 + i % 2

    @property
    def intrinsic(self) -> str:
        """The NVVM intrinsic of mma.sync.aligned.m16n8k<k>.row.col.f32.<kind>.<kind>.f32."""
        if self.kind == "f16":  # named by its D and C types; A and B are <2 x half>
            return "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
        return f"llvm.nvvm.mma.m16n8k{self.k}.row.col.{self.kind}"


MMA_F16 = MmaShape(16, "f16")
MMA_BF16 = MmaShape(16, "bf16")
MMA_TF32 = MmaShape(8, "tf32")


def affine(at: Callable[[int, int, int], tuple[int, int]], i: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """A fragment map's element i as (constant, per group, per thread) for its row and its column:
    every layout above is affine in group and thread (tests/codegen/nvptx/test_mma.py checks)."""
    base, by_group, by_thread = at(0, 0, i), at(1, 0, i), at(0, 1, i)
    return tuple((base[d], by_group[d] - base[d], by_thread[d] - base[d]) for d in range(2))  # type: ignore[return-value]


class ThreadVar:
    """One value per thread that lives across phases: `at(tid)` is this thread's slot."""

    def __init__(self, storage: ir.Value, per_thread: bool):
        self._storage = storage
        self._per_thread = per_thread

    def at(self, builder: ir.IRBuilder, tid: ir.Value) -> ir.Value:
        if not self._per_thread:
            return self._storage
        return builder.gep(self._storage, [const_i64(0), tid], inbounds=True)


class Simt:
    """The interface a GPU body emits through; `builder` is positioned where the body is."""

    def __init__(self, fn: ir.Function, setup: ir.IRBuilder, builder: ir.IRBuilder, block_dim: int):
        if block_dim <= 0 or block_dim % WARP or block_dim > 1024:
            raise CodegenError(f"block of {block_dim} threads: a block is 32 to 1024 threads, a multiple of 32")
        self.fn = fn
        self.setup = setup  # positioned in the entry block: allocas and loop-invariant setup
        self.builder = builder
        self.block_dim = block_dim
        self.block_count: int | None = None  # set by blocks(); the launch's grid comes from it
        # __launch_bounds__'s second number: blocks an SM must fit at once, so ptxas keeps
        # registers within 65536 / (block_dim * min_blocks_per_sm); None: one block (the
        # bounds go into the PTX after LLVM, see kernel.py with_launch_bounds)
        self.min_blocks_per_sm: int | None = None
        self._in_phase = False
        self._shared = 0

    # -- what differs between the realizations ---------------------------------------
    def _block_loop(self, count: int) -> Iterator[ir.Value]:
        raise NotImplementedError

    def _phase(self) -> Iterator[ir.Value]:
        raise NotImplementedError

    def _sync(self) -> None:
        raise NotImplementedError

    def thread_var(self, ty: ir.Type, name: str) -> ThreadVar:
        raise NotImplementedError

    def shared(self, ty: ir.Type, count: int, name: str) -> ir.Value:
        """A per-block array of `count` elements of `ty`; a pointer to its first element."""
        raise NotImplementedError

    def _shuffle(self, src: ThreadVar, dst: ThreadVar, delta: int) -> None:
        raise NotImplementedError

    def _mma(self, shape: MmaShape, a: Sequence[ThreadVar], b: Sequence[ThreadVar], c: Sequence[ThreadVar],
             d: Sequence[ThreadVar]) -> None:
        raise NotImplementedError

    # -- the interface ---------------------------------------------------------------
    @property
    def shared_bytes(self) -> int:
        """Static shared memory the body allocated, in bytes."""
        return self._shared

    def opaque(self, value: ir.Value) -> ir.Value:
        """`value`, where the realization needs no barrier against its compiler (HostSimt's does)."""
        return value

    def _count_shared(self, ty: ir.Type, count: int) -> None:
        width = ty.width // 8 if isinstance(ty, ir.IntType) else {"float": 4, "double": 8, "half": 2}[str(ty)]
        self._shared += width * count

    @contextmanager
    def blocks(self, count: int) -> Iterator[ir.Value]:
        """Every block index in [0, count), each run by one block; yields it (i64, uniform)."""
        if self.block_count is not None:
            raise CodegenError("a GPU body calls Simt.blocks() once")
        if count <= 0:
            raise CodegenError(f"a launch of {count} blocks")
        self.block_count = count
        yield from self._block_loop(count)

    @contextmanager
    def threads(self) -> Iterator[ir.Value]:
        """A phase: what every thread of the block runs; yields the thread index (i64)."""
        if self._in_phase:
            raise CodegenError("Simt.threads() phases do not nest")
        self._in_phase = True
        try:
            yield from self._phase()
        finally:
            self._in_phase = False

    def sync(self) -> None:
        """A barrier: every thread of the block finishes the phase before it before any starts the next."""
        if self._in_phase:
            raise CodegenError("Simt.sync() inside a phase (a barrier in divergent code)")
        self._sync()

    def shuffle_down(self, src: ThreadVar, dst: ThreadVar, delta: int) -> None:
        """dst of lane l = src of lane l + delta within its warp, or its own src past the warp's end
        (shfl.sync.down with clamp 31 on every lane). A phase of its own."""
        if self._in_phase:
            raise CodegenError("Simt.shuffle_down() inside a phase")
        if not 0 < delta < WARP:
            raise CodegenError(f"shuffle by {delta} lanes")
        self._shuffle(src, dst, delta)

    def mma(self, shape: MmaShape, a: Sequence[ThreadVar], b: Sequence[ThreadVar], c: Sequence[ThreadVar],
            d: Sequence[ThreadVar]) -> None:
        """Each warp's D = A B + C (mma.sync; `shape` says the layouts): a, b are i32 thread variables
        (shape.a_registers, shape.b_registers), c, d f32 ones (4 each; d may be c). Every lane of
        every warp of the block takes part. A phase of its own."""
        if self._in_phase:
            raise CodegenError("Simt.mma() inside a phase")
        counts = (len(a), len(b), len(c), len(d))
        if counts != (shape.a_registers, shape.b_registers, shape.c_registers, shape.c_registers):
            raise CodegenError(f"mma m16n8k{shape.k} {shape.kind} takes {shape.a_registers}, {shape.b_registers}, 4 "
                               f"and 4 registers, got {counts}")
        self._mma(shape, a, b, c, d)

    @contextmanager
    def uniform_range(self, start: int | ir.Value, stop: int | ir.Value, name: str) -> Iterator[ir.Value]:
        """for (i = start; i < stop; ++i), where every thread of a block runs the same trips;
        phases and syncs may be inside (the loop is the same code in both realizations)."""
        with for_range(self.builder, start, stop, name) as i:
            yield i


class GpuSimt(Simt):
    """NVPTX: the body's phases run as straight-line code on each thread."""

    def annotate_launch_bounds(self) -> None:
        """__launch_bounds__(block_dim, min_blocks_per_sm) as NVVM annotations, which LLVM sees
        too (it then knows %tid.x < block_dim). Only for bodies tuned that way (the GEMMs: their
        register budget holds only so); other kernels get the bounds in the PTX alone
        (kernel.py with_launch_bounds)."""
        module = self.fn.module
        bounds = [("maxntidx", self.block_dim)]
        if self.min_blocks_per_sm is not None:
            bounds.append(("minctasm", self.min_blocks_per_sm))
        for key, value in bounds:
            module.add_named_metadata("nvvm.annotations", [self.fn, ir.MetaDataString(module, key), ir.Constant(I32, value)])

    def __init__(self, fn: ir.Function, setup: ir.IRBuilder, builder: ir.IRBuilder, block_dim: int):
        super().__init__(fn, setup, builder, block_dim)
        self._tid = _special_register(setup, "tid.x")

    def _block_loop(self, count: int) -> Iterator[ir.Value]:
        b = self.builder
        first = _special_register(self.setup, "ctaid.x")
        if count == 1:
            yield const_i64(0)
            return
        stride = _special_register(self.setup, "nctaid.x")
        with strided_range(b, first, count, stride, "block") as block:
            yield block

    def _phase(self) -> Iterator[ir.Value]:
        yield self._tid

    def _sync(self) -> None:
        module = self.builder.module
        barrier = module.globals.get("llvm.nvvm.barrier0") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), []), name="llvm.nvvm.barrier0")
        self.builder.call(barrier, [])

    def thread_var(self, ty: ir.Type, name: str) -> ThreadVar:
        return ThreadVar(self.setup.alloca(ty, name=name), per_thread=False)

    def shared(self, ty: ir.Type, count: int, name: str) -> ir.Value:
        self._count_shared(ty, count)
        module = self.builder.module
        array = ir.GlobalVariable(module, ir.ArrayType(ty, count), name=module.get_unique_name(f"{self.fn.name}.{name}"),
                                  addrspace=SHARED_ADDRSPACE)
        array.linkage = "internal"
        array.align = 16
        array.initializer = ir.Constant(ir.ArrayType(ty, count), ir.Undefined)
        first = self.setup.gep(array, [const_i64(0), const_i64(0)], inbounds=True, name=f"{name}.shared")
        return self.setup.addrspacecast(first, ty.as_pointer(), name=name)

    def _shuffle(self, src: ThreadVar, dst: ThreadVar, delta: int) -> None:
        b = self.builder
        value = b.load(src.at(b, self._tid))
        b.store(_shfl_down(b, value, delta), dst.at(b, self._tid))

    def _mma(self, shape: MmaShape, a: Sequence[ThreadVar], b: Sequence[ThreadVar], c: Sequence[ThreadVar],
             d: Sequence[ThreadVar]) -> None:
        builder, tid = self.builder, self._tid
        module = builder.module
        operand = ir.VectorType(ir.HalfType(), 2) if shape.kind == "f16" else I32
        fn = module.globals.get(shape.intrinsic) or ir.Function(
            module, ir.FunctionType(ir.LiteralStructType([F32] * 4),
                                    [operand] * (shape.a_registers + shape.b_registers) + [F32] * 4),
            name=shape.intrinsic)
        args = [builder.load(v.at(builder, tid)) for v in (*a, *b)]
        if operand != I32:
            args = [builder.bitcast(x, operand) for x in args]
        result = builder.call(fn, args + [builder.load(v.at(builder, tid)) for v in c], name="mma")
        for i, v in enumerate(d):
            builder.store(builder.extract_value(result, i), v.at(builder, tid))


class HostSimt(Simt):
    """The host: blocks, then each phase's threads, as loops (the emulation of the GPU kernel)."""

    def _block_loop(self, count: int) -> Iterator[ir.Value]:
        begin, end = self.fn.args[-2], self.fn.args[-1]
        with for_range(self.builder, begin, end, "block") as block:
            yield block

    def _phase(self) -> Iterator[ir.Value]:
        with for_range(self.builder, 0, self.block_dim, "thread") as tid:
            yield tid

    def _sync(self) -> None:
        pass  # the next phase's loop starts after every thread finished this one

    def opaque(self, value: ir.Value) -> ir.Value:
        """`value` through an empty inline asm: no instruction, but LLVM's x86 back end no longer
        knows its bits. LLVM 20's x86 selection miscompiled the sort body's position
        extraction, `(entry & 3) * 264` with the entry a umin/umax (cmov) of packed
        (key << 32 | position) entries whose low bits it knew: the lea took the whole
        64-bit entry for the `* 8` part (fuzz seed 50226, TopK over a 3-long first axis: a
        read far out of bounds on the host; the PTX is not affected)."""
        barrier = ir.InlineAsm(ir.FunctionType(value.type, [value.type]), "", "=r,0")
        return self.builder.call(barrier, [value])

    def thread_var(self, ty: ir.Type, name: str) -> ThreadVar:
        return ThreadVar(self.setup.alloca(ir.ArrayType(ty, self.block_dim), name=name), per_thread=True)

    def shared(self, ty: ir.Type, count: int, name: str) -> ir.Value:
        self._count_shared(ty, count)
        array = self.setup.alloca(ir.ArrayType(ty, count), name=f"{name}.shared")
        array.align = 16
        return self.setup.gep(array, [const_i64(0), const_i64(0)], inbounds=True, name=name)

    def _shuffle(self, src: ThreadVar, dst: ThreadVar, delta: int) -> None:
        with self.threads() as tid:
            b = self.builder
            lane = b.urem(tid, const_i64(WARP))
            in_warp = b.icmp_unsigned("<", b.add(lane, const_i64(delta)), const_i64(WARP))
            from_lane = b.select(in_warp, b.add(tid, const_i64(delta)), tid)
            b.store(b.load(src.at(b, from_lane)), dst.at(b, tid))

    def _mma(self, shape: MmaShape, a: Sequence[ThreadVar], b: Sequence[ThreadVar], c: Sequence[ThreadVar],
             d: Sequence[ThreadVar]) -> None:
        builder = self.builder
        fn = _host_mma(builder.module, shape)
        with for_range(builder, 0, self.block_dim // WARP, "warp") as warp:
            first = builder.mul(warp, const_i64(WARP))
            builder.call(fn, [v.at(builder, first) for v in (*a, *b, *c, *d)])


def _host_mma(module: ir.Module, shape: MmaShape) -> ir.Function:
    """void aot.mma.<kind>(i32* a.., i32* b.., float* c.., float* d..), each pointing at lane 0 of
    one warp's slots of a thread variable: gather A, B, C by the fragment layouts, D = A B + C
    in f32 (exact products, summed in k order), scatter D."""
    name = f"aot.mma.m16n8k{shape.k}.{shape.kind}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    counts = (shape.a_registers, shape.b_registers, shape.c_registers, shape.c_registers)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32.as_pointer()] * (counts[0] + counts[1])
                                             + [F32.as_pointer()] * (counts[2] + counts[3])), name=name)
    fn.linkage = "internal"
    args = list(fn.args)
    a_regs, b_regs = args[:counts[0]], args[counts[0]:counts[0] + counts[1]]
    c_regs, d_regs = args[counts[0] + counts[1]:-4], args[-4:]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    dense_a = b.alloca(ir.ArrayType(F32, shape.m * shape.k), name="A")
    dense_b = b.alloca(ir.ArrayType(F32, shape.k * shape.n), name="B")
    dense_c = b.alloca(ir.ArrayType(F32, shape.m * shape.n), name="C")

    def element(array: ir.Value, row: ir.Value, col: ir.Value, width: int) -> ir.Value:
        return b.gep(array, [const_i64(0), b.add(b.mul(row, const_i64(width)), col)], inbounds=True)

    def position(at: Callable[[int, int, int], tuple[int, int]], i: int, group: ir.Value,
                 thread: ir.Value) -> list[ir.Value]:
        return [b.add(const_i64(k), b.add(b.mul(group, const_i64(g)), b.mul(thread, const_i64(t))))
                for k, g, t in affine(at, i)]

    with for_range(b, 0, WARP, "lane") as lane:  # gather
        group, thread = b.lshr(lane, const_i64(2)), b.and_(lane, const_i64(3))
        for regs, at, dense, width in ((a_regs, shape.a_at, dense_a, shape.k), (b_regs, shape.b_at, dense_b, shape.n)):
            for i in range(len(regs) * shape.per_register):
                word = b.load(b.gep(regs[i // shape.per_register], [lane], inbounds=True))
                b.store(_decode(b, word, shape.kind, i % shape.per_register), element(dense, *position(at, i, group, thread), width))
        for i, reg in enumerate(c_regs):
            b.store(b.load(b.gep(reg, [lane], inbounds=True)), element(dense_c, *position(shape.c_at, i, group, thread), shape.n))
    with for_range(b, 0, shape.m, "row") as row:
        with for_range(b, 0, shape.n, "col") as col:
            slot = element(dense_c, row, col, shape.n)
            with for_range(b, 0, shape.k, "k") as k:
                product = b.fmul(b.load(element(dense_a, row, k, shape.k)), b.load(element(dense_b, k, col, shape.n)))
                b.store(b.fadd(b.load(slot), product), slot)
    with for_range(b, 0, WARP, "lane") as lane:  # scatter
        group, thread = b.lshr(lane, const_i64(2)), b.and_(lane, const_i64(3))
        for i, reg in enumerate(d_regs):
            value = b.load(element(dense_c, *position(shape.c_at, i, group, thread), shape.n))
            b.store(value, b.gep(reg, [lane], inbounds=True))
    b.ret_void()
    return fn


def _decode(b: ir.IRBuilder, word: ir.Value, kind: str, half: int) -> ir.Value:
    """Element `half` (0: the low 16 bits) of a fragment register, as the exact f32 it stands for."""
    if kind == "tf32":  # the tensor core reads the sign, exponent and top 10 mantissa bits
        return b.bitcast(b.and_(word, ir.Constant(I32, 0xFFFFE000)), F32)
    if kind == "bf16":
        bits = b.shl(word, ir.Constant(I32, 16)) if half == 0 else b.and_(word, ir.Constant(I32, 0xFFFF0000))
        return b.bitcast(bits, F32)
    h = b.and_(b.lshr(word, ir.Constant(I32, 16 * half)), ir.Constant(I32, 0xFFFF))  # f16, decoded exactly
    sign = b.shl(b.and_(h, ir.Constant(I32, 0x8000)), ir.Constant(I32, 16))
    magnitude = b.and_(h, ir.Constant(I32, 0x7FFF))
    exponent = b.lshr(magnitude, ir.Constant(I32, 10))
    normal = b.add(b.shl(magnitude, ir.Constant(I32, 13)), ir.Constant(I32, (127 - 15) << 23))
    special = b.or_(b.shl(magnitude, ir.Constant(I32, 13)), ir.Constant(I32, 0x7F800000))  # inf, NaN
    tiny = b.bitcast(b.fmul(b.uitofp(magnitude, F32), ir.Constant(F32, 2.0 ** -24)), I32)  # zero, subnormals
    bits = b.select(b.icmp_unsigned("==", exponent, ir.Constant(I32, 0)), tiny,
                    b.select(b.icmp_unsigned("==", exponent, ir.Constant(I32, 31)), special, normal))
    return b.bitcast(b.or_(bits, sign), F32)


def _special_register(builder: ir.IRBuilder, name: str) -> ir.Value:
    """%tid.x and friends, as i64."""
    symbol = f"llvm.nvvm.read.ptx.sreg.{name}"
    fn = builder.module.globals.get(symbol) or ir.Function(builder.module, ir.FunctionType(I32, []), name=symbol)
    return builder.zext(builder.call(fn, [], name=name.replace(".", "_")), I64)


def _shfl_down(b: ir.IRBuilder, value: ir.Value, delta: int) -> ir.Value:
    """shfl.sync.down over the full warp, of a 32- or 64-bit scalar (64-bit as two halves)."""
    module = b.module
    fn = module.globals.get("llvm.nvvm.shfl.sync.down.i32") or ir.Function(
        module, ir.FunctionType(I32, [I32, I32, I32, I32]), name="llvm.nvvm.shfl.sync.down.i32")
    mask, clamp = ir.Constant(I32, 0xFFFFFFFF), ir.Constant(I32, WARP - 1)
    ty = value.type
    bits = ty.width if isinstance(ty, ir.IntType) else {"float": 32, "double": 64}.get(str(ty))
    if bits == 32:
        moved = b.call(fn, [mask, b.bitcast(value, I32) if ty != I32 else value, ir.Constant(I32, delta), clamp])
        return moved if ty == I32 else b.bitcast(moved, ty)
    if bits == 64:
        i64 = b.bitcast(value, I64) if ty != I64 else value
        low = b.call(fn, [mask, b.trunc(i64, I32), ir.Constant(I32, delta), clamp])
        high = b.call(fn, [mask, b.trunc(b.lshr(i64, const_i64(32)), I32), ir.Constant(I32, delta), clamp])
        joined = b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), const_i64(32)))
        return joined if ty == I64 else b.bitcast(joined, ty)
    raise CodegenError(f"no warp shuffle of {ty} values")
