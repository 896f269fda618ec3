"""`aot_code_info`: the code section's own record of what it was built for.

The manifest is JSON that anyone can edit and reseal; the code trusts the
buffers it is given. So the shared object carries a read-only table that the C
runtime compares with the manifest at open (runtime_c/src/code_info.c): an
edited arena size, tensor shape, kernel work, weights size or symbol is then
refused instead of sending the code past its buffers. Layout (uint64 words,
packaging/FORMAT.md "Code description"):

    "AOTCINFO", version, arena bytes, arena alignment, weights bytes,
    weights alignment, inputs, outputs, kernels, checks, &entry, &checks (or 0),
    input byte sizes..., output byte sizes..., (&kernel, work items)...,
    [version 2: donations, (input, output)...]

Version 2 adds the donated pairs (plan.donations): code built for them reads a donated
input from its output's buffer, so a runtime that does not know them (reads version 1
only) must refuse it, and one that does compares them with the manifest's. Code
without donations keeps version 1, byte for byte what it was, and every runtime opens it.
"""
from __future__ import annotations

from llvmlite import ir

from aot.plan import ExecutionPlan

SYMBOL = "aot_code_info"
MAGIC = int.from_bytes(b"AOTCINFO", "little")
VERSION = 1
VERSION_DONATIONS = 2  # the table ends with the donated pairs
# what driver.build_manifest writes for the arena and the weights
ALIGNMENT = 64

I64 = ir.IntType(64)


def _address(fn: ir.Function | None) -> ir.Constant:
    return ir.Constant(I64, 0) if fn is None else fn.ptrtoint(I64)


def code_info_words(plan: ExecutionPlan, entry: ir.Function, checks: ir.Function | None,
                    kernels: list[tuple[ir.Function, int]]) -> list[ir.Constant]:
    """The table's words: integers, and the addresses of the entry, checks and kernels."""
    graph = plan.graph
    version = VERSION_DONATIONS if plan.donations else VERSION
    head = [MAGIC, version, plan.arena_bytes, ALIGNMENT, len(plan.weights), ALIGNMENT,
            len(graph.inputs), len(graph.outputs), len(kernels), len(plan.checks)]
    words = [ir.Constant(I64, w) for w in head]
    words += [_address(entry), _address(checks)]
    words += [ir.Constant(I64, v.type.nbytes) for v in (*graph.inputs, *graph.outputs)]
    for fn, work in kernels:
        words += [_address(fn), ir.Constant(I64, work)]
    if plan.donations:
        words.append(ir.Constant(I64, len(plan.donations)))
        for d in plan.donations:
            words += [ir.Constant(I64, d.input), ir.Constant(I64, d.output)]
    return words


def emit_code_info(module: ir.Module, plan: ExecutionPlan, entry: ir.Function, checks: ir.Function | None,
                   kernels: list[tuple[ir.Function, int]]) -> ir.GlobalVariable:
    """Add the exported constant `aot_code_info` to `module`."""
    words = code_info_words(plan, entry, checks, kernels)
    table_type = ir.ArrayType(I64, len(words))
    table = ir.GlobalVariable(module, table_type, name=SYMBOL)
    table.initializer = ir.Constant(table_type, words)
    table.global_constant = True
    table.align = 8
    return table
