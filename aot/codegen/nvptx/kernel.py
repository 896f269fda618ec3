"""NVPTX kernels: the CPU path's elemental work items, one grid-stride loop per kernel.

    __global__ void aot_kernel_<i>(uint8_t* arena, const uint8_t* weights,
                                   const void* in<k>..., void* out<k>...);

Thread t of the grid runs work items t, t + gridsize, ... of the same items the
CPU kernel has (cpu/kernel.py: one innermost row of the root's output each), with
the same elemental body (cpu/kernel.py emit_work_item). Arena and weight values
are constant byte offsets from their base parameter; each model input or output
the kernel touches is a parameter of its own (`GpuKernel.args` names them), so a
launch needs no pointer table on the device.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from aot.codegen.cpu.elemental import ElementalEmitter, storage_type
from aot.codegen.cpu.kernel import emit_work_item, work_items
from aot.codegen.cpu.loops import I64, const_i64
from aot.codegen.cpu.math import MathLib
from aot.codegen.nvptx.target import NvptxTarget
from aot.errors import CodegenError
from aot.ir.graph import Value
from aot.plan import ExecutionPlan, Kernel

I8P = ir.IntType(8).as_pointer()
I32 = ir.IntType(32)
# ops whose kernels need a body other than the elemental row loop on a GPU (tiles, shared
# memory, sorting networks, atomics); the NVPTX path has none of those yet
NO_GPU_BODY = ("packed_dot", "packed_conv", "dot", "conv", "reduce_window", "sort", "argsort", "scatter")


@dataclass(frozen=True)
class GpuKernel:
    symbol: str
    work_items: int
    args: tuple[str, ...]  # "arena", "weights", "input<k>", "output<k>", in parameter order


def check_supported(kernel: Kernel) -> None:
    """Raise unless the NVPTX path has a body for `kernel` (never emit a wrong kernel)."""
    root = kernel.root.producer
    root_op = root.op if root is not None else "parameter"
    for op in NO_GPU_BODY:
        if op in kernel.ops:
            raise CodegenError(f"kernel {kernel.name} (root op {root_op}): no GPU body for {op} yet")


def _special_register(builder: ir.IRBuilder, name: str) -> ir.Value:
    """%tid.x and friends, as i64."""
    symbol = f"llvm.nvvm.read.ptx.sreg.{name}"
    fn = builder.module.globals.get(symbol) or ir.Function(builder.module, ir.FunctionType(I32, []), name=symbol)
    return builder.zext(builder.call(fn, [], name=name.replace(".", "_")), I64)


def _buffer_args(plan: ExecutionPlan, kernel: Kernel) -> list[str]:
    names = ["arena", "weights"]
    for value in [*kernel.params, kernel.root]:
        where = plan.slices.get(value.name)
        if where is None:
            raise CodegenError(f"kernel {kernel.name}: value %{value.name} has no buffer slice")
        if where.kind in ("input", "output"):
            name = f"{where.kind}{where.index}"
            if name not in names:
                names.append(name)
        elif where.kind not in ("arena", "weights"):
            raise CodegenError(f"value %{value.name} has a slice of unknown kind {where.kind!r}")
    return names


def emit_kernel(module: ir.Module, lib: MathLib, target: NvptxTarget, plan: ExecutionPlan, kernel: Kernel,
                symbol: str) -> GpuKernel:
    check_supported(kernel)
    args = _buffer_args(plan, kernel)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P] * len(args)), name=symbol)
    fn.calling_convention = "ptx_kernel"
    fn.attributes.add("nounwind")
    for arg, name in zip(fn.args, args):
        arg.name = name
    by_name = dict(zip(args, fn.args))
    entry = fn.append_basic_block("entry")
    body = fn.append_basic_block(kernel.name or "body")
    setup = ir.IRBuilder(entry)

    def typed_pointer(value: Value) -> ir.Value:
        where = plan.slices[value.name]
        if where.kind in ("arena", "weights"):
            base = setup.gep(by_name[where.kind], [const_i64(where.offset)], inbounds=True, name=f"{value.name}.base")
        else:
            base = by_name[f"{where.kind}{where.index}"]
        return setup.bitcast(base, storage_type(value.type.dtype, target).as_pointer(), name=f"{value.name}.ptr")

    params = {id(p): typed_pointer(p) for p in kernel.params}
    out_ptr = typed_pointer(kernel.root)
    builder = ir.IRBuilder(body)
    elemental = ElementalEmitter(builder, lib, target, params, {id(n) for n in kernel.nodes},
                                 lambda ty, name: setup.alloca(ty, name=name))
    items = work_items(kernel.root)
    first = builder.add(builder.mul(_special_register(builder, "ctaid.x"), _special_register(builder, "ntid.x")),
                        _special_register(builder, "tid.x"), name="first")
    if items == 1:
        # one item: no loop (as the CPU path, so LLVM's loop passes get no single-trip loop)
        with builder.if_then(builder.icmp_unsigned("==", first, const_i64(0))):
            emit_work_item(builder, elemental, kernel, out_ptr, const_i64(0))
    else:
        stride = builder.mul(_special_register(builder, "nctaid.x"), _special_register(builder, "ntid.x"), name="stride")
        _grid_stride(builder, first, stride, items, lambda item: emit_work_item(builder, elemental, kernel, out_ptr, item))
    builder.ret_void()
    setup.branch(body)
    return GpuKernel(symbol, items, tuple(args))


def _grid_stride(builder: ir.IRBuilder, first: ir.Value, stride: ir.Value, items: int,
                body: Callable[[ir.Value], None]) -> None:
    """for (item = first; item < items; item += stride) body(item)"""
    before = builder.block
    header = builder.append_basic_block("item.header")
    loop = builder.append_basic_block("item.body")
    done = builder.append_basic_block("item.end")
    builder.branch(header)
    builder.position_at_end(header)
    item = builder.phi(I64, name="item")
    item.add_incoming(first, before)
    builder.cbranch(builder.icmp_unsigned("<", item, const_i64(items), name="item.more"), loop, done)
    builder.position_at_end(loop)
    body(item)
    item.add_incoming(builder.add(item, stride, name="item.next", flags=["nuw"]), builder.block)
    builder.branch(header)
    builder.position_at_end(done)
