"""Control flow (If, Loop, Scan) by inlining the subgraphs at import time.

aot compiles straight-line graphs, so every subgraph is lowered into the
enclosing graph through the same op table:

- If: a condition known at compile time inlines its branch alone; a run-time
  condition inlines both branches and selects between their outputs, which
  needs both to have the same types (the branches are pure, so computing both
  is only a cost). A branch that cannot be lowered at the compiled shapes (a
  Reshape or Conv that does not fit, say the 8 kHz branch of a voice
  detector compiled for 16 kHz chunks) is left out: the other branch alone
  is compiled, with a run-time check (ir/ops/checks.py) that fails the run with
  the branch's lowering error if the condition ever selects it. Checks made
  inside a branch are guarded by the condition that selects the branch.
- Loop: unrolled; the trip count must be known at compile time and the
  condition must fold to a constant after every iteration (a loop whose exit
  depends on run-time data has a data-dependent shape).
- Scan: unrolled over the static scan axis (opset 8's batch axis too).

A subgraph sees the names of the scopes around it; the names it defines are
visible only inside it, so one body can be lowered once per iteration.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import onnx

from aot.errors import ModelError
from aot.ir import DType, Value
from aot.ir.ops import CHECKS

from .context import Ctx, NodeArgs, op_registry, take_index
from .loader import tensor_to_array

OPS, op = op_registry()

# Unroll at most this many iterations of a Loop or Scan: beyond it the import
# (and the artifact) would grow without bound.
MAX_UNROLL = 4096


# -- subgraph lowering -------------------------------------------------------------
def _defined_names(graph: onnx.GraphProto) -> list[str]:
    names = [vi.name for vi in graph.input]
    names += [init.name for init in graph.initializer]
    for node in graph.node:
        names += [out for out in node.output if out]
    return names


def _unsupported_ops(graph: onnx.GraphProto, table: Mapping[str, object]) -> list[str]:
    found = []
    for node in graph.node:
        if (node.domain or "") not in ("", "ai.onnx") or node.op_type not in table:
            found.append(node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                found += _unsupported_ops(attr.g, table)
    return found


@contextmanager
def _scope(ctx: Ctx, graph: onnx.GraphProto) -> Iterator[None]:
    """Names the subgraph defines shadow outer ones while it is lowered and vanish after."""
    names = _defined_names(graph)
    saved_env = {n: ctx.env[n] for n in names if n in ctx.env}
    saved_unavailable = {n: ctx.unavailable[n] for n in names if n in ctx.unavailable}
    node_name, node_op, loc = ctx.node_name, ctx.node_op, ctx.b.loc
    try:
        yield
    finally:
        for n in names:
            ctx.env.pop(n, None)
            ctx.unavailable.pop(n, None)
        ctx.env.update(saved_env)
        ctx.unavailable.update(saved_unavailable)
        ctx.node_name, ctx.node_op, ctx.b.loc = node_name, node_op, loc


def _inline(ctx: Ctx, graph: onnx.GraphProto, inputs: Sequence[Value], what: str) -> list[Value]:
    """Lower `graph` with its inputs bound to `inputs`; its outputs, in order."""
    missing = _unsupported_ops(graph, ctx.tables[""])
    if missing:
        raise ctx.unsupported(f"{what} uses unsupported op(s) {sorted(set(missing))}")
    if len(graph.input) != len(inputs):
        raise ctx.error(f"{what} takes {len(graph.input)} input(s), given {len(inputs)}")
    if graph.sparse_initializer:
        raise ctx.unsupported(f"{what} has a sparse initializer")
    outer = f"{ctx.node_name}/"
    with _scope(ctx, graph):
        for vi, v in zip(graph.input, inputs):
            ctx.env[vi.name] = v
        for init in graph.initializer:
            ctx.env[init.name] = ctx.constant(tensor_to_array(init, f"initializer '{init.name}' of {what}"))
        for index, node in enumerate(graph.node):
            if not node.name:  # name it after the enclosing node for error messages, without touching the model
                named = onnx.NodeProto()
                named.CopyFrom(node)
                named.name = f"{outer}{node.op_type}_{index}"
                node = named
            ctx.lower_node(node, index)
        outputs = []
        for out in graph.output:
            if out.name in ctx.unavailable:
                raise ctx.unsupported(ctx.unavailable[out.name])
            if out.name not in ctx.env and out.name not in ctx.pending:
                raise ctx.error(f"{what} output '{out.name}' is produced by no node")
            outputs.append(ctx.value(out.name))
    return outputs


def _scalar_const(ctx: Ctx, v: Value | None) -> np.ndarray | None:
    array = ctx.const(v)
    if array is None:
        return None
    if array.size != 1:
        raise ctx.error(f"expected one element, got shape {list(array.shape)}")
    return array.reshape(())


def _stack(ctx: Ctx, parts: Sequence[Value], axis: int, what: str) -> Value:
    """Equal-typed values stacked along a new `axis`."""
    first = parts[0].type
    for p in parts[1:]:
        if p.type != first:
            raise ctx.unsupported(f"{what} changes type between iterations ({first} then {p.type})")
    rank = first.rank + 1
    if not -rank <= axis < rank:
        raise ctx.error(f"{what}: axis {axis} out of range for rank {rank}")
    axis %= rank
    shape = first.shape[:axis] + (1,) + first.shape[axis:]
    expanded = [ctx.reshape(p, shape) for p in parts]
    return expanded[0] if len(expanded) == 1 else ctx.op("concat", expanded, axis=axis)


# -- If -----------------------------------------------------------------------------
@op("If")
def _if(ctx: Ctx, a: NodeArgs) -> list[Value]:
    cond = a.inputs[0]
    then_branch, else_branch = a.attr("then_branch"), a.attr("else_branch")
    if then_branch is None or else_branch is None:
        raise ctx.error("needs then_branch and else_branch")
    known = _scalar_const(ctx, cond)
    if known is not None:
        branch, what = (then_branch, "then_branch") if bool(known) else (else_branch, "else_branch")
        return _inline(ctx, branch, [], what)
    # run-time condition: both branches, then a select per output
    if cond.type.size != 1:
        raise ctx.error(f"condition must have one element, got {cond.type}")
    flag = ctx.reshape(cond, ())
    if flag.type.dtype is not DType.BOOL:
        flag = ctx.op("compare", [flag, ctx.full(0, flag.type)], direction="ne")
    then_out, then_error = _try_branch(ctx, then_branch, "then_branch", flag, taken_when=True)
    else_out, else_error = _try_branch(ctx, else_branch, "else_branch", flag, taken_when=False)
    if then_out is not None and else_out is None:
        _check(ctx, flag, _cannot_run(ctx, "else_branch", else_error))
        return then_out
    if else_out is not None and then_out is None:
        _check(ctx, ctx.op("not", [flag]), _cannot_run(ctx, "then_branch", then_error))
        return else_out
    if then_out is None or else_out is None:
        raise ctx.error(f"neither branch can run at the compiled shapes: then_branch: {then_error}; "
                        f"else_branch: {else_error}")
    if len(then_out) != len(else_out):
        raise ctx.error(f"branches have {len(then_out)} and {len(else_out)} outputs")
    results = []
    for i, (t, e) in enumerate(zip(then_out, else_out)):
        if t.type != e.type:
            raise ctx.unsupported(f"the condition must be known at compile time: output {i} is {t.type} in "
                                  f"then_branch and {e.type} in else_branch")
        mask = ctx.broadcast_in_dims(flag, t.type.shape, ())
        results.append(ctx.op("select", [mask, t, e]))
    return results


def _try_branch(ctx: Ctx, branch: onnx.GraphProto, what: str, flag: Value,
                taken_when: bool) -> tuple[list[Value] | None, str]:
    """(outputs, "") of `branch` inlined, or (None, why) when it cannot be lowered at these shapes.

    Only a ModelError means that (a shape rule or an attribute that does not fit
    the compiled shapes); an unsupported op or an importer bug still fails the
    compile. A branch runs only when `flag` is `taken_when`, so a check made
    inside it must hold only then; a failed branch leaves no check behind.
    """
    first = len(ctx.graph.nodes)
    try:
        outputs = _inline(ctx, branch, [], what)
    except ModelError as err:
        # its other nodes are pure and dead: the pipeline's first DCE drops them
        ctx.graph.remove_nodes([n for n in ctx.graph.nodes[first:] if n.op in CHECKS])
        return None, str(err)
    inner = [n for n in ctx.graph.nodes[first:] if n.op in CHECKS]
    if not inner:
        return outputs, ""
    ctx.graph.remove_nodes(inner)
    not_taken = ctx.op("not", [flag]) if taken_when else flag
    for n in inner:  # in their order, so the first failing one is still reported first
        ctx.b.loc = n.loc
        _check(ctx, ctx.op("or", [not_taken, n.inputs[0]]), n.attrs["message"])
    ctx.b.loc = ctx.node_name
    return outputs, ""


def _cannot_run(ctx: Ctx, what: str, why: str) -> str:
    return (f"node '{ctx.node_name}' ({ctx.node_op}, opset {ctx.opset}): the condition selected {what}, "
            f"which cannot run at the compiled shapes: {why}")


def _check(ctx: Ctx, ok: Value, message: str) -> None:
    """Fail the run with `message` where `ok` is false (a root of its own: nothing reads it)."""
    ctx.b.op("check", [ok], message=message)


# -- Loop ---------------------------------------------------------------------------
@op("Loop")
def _loop(ctx: Ctx, a: NodeArgs) -> list[Value]:
    body = a.attr("body")
    trip, cond = a.input(0), a.input(1)
    carried = list(a.inputs[2:])
    if any(v is None for v in carried):
        raise ctx.error("a loop-carried initial value is missing")
    n_carried = len(carried)
    n_scan = len(body.output) - 1 - n_carried
    if n_scan < 0:
        raise ctx.error(f"body has {len(body.output)} outputs for {n_carried} loop-carried value(s)")
    trip_count = _scalar_const(ctx, trip) if trip is not None else None
    if trip is not None and trip_count is None:
        raise ctx.unsupported("the trip count M must be known at compile time")
    running = True
    if cond is not None:
        known = _scalar_const(ctx, cond)
        if known is None:
            raise ctx.unsupported("the condition cond must be known at compile time")
        running = bool(known)
    limit = int(trip_count) if trip_count is not None else None
    if limit is None:
        limit = MAX_UNROLL + 1  # runs until the condition turns false
    scans: list[list[Value]] = [[] for _ in range(n_scan)]
    iteration = 0
    while running and iteration < limit:
        if iteration >= MAX_UNROLL:
            raise ctx.unsupported(f"more than {MAX_UNROLL} iterations to unroll")
        ins = [ctx.constant(np.array(iteration, np.int64)), ctx.constant(np.array(True))] + carried
        outs = _inline(ctx, body, ins, f"body (iteration {iteration})")
        known = _scalar_const(ctx, outs[0])
        if known is None:
            raise ctx.unsupported("the loop condition must be known at compile time after each iteration "
                                  "(here it depends on run-time data)")
        running = bool(known)
        carried = outs[1:1 + n_carried]
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
        iteration += 1
    if n_scan and iteration == 0:
        raise ctx.unsupported("zero iterations with scan outputs (their element type is unknown)")
    return carried + [_stack(ctx, parts, 0, f"scan output {k}") for k, parts in enumerate(scans)]


# -- Scan ---------------------------------------------------------------------------
def _axes(ctx: Ctx, a: NodeArgs, name: str, count: int) -> list[int]:
    values = list(a.attr(name, [0] * count))
    if len(values) != count:
        raise ctx.error(f"{name} lists {len(values)} entries for {count} value(s)")
    return [int(v) for v in values]


def _scan_once(ctx: Ctx, body: onnx.GraphProto, states: list[Value], scan_ins: list[Value], in_axes: list[int],
               in_dirs: list[int], out_axes: list[int], out_dirs: list[int], n_out: int) -> list[Value]:
    """One Scan over `scan_ins` (no batch axis): final states, then the stacked scan outputs."""
    lengths = {v.type.shape[ax] for v, ax in zip(scan_ins, in_axes)}
    if len(lengths) != 1:
        raise ctx.error(f"scan inputs differ in length along their scan axes: {sorted(lengths)}")
    (length,) = lengths
    if length > MAX_UNROLL:
        raise ctx.unsupported(f"scan length {length} exceeds {MAX_UNROLL} iterations to unroll")
    scans: list[list[Value]] = [[] for _ in range(n_out)]
    for t in range(length):
        slices = [take_index(ctx, v, ax, length - 1 - t if rev else t) for v, ax, rev in zip(scan_ins, in_axes, in_dirs)]
        outs = _inline(ctx, body, states + slices, f"body (iteration {t})")
        states = outs[:len(states)]
        for k, v in enumerate(outs[len(states):]):
            scans[k].append(v)
    if length == 0 and n_out:
        raise ctx.unsupported("an empty scan with scan outputs (their element type is unknown)")
    stacked = []
    for k, parts in enumerate(scans):
        if out_dirs[k]:
            parts = parts[::-1]  # reverse: each iteration's value is prepended
        stacked.append(_stack(ctx, parts, out_axes[k], f"scan output {k}"))
    return states + stacked


@op("Scan")
def _scan(ctx: Ctx, a: NodeArgs) -> list[Value]:
    body = a.attr("body")
    n_scan_in = int(a.attr("num_scan_inputs"))
    operands = list(a.inputs)
    if ctx.opset < 9:
        return _scan8(ctx, a, body, n_scan_in, operands)
    if any(v is None for v in operands):
        raise ctx.error("an input is missing")
    n_state = len(operands) - n_scan_in
    states, scan_ins = operands[:n_state], operands[n_state:]
    n_out = len(body.output) - n_state
    in_axes = [ax % max(v.type.rank, 1) for ax, v in zip(_axes(ctx, a, "scan_input_axes", n_scan_in), scan_ins)]
    in_dirs = _axes(ctx, a, "scan_input_directions", n_scan_in)
    out_axes = _axes(ctx, a, "scan_output_axes", n_out)
    out_dirs = _axes(ctx, a, "scan_output_directions", n_out)
    return _scan_once(ctx, body, states, scan_ins, in_axes, in_dirs, out_axes, out_dirs, n_out)


def _scan8(ctx: Ctx, a: NodeArgs, body: onnx.GraphProto, n_scan_in: int, operands: list[Value | None]) -> list[Value]:
    """Scan-8: inputs carry a batch axis 0 and scan along axis 1; optional sequence_lens first."""
    lens, rest = operands[0], operands[1:]
    if any(v is None for v in rest):
        raise ctx.error("an input is missing")
    n_state = len(rest) - n_scan_in
    states, scan_ins = rest[:n_state], rest[n_state:]
    n_out = len(body.output) - n_state
    if lens is not None:
        known = ctx.const(lens)
        if known is None:
            raise ctx.unsupported("sequence_lens must be known at compile time")
        if any(v.type.shape[1] != int(n) for v in scan_ins for n in known.reshape(-1)):
            raise ctx.unsupported(f"sequence_lens {known.tolist()} shorter than the sequence (only full lengths)")
    dirs = _axes(ctx, a, "directions", n_scan_in)
    batch = rest[0].type.shape[0]
    finals: list[list[Value]] = [[] for _ in range(n_state + n_out)]
    for b in range(batch):
        outs = _scan_once(ctx, body, [take_index(ctx, v, 0, b) for v in states], [take_index(ctx, v, 0, b) for v in scan_ins],
                          [0] * n_scan_in, dirs, [0] * n_out, [0] * n_out, n_out)
        for k, v in enumerate(outs):
            finals[k].append(v)
    return [_stack(ctx, parts, 0, f"output {k}") for k, parts in enumerate(finals)]
