"""Buffer donation: a graph output takes over a graph input's buffer (XLA's donated
arguments), so a decoder's KV cache is updated in place.

The run-time contract (packaging/FORMAT.md, "donations"): when a run starts, the buffer
of output k holds the value of input j, because the caller passed one buffer for both
or the runtime copied input j there first. So the plan gives input j the slice of
output k: every kernel reads it from there, and the kernel that writes output k (its
writer) writes over it. That is correct when

- every other kernel reading input j (or a reshape alias of it) runs before the writer:
  the scheduler gets each such ordering (schedule.py's `after`); and
- the writer reads input j only where overwriting cannot hurt: at the index it writes
  (an elementwise kernel, same_index.same_index_reads), or as the operand of a scatter,
  whose body copies the operand to its output (nothing to do when both are one buffer)
  and then writes the updated windows alone.

Otherwise -- a reader needs the writer's result first, the writer reads input j at
other indices, a run-time check reads input j after the last kernel -- a copy kernel
runs first and moves input j into the arena, every reader reads the copy, and the
donation still holds (the caller may pass one buffer), at the price of that copy.
before (in place):  %present = scatter(%past, %i, %u)     %past, %present: output 0
before (copied):    %c = copy(%past); readers of %past read %c
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from aot.ir.graph import Graph, Value
from aot.plan import Donation, Kernel, Slice
from aot.planning.same_index import same_index_reads
from aot.planning.schedule import Ordering


@dataclass
class DonationPlan:
    kernels: list[Kernel]  # the kernels, each copy kernel first
    donations: list[Donation] = field(default_factory=list)  # in input order
    slices: dict[str, Slice] = field(default_factory=dict)  # donated inputs -> their output's slice
    after: list[Ordering] = field(default_factory=list)  # readers before the writer that overwrites them
    # per donation: what was done and why; kernels appear as <root value name> until `named`
    notes: list[dict[str, object]] = field(default_factory=list)


def plan_donations(graph: Graph, kernels: list[Kernel], aliases: dict[str, Value],
                   donations: Sequence[Donation], read_at_end: Sequence[str] = ()) -> DonationPlan:
    """Place each donated input in its output's buffer, in place where it can be, else behind a
    copy kernel (which this inserts into `graph`, `kernels` and `aliases`, in place).
    `aliases`: reshape results that are their operand's bytes (buffers.is_alias_kernel);
    `read_at_end`: values read after the last kernel (run-time checks' operands)."""
    plan = DonationPlan(list(kernels), donations=sorted(donations, key=lambda d: d.input))
    for donation in plan.donations:
        donated = graph.inputs[donation.input]
        name, output = graph.input_names[donation.input], graph.output_names[donation.output]
        home = Slice("output", donation.output, 0, donated.type.nbytes)
        writer = next((k for k in plan.kernels if k.root is graph.outputs[donation.output]), None)
        readers = [k for k in plan.kernels if any(_resolve(p.name, aliases) == donated.name for p in k.params)]
        why = _refusal(donated, writer, readers, plan, aliases, read_at_end)
        plan.slices[donated.name] = home
        note: dict[str, object] = {"input": name, "output": output}
        if why is None:
            assert writer is not None  # _refusal returns a reason without one
            plan.after.extend((r.root.name, writer.root.name) for r in readers if r is not writer)
            note.update(how="in place", why=_in_place_detail(writer, readers, donated, aliases))
        else:
            copy = _copy_first(graph, plan, aliases, donated, name, why)
            if writer is not None:
                plan.after.append((copy.root.name, writer.root.name))
            note.update(how="copied", why=why)
        plan.notes.append(note)
    return plan


def named(notes: list[dict[str, object]], kernels: Sequence[Kernel]) -> list[dict[str, object]]:
    """`notes` with each kernel called by its name in `kernels` (the scheduled list)."""
    names = {k.root.name: k.name for k in kernels}

    def name(match: re.Match[str]) -> str:
        return names.get(match.group(1), match.group(0))

    return [{**n, "why": _KERNEL.sub(name, str(n["why"]))} for n in notes]


# how a note refers to a kernel before the schedule names it: <its root value's name>
_KERNEL = re.compile(r"<([A-Za-z0-9_.]+)>")


def _ref(kernel: Kernel) -> str:
    return f"<{kernel.root.name}>"


def _resolve(name: str, aliases: dict[str, Value]) -> str:
    while name in aliases:
        name = aliases[name].name
    return name


def _refusal(donated: Value, writer: Kernel | None, readers: list[Kernel], plan: DonationPlan,
             aliases: dict[str, Value], read_at_end: Sequence[str]) -> str | None:
    """Why `donated` cannot live in its output's buffer as it is read; None when it can."""
    if writer is None:
        return "no kernel writes the output (it is not a computed value)"
    if any(_resolve(v, aliases) == donated.name for v in read_at_end):
        return "a run-time check reads it after the last kernel"
    read = [p for p in writer.params if _resolve(p.name, aliases) == donated.name]
    if len(read) > 1:
        return f"{_ref(writer)}, which writes the output, reads it through {len(read)} values"
    if read and not _writes_over(writer, read[0]):
        return f"{_ref(writer)} ({'+'.join(writer.ops)}), which writes the output, reads it at other indices"
    later = _descendants(writer, plan, aliases)
    for reader in readers:
        if reader is not writer and reader.root.name in later:
            return f"{_ref(reader)} reads it and needs the output %{writer.root.name} first"
    return None


def _writes_over(writer: Kernel, param: Value) -> bool:
    """`writer` may overwrite `param`'s bytes as it runs: it reads each element only at the index
    it writes, or `param` is its scatter's operand and nothing else in it reads `param`."""
    if same_index_reads(writer, param):
        return True
    root = writer.root.producer
    if root is None or root.op != "scatter" or root.inputs[0] is not param:
        return False
    return sum(1 for n in writer.nodes for v in n.inputs if v is param) == 1


def _descendants(kernel: Kernel, plan: DonationPlan, aliases: dict[str, Value]) -> set[str]:
    """Roots of the kernels that must run after `kernel`: they read what it writes, directly
    or down the line, or an ordering in `plan.after` says so."""
    consumers: dict[str, list[str]] = {}
    for k in plan.kernels:
        for p in k.params:
            consumers.setdefault(_resolve(p.name, aliases), []).append(k.root.name)
    for first, then in plan.after:
        consumers.setdefault(first, []).append(then)
    seen: set[str] = set()
    todo = [kernel.root.name]
    while todo:
        for then in consumers.get(todo.pop(), []):
            if then not in seen:
                seen.add(then)
                todo.append(then)
    return seen


def _in_place_detail(writer: Kernel, readers: list[Kernel], donated: Value, aliases: dict[str, Value]) -> str:
    others = [_ref(r) for r in readers if r is not writer]
    before = f"; {', '.join(others)} read it first" if others else ""
    if not any(_resolve(p.name, aliases) == donated.name for p in writer.params):
        return f"{_ref(writer)} writes the output without reading it{before}"
    producer = writer.root.producer
    if producer is not None and producer.op == "scatter":
        return f"{_ref(writer)} (scatter) writes only the updated windows over it{before}"
    return f"{_ref(writer)} ({'+'.join(writer.ops)}) reads each element where it writes it{before}"


def _copy_first(graph: Graph, plan: DonationPlan, aliases: dict[str, Value], donated: Value, name: str,
                why: str) -> Kernel:
    """A kernel copying `donated` to the arena, run first; every reader of `donated` reads the copy."""
    node = graph.make_node("copy", [donated], {}, donated.type, name=graph.fresh_name(f"{donated.name}.copy"),
                           loc=f"donated input {name}", index=0)
    copy = node.out
    for n in graph.nodes:
        if n is not node:
            n.inputs = [copy if v is donated else v for v in n.inputs]
    for k in plan.kernels:
        k.params = [copy if p is donated else p for p in k.params]
    for alias, target in aliases.items():
        if target is donated:
            aliases[alias] = copy
    kernel = Kernel("copy", copy, [node], [donated], reason=f"donated input '{name}' is copied: {why}")
    plan.kernels.insert(0, kernel)
    return kernel
