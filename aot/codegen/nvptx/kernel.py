"""One NVPTX kernel per plan kernel: its parameters, its launch, and the body that fills it.

    __global__ void aot_kernel_<i>(void* buffer0, void* buffer1, ...);

Each parameter is the address of one value the kernel reads or writes (its
params, then its root), in the order of `GpuKernel.args`; each GpuArg says where
that address points: the device arena at an offset, the weights at an offset, or
model input / output k. So the launch plan in the manifest is all the runtime
needs to launch it. Every address is at least 16-byte aligned (arena and weight
offsets are multiples of 64; the runtime allocates inputs and outputs).

The same kernel is emitted for the host too (realization "host", nvptx/simt.py):
the same parameters plus (int64 block_begin, int64 block_end), the blocks and
threads as loops. nvptx/emulate.py runs that to test the GPU kernels' logic.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir

from aot.codegen.arith_target import ArithTarget
from aot.codegen.elemental import ElementalEmitter, storage_type
from aot.codegen.loops import I64
from aot.codegen.math import MathLib
from aot.codegen.nvptx.bodies import GpuContext, gpu_body_of
from aot.codegen.nvptx.simt import MAX_GRID, GpuSimt, HostSimt, Simt
from aot.errors import CodegenError
from aot.ir.graph import Value
from aot.plan import ExecutionPlan, Kernel

I8P = ir.IntType(8).as_pointer()
# a block of at most this many threads fits an SM's 65536 registers at 255 a thread (ptxas's most)
FITS_ANY_REGISTERS = 256
BUFFER_ALIGNMENT = 16  # every buffer address a kernel gets is a multiple of this
REALIZATIONS: dict[str, type[Simt]] = {"gpu": GpuSimt, "host": HostSimt}


@dataclass(frozen=True)
class GpuArg:
    """Where one kernel parameter points: `kind` "arena" or "weights" at byte `offset`,
    or model "input" / "output" number `index`; `value` is the IR value it holds. The
    checks kernel (nvptx/checks.py) also takes "status": the runtime's int32 status word."""

    kind: str
    index: int
    offset: int
    value: str

    def to_json(self) -> dict[str, object]:
        if self.kind in ("arena", "weights"):
            return {"kind": self.kind, "offset": self.offset}
        if self.kind == "status":
            return {"kind": "status"}
        return {"kind": self.kind, "index": self.index}


@dataclass(frozen=True)
class GpuKernel:
    """One kernel's launch: `grid` blocks of `block` threads (x only) with `shared_bytes` of
    dynamic shared memory, over `args`. `blocks` is how many blocks of work there are (a grid
    smaller than that loops over them); `static_shared_bytes` is what the PTX declares."""

    symbol: str
    name: str
    body: str  # which GPU body emitted it (bodies.py)
    grid: int
    block: int
    blocks: int
    shared_bytes: int
    static_shared_bytes: int
    args: tuple[GpuArg, ...]
    min_blocks_per_sm: int | None = None  # __launch_bounds__'s second number, where the body set one

    def launch_json(self) -> dict[str, object]:
        return {"symbol": self.symbol, "grid": [self.grid, 1, 1], "block": [self.block, 1, 1],
                "shared_bytes": self.shared_bytes, "args": [a.to_json() for a in self.args]}


def kernel_args(plan: ExecutionPlan, kernel: Kernel) -> list[tuple[Value, GpuArg]]:
    """The kernel's parameters: each value it reads, then its root, once each."""
    found: list[tuple[Value, GpuArg]] = []
    seen: set[str] = set()
    for value in [*kernel.params, kernel.root]:
        if value.name in seen:
            continue
        seen.add(value.name)
        where = plan.slices.get(value.name)
        if where is None:
            raise CodegenError(f"kernel {kernel.name}: value %{value.name} has no buffer slice")
        if where.kind not in ("arena", "weights", "input", "output"):
            raise CodegenError(f"value %{value.name} has a slice of unknown kind {where.kind!r}")
        found.append((value, GpuArg(where.kind, where.index, where.offset, value.name)))
    return found


def emit_kernel(module: ir.Module, lib: MathLib, target: ArithTarget, plan: ExecutionPlan, kernel: Kernel,
                symbol: str, realization: str = "gpu", emitted: dict[str, str] | None = None,
                matmul_precision: str = "fp32") -> GpuKernel:
    """`kernel` as the function `symbol` in `module`; with `emitted` (code_key -> symbol, shared by
    one module's kernels), a kernel whose code was emitted before launches that function instead."""
    body = gpu_body_of(kernel, matmul_precision)
    args = kernel_args(plan, kernel)
    extra = [I64, I64] if realization == "host" else []
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P] * len(args) + extra), name=symbol)
    if realization == "gpu":
        fn.calling_convention = "ptx_kernel"
    fn.attributes.add("nounwind")
    for param, (value, _) in zip(fn.args, args):
        param.name = value.name
        # the launch contract (see the module docstring): LLVM then proves 16-byte alignment of
        # vector-aligned element groups and merges their loads into ld.global.v4
        param.attributes.align = BUFFER_ALIGNMENT
    if extra:
        fn.args[-2].name, fn.args[-1].name = "block_begin", "block_end"
    entry = fn.append_basic_block("entry")
    start = fn.append_basic_block(kernel.name or "body")
    setup = ir.IRBuilder(entry)
    typed = {id(value): setup.bitcast(param, storage_type(value.type.dtype, target).as_pointer(),
                                      name=f"{value.name}.ptr")
             for param, (value, _) in zip(fn.args, args)}
    builder = ir.IRBuilder(start)
    simt = REALIZATIONS[realization](fn, setup, builder, body.block_dim(kernel))
    elemental = ElementalEmitter(builder, lib, target, {id(p): typed[id(p)] for p in kernel.params},
                                 {id(n) for n in kernel.nodes}, lambda ty, name: setup.alloca(ty, name=name))
    body.emit(GpuContext(simt, kernel, elemental, typed[id(kernel.root)], target))
    builder.ret_void()
    setup.branch(start)
    if simt.block_count is None:
        raise CodegenError(f"kernel {kernel.name}: the {body.name} body launched no blocks")
    if emitted is not None:
        # a kernel whose code is another's (a repeated layer: same shapes, ops and constants;
        # only its buffers differ, and those are launch arguments) launches that one
        key = code_key(fn)
        if key in emitted:
            _remove(module, fn)
            symbol = emitted[key]
        else:
            emitted[key] = symbol
    if symbol == fn.name and isinstance(simt, GpuSimt) and simt.min_blocks_per_sm is not None:
        simt.annotate_launch_bounds()
    return GpuKernel(symbol, kernel.name, body.name, min(simt.block_count, MAX_GRID), simt.block_dim,
                     simt.block_count, 0, simt.shared_bytes, tuple(a for _, a in args), simt.min_blocks_per_sm)


def with_launch_bounds(ptx: str, kernels: list[GpuKernel]) -> str:
    """`ptx` with .maxnreg after the parameter list of each entry whose block is over
    FITS_ANY_REGISTERS threads and whose bounds LLVM did not write (the GEMM bodies' are in
    the LLVM module: GpuSimt.annotate_launch_bounds).

    A block must fit an SM's 65536 registers, or every launch fails (too many resources
    requested): 512 threads may use 128 registers each. Blocks of up to 256 threads fit at
    any count (255 a thread at most) and get nothing. .maxnreg caps the count and no more;
    .maxntid, tried first, also made ptxas trade registers for occupancy with small spills
    (a sort kernel: 40 registers and a 4-byte spill under a cap of 128), and the same bound
    given to LLVM (nvvm.annotations) rewrote ResNet-18's implicit-GEMM conv from 72
    registers and no spills to 255 and 1.4 KB of spills.
    """
    done: set[str] = set()
    for kernel in kernels:
        if kernel.symbol in done or kernel.block <= FITS_ANY_REGISTERS:
            continue
        done.add(kernel.symbol)
        start = ptx.find(f".entry {kernel.symbol}(")
        end = ptx.find("\n)\n", start)
        if start < 0 or end < 0:
            raise CodegenError(f"kernel {kernel.symbol}: its .entry is not in the PTX LLVM emitted")
        if not ptx.startswith(".maxntid", end + 3):
            ptx = ptx[:end + 3] + f".maxnreg {register_cap(kernel.block)}\n" + ptx[end + 3:]
    return ptx


def register_cap(block: int) -> int:
    """Registers a thread may use so that a block of `block` threads fits an SM (65536 registers,
    allocated to a thread in multiples of 8)."""
    return min(255, 65536 // block // 8 * 8)


# a local name (%x, %"x.y", %3) or a basic block's label where it is defined ("x.y": at a line's start)
_LOCAL = re.compile(r'%("(?:[^"\\]|\\.)*"|[-a-zA-Z$._0-9]+)|^("(?:[^"\\]|\\.)*"|[-a-zA-Z$._0-9]+):', re.MULTILINE)


_GLOBAL = re.compile(r'@"((?:[^"\\]|\\.)*)"')


def code_key(fn: ir.Function) -> str:
    """`fn`'s LLVM IR with its own globals (itself, its shared arrays) and every local name
    numbered by first appearance: equal keys are the same code (the names come from the
    graph's values and from module-wide counters, and mean nothing)."""
    own = {name for name in fn.module.globals if name == fn.name or name.startswith(f"{fn.name}.")}
    numbers: dict[str, str] = {}

    def number_global(match: re.Match[str]) -> str:
        name = match.group(1)
        return f'@"{numbers.setdefault("@" + name, f"own{len(numbers)}")}"' if name in own else match.group(0)

    def number_local(match: re.Match[str]) -> str:
        name = match.group(1) if match.group(1) is not None else match.group(2)
        local = numbers.setdefault(name, f"v{len(numbers)}")
        return f"%{local}" if match.group(1) is not None else f"{local}:"

    return _LOCAL.sub(number_local, _GLOBAL.sub(number_global, str(fn)))


def _remove(module: ir.Module, fn: ir.Function) -> None:
    """Take `fn` and the shared arrays named after it (Simt.shared) out of `module`."""
    for name in [n for n in module.globals if n == fn.name or n.startswith(f"{fn.name}.")]:
        del module.globals[name]
