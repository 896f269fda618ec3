"""Kernel functions and the model entry.

    void aot_kernel_<i>(const void* const* inputs, void* const* outputs, uint8_t* arena,
                        const uint8_t* weights, int64_t begin, int64_t end);
    void aot_model_entry(const void* const* inputs, void* const* outputs, uint8_t* arena,
                         const uint8_t* weights);
    int32_t aot_model_checks(const void* const* inputs, void* const* outputs, uint8_t* arena,
                             const uint8_t* weights);   /* only when the plan has checks */

Codegen builds each kernel as a body, `void aot_body_<hash>(i8* operand..., int64_t begin,
int64_t end)` over its operands' base pointers (body_type), and the kernel itself as a thin
call of it that computes those pointers (emit_kernel_call): kernels that differ only in
where their buffers are share one body, and a body's cached object stays valid when the
buffers move. emit_kernel builds the whole kernel as one function instead (build_module).

A kernel loops over its root's output: work item w is one innermost row
(w = the flat index over all dims but the last); items [begin, end) are
independent, so a thread pool may split them. The entry runs every kernel
over all of its items, in plan order.

The checks function evaluates the plan's run-time checks (ir/ops/checks.py) in
order and returns 1 + the index of the first that fails, 0 when all pass.
The runtime calls it on one thread after the last kernel, whether the entry
or its thread pool ran the kernels, so the answer does not depend on how the
work was split. It is a function of its own so that the entry keeps one
signature (void) and a model without checks compiles exactly as before.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from llvmlite import ir

from aot.codegen.constants import constant
from aot.codegen.cpu.bodies import body_emitter
from aot.codegen.cpu.body import KernelContext
from aot.codegen.cpu.canonical import number_locals
from aot.codegen.elemental import ElementalEmitter, storage_type
from aot.codegen.loops import I64, const_i64, for_range
from aot.codegen.work_item import emit_work_item, work_items
from aot.codegen.math import MathLib
from aot.codegen.cpu.target import CpuTarget
from aot.errors import CodegenError
from aot.ir.graph import Value
from aot.plan import ExecutionPlan, Kernel, Slice

I8 = ir.IntType(8)
I8P = I8.as_pointer()
I8PP = I8P.as_pointer()
KERNEL_TYPE = ir.FunctionType(ir.VoidType(), [I8PP, I8PP, I8P, I8P, I64, I64])
ENTRY_TYPE = ir.FunctionType(ir.VoidType(), [I8PP, I8PP, I8P, I8P])
I32 = ir.IntType(32)
CHECKS_TYPE = ir.FunctionType(I32, [I8PP, I8PP, I8P, I8P])
CHECKS_SYMBOL = "aot_model_checks"
ARG_NAMES = ("inputs", "outputs", "arena", "weights", "begin", "end")


def kernel_work_items(kernel: Kernel, target: CpuTarget) -> int:
    custom = body_emitter(kernel, target)
    return custom.work_items(kernel, target) if custom else work_items(kernel.root)


def _base_pointer(builder: ir.IRBuilder, fn: ir.Function, where: Slice, value: Value) -> ir.Value:
    inputs, outputs, arena, weights = fn.args[:4]
    if where.kind in ("input", "output"):
        table = inputs if where.kind == "input" else outputs
        slot = builder.gep(table, [const_i64(where.index)], inbounds=True, name=f"{value.name}.slot")
        base = builder.load(slot, name=f"{value.name}.base", align=8)
    elif where.kind in ("arena", "weights"):
        buffer = arena if where.kind == "arena" else weights
        base = builder.gep(buffer, [const_i64(where.offset)], inbounds=True, name=f"{value.name}.base")
    else:
        raise CodegenError(f"value %{value.name} has a slice of unknown kind {where.kind!r}")
    return base


def kernel_operands(kernel: Kernel) -> list[Value]:
    """What a kernel reads and writes, in the order its body function takes their pointers:
    its params, then its root's output."""
    return [*kernel.params, kernel.root]


def body_type(kernel: Kernel) -> ir.FunctionType:
    """`void body(i8* operand..., i64 begin, i64 end)`: a kernel's work over base pointers, free
    of where the buffers are, so kernels that differ only in their buffers share one body."""
    return ir.FunctionType(ir.VoidType(), [I8P] * len(kernel_operands(kernel)) + [I64, I64])


def _slice_of(plan: ExecutionPlan, kernel: Kernel, value: Value) -> Slice:
    if value.name not in plan.slices:
        raise CodegenError(f"kernel {kernel.name}: value %{value.name} has no buffer slice")
    return plan.slices[value.name]


def emit_kernel(module: ir.Module, lib: MathLib, target: CpuTarget, plan: ExecutionPlan, kernel: Kernel, symbol: str) -> ir.Function:
    """The kernel as one function of KERNEL_TYPE, its buffers' addresses computed in place."""
    fn = ir.Function(module, KERNEL_TYPE, name=symbol)
    fn.attributes.add("nounwind")
    for arg, name in zip(fn.args, ARG_NAMES):
        arg.name = name

    def base(setup: ir.IRBuilder, value: Value) -> ir.Value:
        return _base_pointer(setup, fn, _slice_of(plan, kernel, value), value)
    _emit_work(fn, lib, target, plan, kernel, base, helpers=None)
    return fn


def emit_kernel_body(module: ir.Module, lib: MathLib, target: CpuTarget, plan: ExecutionPlan, kernel: Kernel,
                     symbol: str, helpers: list[ir.Module] | None = None) -> ir.Function:
    """The kernel's work as a function of `body_type(kernel)`; emit_kernel_call makes the kernel.
    Its locals are named vN as they are made, not after the graph (canonical.py). The modules
    of the helper functions it calls (body.new_helper) are appended to `helpers`."""
    fn = ir.Function(module, body_type(kernel), name=symbol)
    fn.attributes.add("nounwind")
    number_locals(fn)
    operands = kernel_operands(kernel)
    index = {id(value): i for i, value in enumerate(operands)}
    _emit_work(fn, lib, target, plan, kernel, lambda setup, value: fn.args[index[id(value)]], helpers)
    return fn


def emit_kernel_call(module: ir.Module, plan: ExecutionPlan, kernel: Kernel, symbol: str, body: ir.Function) -> ir.Function:
    """Kernel `symbol` of KERNEL_TYPE: its buffers' addresses, then a tail call of `body`."""
    fn = ir.Function(module, KERNEL_TYPE, name=symbol)
    fn.attributes.add("nounwind")
    for arg, name in zip(fn.args, ARG_NAMES):
        arg.name = name
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    bases = [_base_pointer(builder, fn, _slice_of(plan, kernel, value), value) for value in kernel_operands(kernel)]
    builder.call(body, [*bases, fn.args[4], fn.args[5]], tail=True)
    builder.ret_void()
    return fn


def _emit_work(fn: ir.Function, lib: MathLib, target: CpuTarget, plan: ExecutionPlan, kernel: Kernel,
               base: Callable[[ir.IRBuilder, Value], ir.Value], helpers: list[ir.Module] | None) -> None:
    """Fill `fn` (its last two arguments: begin, end) with the kernel's work; `base` gives an
    operand's untyped base pointer, emitted in the setup block. The modules of the helper
    functions the work calls (body.new_helper) are appended to `helpers`; where it is None,
    the work is all in `fn`."""
    entry = fn.append_basic_block("entry")
    body = fn.append_basic_block(kernel.name or "body")
    setup = ir.IRBuilder(entry)

    def typed_pointer(value: Value) -> ir.Value:
        return setup.bitcast(base(setup, value), storage_type(value.type.dtype, target).as_pointer(),
                             name=f"{value.name}.ptr")

    def alloca(ty: ir.Type, name: str) -> ir.Value:
        return setup.alloca(ty, name=name)

    params = {id(p): typed_pointer(p) for p in kernel.params}
    out_ptr = typed_pointer(kernel.root)
    fused = {id(n) for n in kernel.nodes}
    builder = ir.IRBuilder(body)
    elemental = ElementalEmitter(builder, lib, target, params, fused, alloca)
    custom = body_emitter(kernel, target)
    if custom is not None:
        custom.emit(KernelContext(fn, builder, kernel, params, out_ptr, elemental, target, len(plan.weights), helpers))
        builder.ret_void()
        setup.branch(body)
        return

    with _item_loop(builder, fn.args[-2], fn.args[-1], work_items(kernel.root)) as item:
        emit_work_item(builder, elemental, kernel, out_ptr, item)
    builder.ret_void()
    setup.branch(body)


@contextmanager
def _item_loop(builder: ir.IRBuilder, begin: ir.Value, end: ir.Value, items: int) -> Iterator[ir.Value]:
    """for item in [begin, end); a kernel of one work item runs its body once, if begin < end.

    Why not a loop of one trip: LLVM 22's O3 pipeline never returns on some such kernels
    (a row of 2-4 elements with fused reductions, e.g. LogSoftmax(Cos(x)) on [1, 2]: the
    loop vectorizer and unroller, working on the outer loop once the inner ones are
    unrolled, do not converge). Found by the graph fuzzer (tests/data/fuzz/known_hangs).
    """
    if items != 1:
        with for_range(builder, begin, end, "item") as item:
            yield item
        return
    with builder.if_then(builder.icmp_signed("<", begin, end, name="item.any")):
        yield const_i64(0)


def emit_entry(module: ir.Module, kernels: list[tuple[ir.Function, int]]) -> ir.Function:
    fn = ir.Function(module, ENTRY_TYPE, name="aot_model_entry")
    fn.attributes.add("nounwind")
    for arg, name in zip(fn.args, ARG_NAMES):
        arg.name = name
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    for kernel_fn, items in kernels:
        builder.call(kernel_fn, [*fn.args, const_i64(0), const_i64(items)])
    builder.ret_void()
    return fn


def emit_checks(module: ir.Module, plan: ExecutionPlan) -> ir.Function:
    """`aot_model_checks`: 1 + the index of the first of `plan.checks` whose boolean is false, else 0."""
    fn = ir.Function(module, CHECKS_TYPE, name=CHECKS_SYMBOL)
    fn.attributes.add("nounwind")
    for arg, name in zip(fn.args, ARG_NAMES):
        arg.name = name
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    for index, check in enumerate(plan.checks):
        where = plan.slices.get(check.ok.name)
        if where is None:
            raise CodegenError(f"check {index} ({check.loc or 'no source node'}): "
                               f"value %{check.ok.name} has no buffer slice")
        byte = builder.load(_base_pointer(builder, fn, where, check.ok), name=f"check{index}.byte")
        failed = builder.icmp_unsigned("==", byte, constant(I8, 0), name=f"check{index}.failed")
        with builder.if_then(failed, likely=False):
            builder.ret(constant(I32, index + 1))
    builder.ret(constant(I32, 0))
    return fn
