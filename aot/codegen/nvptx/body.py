"""What a GPU kernel body is: the interface between a plan kernel and the code that computes it.

The bodies themselves, and the order in which a kernel tries them, are in bodies.py.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from aot.codegen.arith_target import ArithTarget
from aot.codegen.elemental import ElementalEmitter
from aot.codegen.nvptx.simt import Simt
from aot.plan import Kernel


@dataclass
class GpuContext:
    """What a body gets: the Simt it emits through (its builder is the elemental emitter's),
    the kernel, the elemental emitter (params already bound to their pointers) and a typed
    pointer to the root's output."""

    simt: Simt
    kernel: Kernel
    elemental: ElementalEmitter
    out_ptr: ir.Value
    target: ArithTarget

    @property
    def builder(self) -> ir.IRBuilder:
        return self.simt.builder


@dataclass(frozen=True)
class GpuBody:
    """`applies`: whether it takes the kernel; `block_dim`: its threads per block; `emit`: the
    body, which calls ctx.simt.blocks(count) once (the launch's grid comes from it);
    `precision`: the --gpu-matmul-precision it needs to be tried at all (None: any), for a
    body whose results differ from the graph's f32 arithmetic (mma.py's tf32 one)."""

    name: str
    applies: Callable[[Kernel], bool]
    block_dim: Callable[[Kernel], int]
    emit: Callable[[GpuContext], None]
    precision: str | None = None
