"""What a kernel body emitter is: the interface between a kernel and a body that is not
the elemental row loop (scatter, sort, and the fast dot/conv/pool microkernels).

The emitters themselves, and the order in which a kernel tries them, are in bodies.py.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from aot.codegen.elemental import ElementalEmitter
from aot.codegen.cpu.target import CpuTarget
from aot.errors import CodegenError
from aot.plan import Kernel


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
