"""Buffer assignment: decide where every materialized value lives.

Graph inputs and outputs live in caller buffers; constants read by kernels
live in the weights blob (deduplicated by content, 64-byte aligned); every
other kernel result is an arena temporary. Temporaries are grouped into
logical buffers (XLA's allocation + slices): a value may share its buffer with

- its operand, when it is a reshape whose kernel would only copy: the kernel
  is dropped and the reshape is an alias, a second Slice on the same bytes;
- a dead operand, in place, when the kernel is elementwise in it (it reads
  that operand only at the index it writes, through elementwise ops, and
  this kernel is the operand's last reader): root[i] is stored after
  operand[i] was read, and operand[i] is never read again; or when the operand
  is its scatter's, which then writes the updated windows alone (a cache
  updated layer after layer in the arena).

A buffer is live from the first write of any member to the last read of
any member (an alias extends its operand's interval). A run-time check
(ir/ops/checks.py) reads its operand after the last kernel, so that operand's
buffer lives to the end of the run. The memory planner places buffers; every
member gets the buffer's offset.

A donated input (donation.py) lives in its output's buffer: the kernels that read it
are ordered before the one that overwrites it, or read a copy made first.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from aot.arith import align_up
from aot.ir.graph import Graph, Value
from aot.ir.ops import CHECKS
from aot.plan import Check, Donation, ExecutionPlan, Kernel, Slice
from aot.planning.donation import named, plan_donations
from aot.planning.memory_plan import ALIGNMENT, Interval, plan_arena
from aot.planning.same_index import writes_over
from aot.planning.schedule import renumbered, schedule, stable_order


def layout_weights(constants: list[tuple[str, np.ndarray]]) -> tuple[dict[str, int], bytes]:
    """Concatenate constant data, 64-aligned; identical data (same dtype and bytes) is stored once."""
    offsets: dict[str, int] = {}
    by_content: dict[tuple[str, bytes], int] = {}
    blob = bytearray()
    for name, array in constants:
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)  # no copy: hashed, then copied once into the blob
        key = (array.dtype.str, hashlib.sha256(data).digest())
        if key not in by_content:
            blob.extend(b"\0" * (align_up(len(blob), ALIGNMENT) - len(blob)))
            by_content[key] = len(blob)
            blob.extend(data)
        offsets[name] = by_content[key]
    return offsets, bytes(blob)


@dataclass
class ArenaBuffer:
    """One arena allocation: `members` (value names) share its bytes; live over [start, end] steps."""

    name: str
    size: int
    start: int
    end: int
    members: list[str] = field(default_factory=list)
    how: dict[str, str] = field(default_factory=dict)  # member -> "alias of %x" / "in place of %x"


def is_alias_kernel(kernel: Kernel, outputs: set[int]) -> bool:
    """A kernel that only reshapes one materialized value: its result can be that value's bytes."""
    real = [n for n in kernel.nodes if n.op != "constant"]
    return (len(real) == 1 and real[0].op == "reshape" and len(kernel.params) == 1
            and real[0].inputs[0] is kernel.params[0] and id(kernel.root) not in outputs)


def build_buffers(kernels: list[Kernel], placed_elsewhere: set[str], aliases: dict[str, Value],
                  in_place: bool = True, read_at_end: Sequence[str] = ()) -> list[ArenaBuffer]:
    """Arena buffers over the (scheduled) kernels, with aliases and in-place reuse merged in.

    `read_at_end`: values read after the last kernel (checks' operands), live to step len(kernels).
    """
    def resolve(name: str) -> str:
        while name in aliases:
            name = aliases[name].name
        return name

    # last step reading each value's bytes: an alias's reads count for the value it aliases
    last_read: dict[str, int] = {}
    for step, kernel in enumerate(kernels):
        for p in kernel.params:
            last_read[resolve(p.name)] = step
    for name in read_at_end:
        last_read[resolve(name)] = len(kernels)
    buffers: list[ArenaBuffer] = []
    owner: dict[str, ArenaBuffer] = {}
    for step, kernel in enumerate(kernels):
        for p in kernel.params:
            buffer = owner.get(resolve(p.name))
            if buffer is not None:
                buffer.end = max(buffer.end, step)
        name = kernel.root.name
        if name in placed_elsewhere:
            continue
        found = _in_place_host(kernel, step, owner, last_read, resolve) if in_place else None
        if found is not None:
            host, operand = found
            host.members.append(name)
            host.how[name] = f"in place of %{operand}"
            owner[name] = host
            continue
        buffer = ArenaBuffer(f"b{len(buffers)}", kernel.root.type.nbytes, step, step, [name])
        buffers.append(buffer)
        owner[name] = buffer
    for name in read_at_end:
        buffer = owner.get(resolve(name))
        if buffer is not None:
            buffer.end = len(kernels)
    for alias, target in aliases.items():
        buffer = owner.get(resolve(target.name))
        if buffer is not None:
            buffer.members.append(alias)
            buffer.how[alias] = f"alias of %{target.name}"
    return buffers


def _in_place_host(kernel: Kernel, step: int, owner: dict[str, ArenaBuffer], last_read: dict[str, int],
                   resolve: Callable[[str], str]) -> tuple[ArenaBuffer, str] | None:
    """The buffer of a dead operand `kernel` may write its root into, and that operand's name."""
    hosts_read = [owner.get(resolve(p.name)) for p in kernel.params]
    for p, host in zip(kernel.params, hosts_read):
        if host is None or host.size != kernel.root.type.nbytes:
            continue
        if any(last_read.get(m, -1) > step for m in host.members):
            continue  # the buffer is still read later (through this value, another member or an alias)
        if sum(1 for h in hosts_read if h is host) != 1:
            continue  # the kernel also reads the buffer through another value
        if writes_over(kernel, p):
            return host, p.name
    return None


def assign_buffers(graph: Graph, kernels: list[Kernel], *, reorder: bool = True, in_place: bool = True,
                   donations: Sequence[Donation] = ()) -> ExecutionPlan:
    """`donations`: inputs whose buffers outputs take over (donation.py); a copy kernel it
    needs is added to `graph` too."""
    outputs = graph.output_ids()
    aliases: dict[str, Value] = {}
    kept: list[Kernel] = []
    for kernel in kernels:
        if is_alias_kernel(kernel, outputs):
            aliases[kernel.root.name] = kernel.params[0]
        else:
            kept.append(kernel)
    slices: dict[str, Slice] = {}
    for i, value in enumerate(graph.inputs):
        slices[value.name] = Slice("input", i, 0, value.type.nbytes)
    for i, value in enumerate(graph.outputs):
        slices[value.name] = Slice("output", i, 0, value.type.nbytes)
    checks = [Check(n.inputs[0], n.attrs["message"], n.loc) for n in graph.nodes if n.op in CHECKS]
    after: list[tuple[str, str]] = []
    donated: list[dict[str, object]] = []
    pairs: list[Donation] = []
    if donations:
        donation = plan_donations(graph, kept, aliases, donations, [c.ok.name for c in checks])
        if len(donation.kernels) != len(kept):
            kept = renumbered(donation.kernels)  # copy kernels first: names follow positions
            # a check that read a donated input reads its copy now
            checks = [Check(n.inputs[0], n.attrs["message"], n.loc) for n in graph.nodes if n.op in CHECKS]
        slices.update(donation.slices)
        after, donated, pairs = donation.after, donation.notes, donation.donations
    constants: list[tuple[str, np.ndarray]] = []
    seen: set[str] = set()
    # a check's operand is constant only where const-fold did not run; it is read from the weights then
    for param in [p for kernel in kept for p in kernel.params] + [c.ok for c in checks]:
        array = graph.constant_value(param)
        if array is not None and param.name not in seen:
            seen.add(param.name)
            constants.append((param.name, array))
    weight_offsets, weights = layout_weights(constants)
    for name, array in constants:
        slices[name] = Slice("weights", 0, weight_offsets[name], array.nbytes)
    temporaries = {k.root.name for k in kept if k.root.name not in slices}
    if reorder:
        kept = schedule(kept, temporaries, after, aliases)
    elif after and stable_order(kept, after, aliases) is not kept:
        kept = renumbered(stable_order(kept, after, aliases))
    donated = named(donated, kept)
    buffers = build_buffers(kept, set(slices), aliases, in_place, [c.ok.name for c in checks])
    intervals = [Interval(b.name, b.size, b.start, b.end) for b in buffers]
    arena = plan_arena(intervals, ALIGNMENT)
    for b in buffers:
        for member in b.members:
            slices[member] = Slice("arena", 0, arena.offsets[b.name], b.size)
    for alias, target in aliases.items():
        if alias not in slices and target.name in slices:
            slices[alias] = slices[target.name]  # alias of an input or a weight
    total = sum(k.root.type.nbytes for k in kept if k.root.name in temporaries)
    memory_plan = [
        {"buffer": b.name, "values": list(b.members), "offset": arena.offsets[b.name], "size": b.size,
         "start": b.start, "end": b.end, "shared": dict(b.how)}
        for b in buffers
    ]
    return ExecutionPlan(
        graph, kept, slices, arena.arena_bytes, arena.lower_bound, weights,
        notes={"temporaries_bytes": total, "weights_bytes": len(weights), "memory_plan": memory_plan,
               "aliases": len(aliases),
               "in_place": sum(1 for b in buffers for how in b.how.values() if how.startswith("in place")),
               "donations": donated},
        checks=checks, donations=pairs,
    )


def describe_plan(plan: ExecutionPlan) -> str:
    """Human-readable buffer table (for --dump-ir)."""
    lines = [f"arena {plan.arena_bytes} bytes (lower bound {plan.arena_lower_bound}), weights {len(plan.weights)} bytes"]
    for kernel in plan.kernels:
        where = plan.slices[kernel.root.name]
        params = ", ".join(f"%{p.name}@{plan.slices[p.name].kind}+{plan.slices[p.name].offset}" for p in kernel.params)
        lines.append(f"{kernel.name}: %{kernel.root.name} -> {where.kind}[{where.index}]+{where.offset} ({where.size} B) <- {params}")
    for entry in plan.notes.get("memory_plan", []):  # type: ignore[union-attr]
        for member, how in entry["shared"].items():
            lines.append(f"%{member} shares {entry['buffer']}: {how}")
    for note in plan.notes.get("donations", []):  # type: ignore[union-attr]
        lines.append(f"donation {note['input']} -> {note['output']}: {note['how']}, {note['why']}")
    return "\n".join(lines) + "\n"
