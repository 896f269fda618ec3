"""Scheduling: a kernel order that lowers peak live memory.

Greedy list scheduling (as XLA's list scheduler): among the kernels whose
inputs are all computed, run next the one that frees the most arena bytes
net of what it allocates (its operands it reads last, minus its own result);
ties keep the original order. The order stays topological by construction.
The greedy order is kept only when its peak live bytes beat the original
order's, so scheduling never makes memory worse.

A kernel that reads a reshape the buffer pass made an alias (planning/buffers.py: the
reshape's kernel is dropped and its result names its operand's bytes) depends on the
kernel writing those bytes: `aliases` (alias -> the value it names) resolves such
reads to the value written. (Without it, a conv reading an unsqueezed concat was free
to run before the concat: fuzz seed 35945.)

`after` adds orderings that are not data dependencies: (a, b) runs the kernel
writing %a before the one writing %b. Buffer donation needs them (planning/
donation.py): every reader of a donated input runs before the kernel that
overwrites its bytes. Where the original order breaks one, the baseline is the
original order with the fewest moves that honour them (a stable topological sort).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from aot.arith import align_up
from aot.ir.graph import Value
from aot.plan import Kernel
from aot.planning.memory_plan import ALIGNMENT

# (a, b): the kernel whose root is %a runs before the one whose root is %b
Ordering = tuple[str, str]
# an alias's name -> the value whose bytes it names
Aliases = Mapping[str, Value]
NO_ALIASES: Aliases = MappingProxyType({})


def _resolve(name: str, aliases: Aliases) -> str:
    seen = 0
    while name in aliases and seen <= len(aliases):  # an alias of an alias: to the end of the chain
        name = aliases[name].name
        seen += 1
    return name


def _reads(kernel: Kernel, aliases: Aliases) -> dict[str, int]:
    """The values `kernel` reads, aliases resolved, each once: name -> bytes."""
    return {_resolve(p.name, aliases): p.type.nbytes for p in kernel.params}


def _producers(kernels: list[Kernel], after: Sequence[Ordering] = (), aliases: Aliases = NO_ALIASES) -> list[list[int]]:
    """For each kernel, the positions of the kernels it must follow: those whose roots it
    reads (directly or through an alias), and those `after` puts before it."""
    position = {k.root.name: i for i, k in enumerate(kernels)}
    deps = [{position[name] for name in _reads(k, aliases) if name in position} for k in kernels]
    for first, then in after:
        deps[position[then]].add(position[first])
    return [sorted(d) for d in deps]


def peak_live_bytes(kernels: list[Kernel], temporaries: set[str], aliases: Aliases = NO_ALIASES) -> int:
    """Max over steps of the aligned bytes of temporaries written but still to be read."""
    last_read: dict[str, int] = {}
    for step, kernel in enumerate(kernels):
        for name in _reads(kernel, aliases):
            last_read[name] = step
    live = peak = 0
    ends: dict[int, int] = {}
    for step, kernel in enumerate(kernels):
        name = kernel.root.name
        if name in temporaries:
            size = align_up(kernel.root.type.nbytes, ALIGNMENT)
            live += size
            end = last_read.get(name, step)
            ends[end] = ends.get(end, 0) + size
        peak = max(peak, live)
        live -= ends.pop(step, 0)
    return peak


def list_schedule(kernels: list[Kernel], temporaries: set[str], after: Sequence[Ordering] = (),
                  aliases: Aliases = NO_ALIASES) -> list[Kernel]:
    """Greedy memory-aware topological order of `kernels` (honouring `after`)."""
    producers = _producers(kernels, after, aliases)
    consumers: list[list[int]] = [[] for _ in kernels]
    for i, deps in enumerate(producers):
        for d in deps:
            consumers[d].append(i)
    reads = [_reads(k, aliases) for k in kernels]
    readers_left = {k.root.name: 0 for k in kernels}
    for kernel_reads in reads:
        for name in kernel_reads:
            if name in readers_left:
                readers_left[name] += 1
    waiting = [len(deps) for deps in producers]
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []

    def gain(i: int) -> int:
        kernel = kernels[i]
        freed = sum(align_up(size, ALIGNMENT) for name, size in reads[i].items()
                    if name in temporaries and readers_left.get(name) == 1)
        allocated = align_up(kernel.root.type.nbytes, ALIGNMENT) if kernel.root.name in temporaries else 0
        return freed - allocated

    while ready:
        best = max(ready, key=lambda i: (gain(i), -i))
        ready.remove(best)
        order.append(best)
        for name in reads[best]:
            if name in readers_left:
                readers_left[name] -= 1
        for c in consumers[best]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return [kernels[i] for i in order]


def stable_order(kernels: list[Kernel], after: Sequence[Ordering], aliases: Aliases = NO_ALIASES) -> list[Kernel]:
    """`kernels` itself when it honours `after`, else the topological order that takes,
    at each step, the earliest kernel in the original order that may run."""
    producers = _producers(kernels, after, aliases)
    if all(d < i for i, deps in enumerate(producers) for d in deps):
        return kernels
    waiting = [len(deps) for deps in producers]
    consumers: list[list[int]] = [[] for _ in kernels]
    for i, deps in enumerate(producers):
        for d in deps:
            consumers[d].append(i)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []
    while ready:
        first = min(ready)
        ready.remove(first)
        order.append(first)
        for c in consumers[first]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if len(order) != len(kernels):
        raise ValueError("kernel orderings form a cycle")  # the caller (donation planning) rules cycles out
    return [kernels[i] for i in order]


def schedule(kernels: list[Kernel], temporaries: set[str], after: Sequence[Ordering] = (),
             aliases: Aliases = NO_ALIASES) -> list[Kernel]:
    """The better of the original order and the greedy one (by peak live bytes), each honouring
    `after` and reading through `aliases`; names follow the new order."""
    base = stable_order(kernels, after, aliases)
    greedy = list_schedule(kernels, temporaries, after, aliases)
    if peak_live_bytes(greedy, temporaries, aliases) >= peak_live_bytes(base, temporaries, aliases):
        greedy = base
    if greedy is kernels:
        return kernels
    return renumbered(greedy)


def renumbered(kernels: list[Kernel]) -> list[Kernel]:
    """The kernels renamed after their positions (k0_exp, k1_dot, ...)."""
    return [_renamed(k, i) for i, k in enumerate(kernels)]


def _renamed(kernel: Kernel, position: int) -> Kernel:
    op = kernel.root.producer.op if kernel.root.producer is not None else "copy"
    return Kernel(f"k{position}_{op}", kernel.root, kernel.nodes, kernel.params, kernel.reason, kernel.fused_reasons)
