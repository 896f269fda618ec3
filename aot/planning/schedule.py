"""Scheduling: a kernel order that lowers peak live memory.

Greedy list scheduling (as XLA's list scheduler): among the kernels whose
inputs are all computed, run next the one that frees the most arena bytes
net of what it allocates (its operands it reads last, minus its own result);
ties keep the original order. The order stays topological by construction.
The greedy order is kept only when its peak live bytes beat the original
order's, so scheduling never makes memory worse.
"""
from __future__ import annotations

from aot.arith import align_up
from aot.plan import Kernel
from aot.planning.memory_plan import ALIGNMENT


def _producers(kernels: list[Kernel]) -> list[list[int]]:
    """For each kernel, the positions of the kernels whose roots it reads."""
    position = {k.root.name: i for i, k in enumerate(kernels)}
    return [sorted({position[p.name] for p in k.params if p.name in position}) for k in kernels]


def peak_live_bytes(kernels: list[Kernel], temporaries: set[str]) -> int:
    """Max over steps of the aligned bytes of temporaries written but still to be read."""
    last_read: dict[str, int] = {}
    for step, kernel in enumerate(kernels):
        for p in kernel.params:
            last_read[p.name] = step
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


def list_schedule(kernels: list[Kernel], temporaries: set[str]) -> list[Kernel]:
    """Greedy memory-aware topological order of `kernels`."""
    producers = _producers(kernels)
    consumers: list[list[int]] = [[] for _ in kernels]
    for i, deps in enumerate(producers):
        for d in deps:
            consumers[d].append(i)
    readers_left = {k.root.name: 0 for k in kernels}
    for k in kernels:
        for p in {p.name for p in k.params}:
            if p in readers_left:
                readers_left[p] += 1
    waiting = [len(deps) for deps in producers]
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []

    def gain(i: int) -> int:
        kernel = kernels[i]
        freed = sum(align_up(p.type.nbytes, ALIGNMENT) for p in _distinct(kernel.params)
                    if p.name in temporaries and readers_left.get(p.name) == 1)
        allocated = align_up(kernel.root.type.nbytes, ALIGNMENT) if kernel.root.name in temporaries else 0
        return freed - allocated

    while ready:
        best = max(ready, key=lambda i: (gain(i), -i))
        ready.remove(best)
        order.append(best)
        for p in _distinct(kernels[best].params):
            if p.name in readers_left:
                readers_left[p.name] -= 1
        for c in consumers[best]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return [kernels[i] for i in order]


def _distinct(values: list) -> list:
    seen: set[str] = set()
    result = []
    for v in values:
        if v.name not in seen:
            seen.add(v.name)
            result.append(v)
    return result


def schedule(kernels: list[Kernel], temporaries: set[str]) -> list[Kernel]:
    """The better of the original order and the greedy one (by peak live bytes); names follow the new order."""
    greedy = list_schedule(kernels, temporaries)
    if peak_live_bytes(greedy, temporaries) >= peak_live_bytes(kernels, temporaries):
        return kernels
    return [_renamed(k, i) for i, k in enumerate(greedy)]


def _renamed(kernel: Kernel, position: int) -> Kernel:
    op = kernel.root.producer.op if kernel.root.producer is not None else "copy"
    return Kernel(f"k{position}_{op}", kernel.root, kernel.nodes, kernel.params, kernel.reason, kernel.fused_reasons)
