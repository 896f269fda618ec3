"""SIMT kernels written once and realized twice: for the GPU, and for the host as loops.

A GPU body (codegen/nvptx/bodies.py) emits through a `Simt`, never through thread
indices or barriers of its own:

    with simt.blocks(count) as block:       # every block of the launch (uniform in a block)
        acc = simt.thread_var(F32, "acc")  # (allocated up front, before blocks(), in practice)
        with simt.threads() as tid:        # a phase: code each thread of the block runs
            ...                            # may branch on tid; must not sync
        simt.sync()                        # __syncthreads between phases
        simt.shuffle_down(acc, other, 16)  # a warp shuffle: a phase of its own
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

What the two realizations agree on only if a body follows the rules above:
phases that hand data to other threads through shared memory must have a
`sync()` between them (HostSimt runs them in order either way, so a missing sync
is a GPU race the emulation cannot show); a value crossing phases must be in a
thread variable (an SSA value of one phase is not defined in the next on the host).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from llvmlite import ir

from aot.codegen.cpu.loops import I64, const_i64, for_range
from aot.errors import CodegenError

I32 = ir.IntType(32)
WARP = 32
# the largest grid (in blocks) a launch asks for; a body with more blocks loops over them
MAX_GRID = 65535
SHARED_ADDRSPACE = 3


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

    # -- the interface ---------------------------------------------------------------
    @property
    def shared_bytes(self) -> int:
        """Static shared memory the body allocated, in bytes."""
        return self._shared

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

    @contextmanager
    def uniform_range(self, start: int | ir.Value, stop: int | ir.Value, name: str) -> Iterator[ir.Value]:
        """for (i = start; i < stop; ++i), where every thread of a block runs the same trips;
        phases and syncs may be inside (the loop is the same code in both realizations)."""
        with for_range(self.builder, start, stop, name) as i:
            yield i


class GpuSimt(Simt):
    """NVPTX: the body's phases run as straight-line code on each thread."""

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
        before = b.block
        header = b.append_basic_block("block.header")
        body = b.append_basic_block("block.body")
        done = b.append_basic_block("block.end")
        b.branch(header)
        b.position_at_end(header)
        block = b.phi(I64, name="block")
        block.add_incoming(first, before)
        b.cbranch(b.icmp_unsigned("<", block, const_i64(count), name="block.more"), body, done)
        b.position_at_end(body)
        yield block
        block.add_incoming(b.add(block, stride, name="block.next", flags=["nuw"]), b.block)
        b.branch(header)
        b.position_at_end(done)

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
