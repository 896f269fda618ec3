"""stablehlo.if and stablehlo.case (lax.cond / lax.switch) inlined into the straight-line graph.

A predicate or index known at compile time inlines the taken branch alone.
A run-time one inlines every branch and selects between their results, as the
ONNX importer does for If: branches are pure, so computing all of them costs
time, never correctness. That needs every branch to compute the same result
types; otherwise the error names the result and the branches' types.

case semantics (StableHLO spec): an index outside [0, N) runs the last branch.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from aot.ir import DType, Value

from .context import Ctx
from .syntax import Block, Op

RunBlock = Callable[[Block], list[Value]]  # lowers a region's block in the op's scope, returns its results

CONTROL_OPS = ("stablehlo.if", "stablehlo.case")


def lower_control(cx: Ctx, o: Op, ins: list[Value], run: RunBlock) -> list[Value]:
    selector = "predicate" if o.name == "stablehlo.if" else "index"
    if len(ins) != 1:
        raise cx.error(f"takes one operand (the {selector}), got {len(ins)}")
    branches = [region.blocks[0] for region in o.regions]
    for i, block in enumerate(branches):
        if block.args:
            raise cx.error(f"branch {i} takes {len(block.args)} block argument(s); branches take none")
    (value,) = ins
    if value.type.size != 1:
        raise cx.error(f"the {selector} must be a scalar, got {value.type}")
    if o.name == "stablehlo.if":
        if len(branches) != 2:
            raise cx.error(f"needs a true and a false branch, got {len(branches)} region(s)")
        if value.type.dtype is not DType.BOOL:
            raise cx.error(f"the predicate must be i1, got {value.type}")
        return _if(cx, o, value, branches, run)
    if not branches:
        raise cx.error("needs at least one branch")
    if not value.type.dtype.is_int or value.type.dtype is DType.BOOL:
        raise cx.error(f"the index must be an integer, got {value.type}")
    return _case(cx, o, value, branches, run)


def _if(cx: Ctx, o: Op, pred: Value, branches: list[Block], run: RunBlock) -> list[Value]:
    known = cx.const(pred)
    if known is not None:
        return _run(cx, o, run, branches[0 if bool(known.reshape(())) else 1])
    on_true, on_false = (_run(cx, o, run, b) for b in branches)
    return _select_results(cx, o, [cx.reshape(pred, ())], [on_true, on_false])


def _case(cx: Ctx, o: Op, index: Value, branches: list[Block], run: RunBlock) -> list[Value]:
    last = len(branches) - 1
    known = cx.const(index)
    if known is not None:
        i = int(known.reshape(()))
        return _run(cx, o, run, branches[i if 0 <= i <= last else last])
    results = [_run(cx, o, run, b) for b in branches]
    scalar = cx.reshape(index, ())
    # branch i is taken where index == i; the last branch also takes every out-of-range index
    flags = [cx.op("compare", [scalar, cx.constant(np.array(i).astype(scalar.type.dtype.to_numpy()))], direction="eq")
             for i in range(last)]
    return _select_results(cx, o, flags, results)


def _run(cx: Ctx, o: Op, run: RunBlock, block: Block) -> list[Value]:
    outs = run(block)
    cx.current = o
    return outs


def _select_results(cx: Ctx, o: Op, flags: list[Value], results: list[list[Value]]) -> list[Value]:
    """Per result: flag[0] ? results[0] : flag[1] ? results[1] : ... : results[-1]."""
    counts = {len(r) for r in results}
    if len(counts) != 1:
        raise cx.error(f"branches return different numbers of results: {[len(r) for r in results]}")
    selected = []
    for k in range(len(results[0])):
        types = [r[k].type for r in results]
        if any(t != types[0] for t in types):
            listed = ", ".join(f"branch {i}: {t}" for i, t in enumerate(types))
            raise cx.unsupported(f"the branch is chosen at run time, and the branches compute different types for "
                                 f"result {k} ({listed}); aot compiles straight-line code, so it runs every branch "
                                 f"and selects, which needs one type")
        value = results[-1][k]
        for flag, branch in zip(reversed(flags), reversed(results[:-1])):
            mask = cx.broadcast_scalar(flag, types[0].shape)
            value = cx.op("select", [mask, branch[k], value])
        selected.append(value)
    return selected


__all__ = ["CONTROL_OPS", "lower_control"]
