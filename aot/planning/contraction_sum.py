"""When two packed convs may share one accumulator: their results meet in an add.

A ResNet block with a downsample branch computes

    relu(packed_conv(h, W2) + b2 + packed_conv(x, Wd) + bd)

Each conv reaches the join only through adds of values that do not depend on
either conv (the biases). Then the join equals

    (packed_conv(h, W2) + packed_conv(x, Wd)) + b2 + bd

so one kernel can accumulate both contractions into the same registers, and
the downsample conv needs neither its own kernel nor a buffer. The fusion
pass uses `accumulation_join` to fuse the second conv (instead of leaving it
a root of its own), and the packed-conv body (codegen/cpu/packed_conv.py)
uses it to accumulate the partner and read it as 0 in the epilogue.

Both convs must have the same result type and the same packing (ir/ops/packed.py),
so an output element sits at the same accumulator lane in both.
"""
from __future__ import annotations

from collections.abc import Callable

from aot.ir.graph import Node, Value
from aot.ir.ops import Packing

UsersOf = Callable[[Value], list[Node]]
# values read beyond their users (graph outputs, a kernel's stored root)
Escapes = Callable[[Value], bool]


def additive_tail(conv: Node, users_of: UsersOf, escapes: Escapes = lambda v: False) -> list[Node]:
    """The adds after `conv` along its single-use path (a node whose value escapes ends it)."""
    tail: list[Node] = []
    value = conv.out
    while not escapes(value):
        users = users_of(value)
        if len(users) != 1 or users[0].op != "add":
            break
        user = users[0]
        if user.inputs[0] is user.inputs[1]:
            break  # x + x doubles the conv: not a plain sum with something else
        tail.append(user)
        value = user.out
    return tail


def accumulation_join(main: Node, partner: Node, users_of: UsersOf, escapes: Escapes = lambda v: False) -> Node | None:
    """The add where `main` and `partner` meet as a plain sum, or None.

    None unless both are packed convs with equal result types and packings,
    and each reaches the join through adds only (every value before it used
    once, and none escaping).
    """
    if main is partner or main.op != "packed_conv" or partner.op != "packed_conv":
        return None
    if main.out.type != partner.out.type or Packing.of(main.attrs) != Packing.of(partner.attrs):
        return None
    partner_tail = {id(n) for n in additive_tail(partner, users_of, escapes)}
    return next((n for n in additive_tail(main, users_of, escapes) if id(n) in partner_tail), None)
