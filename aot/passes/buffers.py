"""Buffer assignment: decide where every materialized value lives.

Graph inputs and outputs live in caller buffers; constants read by kernels
live in the weights blob (deduplicated by content, 64-byte aligned);
every other kernel result is an arena temporary whose live interval runs
from the kernel that writes it to the last kernel that reads it. The arena
offsets come from the memory planner.
"""
from __future__ import annotations

import hashlib

import numpy as np

from aot.ir.graph import Graph
from aot.passes.memory_plan import ALIGNMENT, Interval, align_up, plan_arena
from aot.plan import ExecutionPlan, Kernel, Slice


def layout_weights(constants: list[tuple[str, np.ndarray]]) -> tuple[dict[str, int], bytes]:
    """Concatenate constant data, 64-aligned; identical data (same dtype and bytes) is stored once."""
    offsets: dict[str, int] = {}
    by_content: dict[tuple[str, bytes], int] = {}
    blob = bytearray()
    for name, array in constants:
        data = np.ascontiguousarray(array).tobytes()
        key = (array.dtype.str, hashlib.sha256(data).digest())
        if key not in by_content:
            blob.extend(b"\0" * (align_up(len(blob)) - len(blob)))
            by_content[key] = len(blob)
            blob.extend(data)
        offsets[name] = by_content[key]
    return offsets, bytes(blob)


def live_intervals(kernels: list[Kernel], placed_elsewhere: set[str]) -> list[Interval]:
    """Interval per arena temporary, in kernel steps (inclusive)."""
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for step, kernel in enumerate(kernels):
        name = kernel.root.name
        if name not in placed_elsewhere:
            start[name] = end[name] = step
            sizes[name] = kernel.root.type.nbytes
        for param in kernel.params:
            if param.name in start:
                end[param.name] = step
    return [Interval(name, sizes[name], start[name], end[name]) for name in start]


def assign_buffers(graph: Graph, kernels: list[Kernel]) -> ExecutionPlan:
    slices: dict[str, Slice] = {}
    for i, value in enumerate(graph.inputs):
        slices[value.name] = Slice("input", i, 0, value.type.nbytes)
    for i, value in enumerate(graph.outputs):
        slices[value.name] = Slice("output", i, 0, value.type.nbytes)
    constants: list[tuple[str, np.ndarray]] = []
    seen: set[str] = set()
    for kernel in kernels:
        for param in kernel.params:
            array = graph.constant_value(param)
            if array is not None and param.name not in seen:
                seen.add(param.name)
                constants.append((param.name, array))
    weight_offsets, weights = layout_weights(constants)
    for name, array in constants:
        slices[name] = Slice("weights", 0, weight_offsets[name], array.nbytes)
    intervals = live_intervals(kernels, set(slices))
    arena = plan_arena(intervals, ALIGNMENT)
    for iv in intervals:
        slices[iv.name] = Slice("arena", 0, arena.offsets[iv.name], iv.size)
    total = sum(iv.size for iv in intervals)
    return ExecutionPlan(
        graph, kernels, slices, arena.arena_bytes, arena.lower_bound, weights,
        notes={"temporaries_bytes": total, "weights_bytes": len(weights)},
    )


def describe_plan(plan: ExecutionPlan) -> str:
    """Human-readable buffer table (for --dump-ir)."""
    lines = [f"arena {plan.arena_bytes} bytes (lower bound {plan.arena_lower_bound}), weights {len(plan.weights)} bytes"]
    for kernel in plan.kernels:
        where = plan.slices[kernel.root.name]
        params = ", ".join(f"%{p.name}@{plan.slices[p.name].kind}+{plan.slices[p.name].offset}" for p in kernel.params)
        lines.append(f"{kernel.name}: %{kernel.root.name} -> {where.kind}[{where.index}]+{where.offset} ({where.size} B) <- {params}")
    return "\n".join(lines) + "\n"

