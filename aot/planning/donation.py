"""Buffer donation: a graph output takes over a graph input's buffer (XLA's donated
arguments), so a decoder's KV cache is updated in place.

The run-time contract (packaging/FORMAT.md, "donations"): when a run starts, the buffer
of output k holds the value of input j, because the caller passed one buffer for both
or the runtime copied input j there first. So the plan gives input j the slice of
output k, and every kernel reads it from there. Three ways to keep that correct, the
first that applies:

- in place: a chain of kernels, from one reading input j to the one writing output k,
  each overwriting its predecessor's value as it runs: reading it only at the index it
  writes (elementwise) or as its scatter's operand (same_index.writes_over), whose
  copy is a no-op in place so only the updated windows are written. Every value on the
  chain lives in output k's buffer, and every other reader of each one runs before the
  kernel that overwrites it (an ordering for the scheduler, schedule.py's `after`).
  A cache updated layer by layer (JAX's dynamic_update_slice chain) is one chain;
- overwritten: no such chain, but the writer of output k reads no input j; the readers
  of input j run before it and it writes the whole output (a copy, but no extra one);
- copied: otherwise -- a reader needs the output first, the writer reads input j at
  other indices, a run-time check reads input j after the last kernel -- a copy kernel
  runs first and moves input j into the arena, and every reader reads the copy.

before (in place):  %p1 = scatter(%past, %i0, %u0); %present = scatter(%p1, %i1, %u1)
                    %past, %p1, %present: output 0's buffer; %p1's readers run before %present's
before (copied):    %c = copy(%past); readers of %past read %c
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from aot.ir.graph import Graph, Value
from aot.plan import Donation, Kernel, Slice
from aot.planning.same_index import writes_over
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
    """Place each donated input in its output's buffer (module docstring): in place where a
    chain allows it, overwritten, else behind a copy kernel (which this inserts into `graph`,
    `kernels` and `aliases`, in place). `aliases`: reshape results that are their operand's
    bytes (buffers.is_alias_kernel); `read_at_end`: values read after the last kernel (run-time
    checks' operands)."""
    plan = DonationPlan(list(kernels), donations=sorted(donations, key=lambda d: d.input))
    outputs = {v.name for v in graph.outputs}
    for donation in plan.donations:
        donated = graph.inputs[donation.input]
        name, output = graph.input_names[donation.input], graph.output_names[donation.output]
        home = Slice("output", donation.output, 0, donated.type.nbytes)
        writer = next((k for k in plan.kernels if k.root is graph.outputs[donation.output]), None)
        plan.slices[donated.name] = home
        note: dict[str, object] = {"input": name, "output": output}
        plan.notes.append(note)
        ends = {_resolve(v, aliases) for v in read_at_end}
        chain = None if writer is None or donated.name in ends else \
            _in_place_chain(writer, donated, plan, aliases, outputs | ends)
        if chain is not None:
            for _, value in chain[1:]:
                plan.slices[value.name] = home
            note.update(how="in place", why=_chain_detail(chain, plan, aliases))
            continue
        readers = [k for k in plan.kernels if any(_resolve(p.name, aliases) == donated.name for p in k.params)]
        why = _refusal(donated, writer, readers, plan, aliases, ends)
        if why is None:
            assert writer is not None  # _refusal returns a reason without one
            plan.after.extend((r.root.name, writer.root.name) for r in readers)
            before = f"; {', '.join(_ref(r) for r in readers)} read it first" if readers else ""
            note.update(how="overwritten", why=f"{_ref(writer)} writes the whole output without reading it{before}")
        else:
            copy = _copy_first(graph, plan, aliases, donated, name, why)
            if writer is not None:
                plan.after.append((copy.root.name, writer.root.name))
            note.update(how="copied", why=why)
    return plan


# a chain: (kernel, the value it overwrites in place), from the kernel that overwrites the
# donated input to the one that writes the output
Chain = list[tuple[Kernel, Value]]


def _in_place_chain(writer: Kernel, donated: Value, plan: DonationPlan, aliases: dict[str, Value],
                    kept_apart: set[str]) -> Chain | None:
    """The chain from `donated` to `writer`, its orderings added to `plan.after`; None where
    there is none, or its orderings cannot be met. `kept_apart`: values that need buffers of
    their own (graph outputs, values read after the last kernel)."""
    producers = {k.root.name: k for k in plan.kernels}
    chain = _links(writer, donated, producers, aliases, kept_apart | set(plan.slices), set())
    if chain is None:
        return None
    after: list[tuple[str, str]] = []
    for kernel, value in chain:
        readers = [k for k in plan.kernels
                   if k is not kernel and any(_resolve(p.name, aliases) == value.name for p in k.params)]
        later = _descendants(kernel, plan, aliases, after)
        if any(r.root.name in later for r in readers):
            return None
        after.extend((r.root.name, kernel.root.name) for r in readers)
    plan.after.extend(after)
    return chain


def _links(kernel: Kernel, donated: Value, producers: dict[str, Kernel], aliases: dict[str, Value],
           kept_apart: set[str], tried: set[str]) -> Chain | None:
    """The chain ending at `kernel`: it overwrites `donated` itself, or an arena value whose
    producer's chain reaches `donated` (depth first, in parameter order)."""
    read = [p for p in kernel.params if _resolve(p.name, aliases) == donated.name]
    if read:
        return [(kernel, read[0])] if len(read) == 1 and writes_over(kernel, read[0]) else None
    tried.add(kernel.root.name)
    for p in kernel.params:
        producer = producers.get(p.name)
        if (producer is None or p.name in kept_apart or p.name in tried
                or p.type.nbytes != kernel.root.type.nbytes or not writes_over(kernel, p)):
            continue
        found = _links(producer, donated, producers, aliases, kept_apart, tried)
        if found is not None:
            return [*found, (kernel, p)]
    return None


def _chain_detail(chain: Chain, plan: DonationPlan, aliases: dict[str, Value]) -> str:
    def what(kernel: Kernel) -> str:
        producer = kernel.root.producer
        return "scatter" if producer is not None and producer.op == "scatter" else "+".join(kernel.ops)

    scatters = all(what(k) == "scatter" for k, _ in chain)
    kernels = ", ".join(f"{_ref(k)} ({what(k)})" for k, _ in chain)
    if len(chain) == 1:
        verb = "writes only the updated windows" if scatters else "writes each element where it reads it"
    else:
        verb = ("write only their updated windows" if scatters else "write each element where they read it") + \
            ", in turn,"
    first = [_ref(k) for k in plan.kernels
             for kernel, value in chain
             if k is not kernel and any(_resolve(p.name, aliases) == value.name for p in k.params)]
    before = f"; {', '.join(dict.fromkeys(first))} read it first" if first else ""
    return f"{kernels} {verb} over it{before}"


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
             aliases: dict[str, Value], ends: set[str]) -> str | None:
    """Why the writer cannot simply overwrite `donated` after its readers; None when it can.
    `ends`: values read after the last kernel."""
    if writer is None:
        return "no kernel writes the output (it is not a computed value)"
    if donated.name in ends:
        return "a run-time check reads it after the last kernel"
    read = [p for p in writer.params if _resolve(p.name, aliases) == donated.name]
    if len(read) > 1:
        return f"{_ref(writer)}, which writes the output, reads it through {len(read)} values"
    if read and not writes_over(writer, read[0]):
        return f"{_ref(writer)} ({'+'.join(writer.ops)}), which writes the output, reads it at other indices"
    later = _descendants(writer, plan, aliases)
    for reader in readers:
        if reader is not writer and reader.root.name in later:
            return f"{_ref(reader)} reads it and needs the output %{writer.root.name} first"
    # the writer overwrites it in place, but a chain was not possible
    return None if not read else f"{_ref(writer)} cannot overwrite it in place"


def _descendants(kernel: Kernel, plan: DonationPlan, aliases: dict[str, Value],
                 more: Sequence[tuple[str, str]] = ()) -> set[str]:
    """Roots of the kernels that must run after `kernel`: they read what it writes, directly
    or down the line, or an ordering in `plan.after` (or `more`) says so."""
    consumers: dict[str, list[str]] = {}
    for k in plan.kernels:
        for p in k.params:
            consumers.setdefault(_resolve(p.name, aliases), []).append(k.root.name)
    for first, then in [*plan.after, *more]:
        consumers.setdefault(first, []).append(then)
    seen: set[str] = set()
    todo = [kernel.root.name]
    while todo:
        for then in consumers.get(todo.pop(), []):
            if then not in seen:
                seen.add(then)
                todo.append(then)
    return seen


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
