"""When two packed convs may share one accumulator: their results meet in an add.

A ResNet block with a downsample branch computes

    relu(unpack(conv(h, W2)) + b2 + unpack(conv(x, Wd)) + bd)

Each conv reaches the join only through the unpack links of the layout pass
(transpose, reshape, slice) and adds of values that do not depend on either
conv (the biases). Then the join equals

    unpack(conv(h, W2) + conv(x, Wd)) + b2 + bd

so one kernel can accumulate both contractions into the same registers, and
the downsample conv needs neither its own kernel nor a buffer. The fusion
pass uses `accumulation_join` to fuse the second conv (instead of leaving it
a root of its own), and the packed-conv body (codegen/cpu/conv.py) uses it to
accumulate the partner and read it as 0 in the epilogue.

Both convs must have the same packed output type [N, OB, OH, OW, L] and the
same unpack links, so an output element sits at the same accumulator lane
in both.
"""
from __future__ import annotations

from collections.abc import Callable

from aot.ir.graph import Node, Value
from aot.passes.layout import is_packed_conv

UNPACK_LINKS = frozenset({"transpose", "reshape", "slice"})

UsersOf = Callable[[Value], list[Node]]
# values read beyond their users (graph outputs, a kernel's stored root)
Escapes = Callable[[Value], bool]


def additive_tail(conv: Node, users_of: UsersOf, escapes: Escapes = lambda v: False) -> list[Node]:
    """The nodes after `conv` along its single-use path of unpack links and adds
    (a node whose value escapes ends it)."""
    tail: list[Node] = []
    value = conv.out
    while not escapes(value):
        users = users_of(value)
        if len(users) != 1 or users[0].op not in UNPACK_LINKS | {"add"}:
            break
        user = users[0]
        if user.op == "add" and user.inputs[0] is user.inputs[1]:
            break  # x + x doubles the conv: not a plain sum with something else
        tail.append(user)
        value = user.out
    return tail


def _links(tail: list[Node]) -> list[tuple[str, tuple[int, ...], tuple[tuple[str, object], ...]]]:
    return [(n.op, n.out.type.shape, tuple(sorted(n.attrs.items()))) for n in tail if n.op in UNPACK_LINKS]


def accumulation_join(main: Node, partner: Node, users_of: UsersOf, escapes: Escapes = lambda v: False) -> Node | None:
    """The add where `main` and `partner` meet as a plain sum, or None.

    None unless both are packed convs with equal output types, each reaches
    the join through unpack links and adds only (every value before it used
    once, and none escaping), and both pass through the same unpack links.
    """
    if main is partner or not (is_packed_conv(main) and is_packed_conv(partner)):
        return None
    if main.out.type != partner.out.type:
        return None
    main_tail = additive_tail(main, users_of, escapes)
    partner_tail = additive_tail(partner, users_of, escapes)
    partner_ids = {id(n): i for i, n in enumerate(partner_tail)}
    for i, node in enumerate(main_tail):
        if id(node) in partner_ids:
            if node.op != "add":
                return None
            before_main, before_partner = main_tail[:i], partner_tail[:partner_ids[id(node)]]
            if _links(before_main) != _links(before_partner):
                return None
            return node
    return None
