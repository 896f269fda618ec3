"""The kernel body emitters, in the one order a kernel tries them.

A kernel gets the first body of BODIES that may take its root op and whose
emitter accepts the kernel (`BodyEmitter.applies`); with none, it gets the
elemental row loop (kernel.py). A body that runs a fused epilogue also takes
kernels whose root is the last elementwise op of that epilogue.

Where two bodies accept one kernel, the earlier wins:
- pointwise conv before depthwise conv: a 1x1 conv over at most MAX_TAPS
  input channels is narrow too, and the pointwise tile reuses each input
  vector for several output channels where the depthwise body reloads it.
The other bodies take disjoint ops (packed_dot, packed_conv, conv,
reduce_window, dot, scatter, sort).

A body marked `own_vectors` is vector code throughout, and LLVM's loop vectorizer is
left out of its pipeline (llvm_pipeline.OWN_VECTORS): on the packed conv bodies it found
nothing to vectorize (resnet18's kernels as fast without it, AVX-512 and AVX2) and took
60% of their optimization time. The pointwise and depthwise bodies are vector code
throughout too, now that their tails and epilogues are (vector_epilogue.store_run, masked
loads): mobilenetv2 ran 0.999x the time without the loop vectorizer on either x86 variant
(A/B, 40 rounds), its CPU for optimization and codegen down from 4.4 to 3.9 s. (Before
those, their loops over a small map's pixels ran up to 2x slower without it.) Leaving out
the loop unroller as well saved 0.6 s more but ran 2-3.5% slower.
"""
from __future__ import annotations

from dataclasses import dataclass

from aot.codegen.cpu.body import BodyEmitter
from aot.codegen.cpu.conv1x1 import POINTWISE_EMITTER
from aot.codegen.cpu.depthwise import DEPTHWISE_EMITTER
from aot.codegen.cpu.dot_dynamic import DYNAMIC_DOT_EMITTER
from aot.codegen.cpu.packed_conv import CONV_EMITTER
from aot.codegen.cpu.packed_dot import DOT_EMITTER
from aot.codegen.cpu.pool import POOL_EMITTER
from aot.codegen.cpu.scatter import SCATTER_EMITTER
from aot.codegen.cpu.sort import SORT_EMITTER
from aot.codegen.cpu.target import CpuTarget
from aot.ir.ops import ELEMENTWISE
from aot.plan import Kernel


@dataclass(frozen=True)
class Body:
    """A body for kernels whose root is one of `ops` or, with `epilogue`, an elementwise
    op of the fused epilogue after one of them."""

    name: str
    ops: frozenset[str]
    emitter: BodyEmitter
    epilogue: bool = True
    own_vectors: bool = False

    def may_take(self, root_op: str) -> bool:
        return root_op in self.ops or (self.epilogue and root_op in ELEMENTWISE)


BODIES: tuple[Body, ...] = (
    Body("scatter", frozenset({"scatter"}), SCATTER_EMITTER, epilogue=False),
    Body("sort", frozenset({"sort", "argsort"}), SORT_EMITTER, epilogue=False),
    Body("packed dot", frozenset({"packed_dot"}), DOT_EMITTER),
    Body("packed conv", frozenset({"packed_conv"}), CONV_EMITTER, own_vectors=True),
    Body("pointwise conv", frozenset({"conv"}), POINTWISE_EMITTER, own_vectors=True),
    Body("depthwise conv", frozenset({"conv"}), DEPTHWISE_EMITTER, own_vectors=True),
    Body("pooling", frozenset({"reduce_window"}), POOL_EMITTER),
    Body("run-time dot", frozenset({"dot"}), DYNAMIC_DOT_EMITTER),
)


def body_of(kernel: Kernel, target: CpuTarget) -> Body | None:
    """The row of BODIES that emits `kernel`'s body for `target`; None: the elemental row loop."""
    producer = kernel.root.producer
    root_op = producer.op if producer is not None else ""
    return next((b for b in BODIES if b.may_take(root_op) and b.emitter.applies(kernel, target)), None)


def body_emitter(kernel: Kernel, target: CpuTarget) -> BodyEmitter | None:
    body = body_of(kernel, target)
    return None if body is None else body.emitter
