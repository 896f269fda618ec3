"""What a kernel body emitter is: the interface between a kernel and a body that is not
the elemental row loop (scatter, sort, and the fast dot/conv/pool microkernels).

The emitters themselves, and the order in which a kernel tries them, are in bodies.py.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from aot.codegen.cpu.canonical import number_locals
from aot.codegen.elemental import ElementalEmitter
from aot.codegen.math import F32, MathLib
from aot.codegen.cpu.target import CpuTarget
from aot.errors import CodegenError
from aot.ir.graph import Value
from aot.ir.types import DType
from aot.plan import Kernel

# a helper's name in its body's module until build.py names it after the hash of its text
HELPER = "aot_helper"


@dataclass
class KernelContext:
    """What a kernel body emitter gets: the function, a builder in its body block,
    typed pointers to every param and to the root's output, the elemental emitter,
    and the byte size of all the model's weights (whether they can stay cached)."""

    fn: ir.Function
    builder: ir.IRBuilder
    kernel: Kernel
    params: dict[int, ir.Value]  # id(param value) -> typed pointer
    out_ptr: ir.Value
    elemental: ElementalEmitter
    target: CpuTarget
    model_weight_bytes: int
    # modules of the functions the body calls (new_helper), each printed and compiled on its own;
    # None where the kernel is one function in a module of the whole plan (kernel.emit_kernel)
    helpers: list[ir.Module] | None = None

    @property
    def begin(self) -> ir.Value:
        return self.fn.args[-2]  # a kernel's, or its body's (kernel.py: body_type), last two arguments

    @property
    def end(self) -> ir.Value:
        return self.fn.args[-1]


@dataclass(frozen=True)
class BodyEmitter:
    """A kernel body other than the elemental row loop.

    For ops that are not elemental (scatter, sort) and for fast paths (packed
    dot/conv microkernels). `applies` may decline a kernel, which then gets
    the elemental loop; `work_items` says how many independent items it splits into.
    """

    applies: Callable[[Kernel, CpuTarget], bool]
    work_items: Callable[[Kernel, CpuTarget], int]
    emit: Callable[[KernelContext], None]


def any_target(items: Callable[[Kernel], int]) -> Callable[[Kernel, CpuTarget], int]:
    """BodyEmitter.work_items for a body whose item count does not depend on the target."""
    return lambda kernel, target: items(kernel)


def matched_body(match: Callable[[Kernel, CpuTarget], Any], items: Callable[[Any], int],
                 emit: Callable[[KernelContext, Any], None]) -> BodyEmitter:
    """A BodyEmitter from one matcher: it applies where `match(kernel, target)` is
    not None, and the match is handed to `items` and `emit`."""

    def applies(kernel: Kernel, target: CpuTarget) -> bool:
        return match(kernel, target) is not None

    def matched(kernel: Kernel, target: CpuTarget) -> Any:
        found = match(kernel, target)
        if found is None:
            raise CodegenError(f"kernel {kernel.name}: body emitter used where it does not apply")
        return found

    return BodyEmitter(applies, lambda kernel, target: items(matched(kernel, target)),
                       lambda ctx: emit(ctx, matched(ctx.kernel, ctx.target)))


def new_helper(ctx: KernelContext, operands: Sequence[Value],
               extra: Sequence[ir.Type]) -> tuple[ir.Function, KernelContext, Callable[[], None]]:
    """A function the body calls, defined in a module of its own: `void helper(i8* operand...,
    extra...)`. Returns its declaration in the body's module, a context emitting its definition
    (a float pointer for each f32 operand, its own elemental emitter and allocas) and `finish`,
    which ends the definition. build.py names a helper after the hash of its text and compiles
    each distinct one once, so bodies that differ elsewhere (their epilogues, say) share the
    code of a helper that does the same work: LLVM's time goes with the code it is given."""
    i8p = ir.IntType(8).as_pointer()
    fn_type = ir.FunctionType(ir.VoidType(), [i8p] * len(operands) + list(extra))
    if ctx.helpers is None:
        raise CodegenError(f"kernel {ctx.kernel.name}: a helper function where the kernel's code is one function")
    name = f"{HELPER}{len(ctx.helpers)}"
    module = ir.Module(name=name)
    module.triple = ctx.fn.module.triple
    definition = ir.Function(module, fn_type, name=name)
    definition.attributes.add("nounwind")
    number_locals(definition)
    declaration = ir.Function(ctx.fn.module, fn_type, name=name)
    declaration.attributes.add("nounwind")
    ctx.helpers.append(module)
    entry = definition.append_basic_block("entry")
    body = definition.append_basic_block("body")
    setup = ir.IRBuilder(entry)
    params: dict[int, ir.Value] = {}
    for value, arg in zip(operands, definition.args):
        if value.type.dtype is not DType.F32:
            raise CodegenError(f"kernel {ctx.kernel.name}: a helper takes f32 operands, not {value.type.dtype}")
        params[id(value)] = setup.bitcast(arg, F32.as_pointer())
    builder = ir.IRBuilder(body)
    elemental = ElementalEmitter(builder, MathLib(module, ctx.target), ctx.target, params, set(),
                                 lambda ty, name: setup.alloca(ty, name=name))
    helper = KernelContext(definition, builder, ctx.kernel, params, ir.Constant(F32.as_pointer(), None), elemental,
                           ctx.target, ctx.model_weight_bytes)

    def finish() -> None:
        builder.ret_void()
        setup.branch(body)
    return declaration, helper, finish
