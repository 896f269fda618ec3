"""Recognise the small regions JAX attaches to reduce, reduce_window, scatter and sort.

The IR has no regions: a reducer becomes a `kind`, a comparator becomes
sort/argsort with a direction. Anything not recognised is reported by the
caller as unsupported, naming the op.
"""
from __future__ import annotations

from .syntax import Block, Enum, Op

# binary body op -> reduction kind (bool and/or are min/max over {0, 1})
REDUCER_KINDS = {
    "stablehlo.add": "sum", "stablehlo.multiply": "prod", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
}
BOOL_REDUCER_KINDS = {"stablehlo.and": "min", "stablehlo.or": "max", "stablehlo.multiply": "min",
                      "stablehlo.maximum": "max", "stablehlo.minimum": "min"}
SCATTER_KINDS = {"stablehlo.add": "add", "stablehlo.multiply": "mul", "stablehlo.maximum": "max",
                 "stablehlo.minimum": "min"}
_CANONICALIZE_OPS = {"stablehlo.constant", "stablehlo.compare", "stablehlo.select", "stablehlo.or",
                     "stablehlo.and", "stablehlo.not", "stablehlo.convert", "stablehlo.bitcast_convert",
                     "stablehlo.broadcast_in_dim", "stablehlo.negate"}


def _returned(block: Block) -> list[str]:
    if not block.ops or block.ops[-1].name not in ("stablehlo.return", "return", "func.return"):
        return []
    return block.ops[-1].operands


def binary_body_op(block: Block, is_bool: bool) -> str | None:
    """For `^bb0(%a, %b): %r = OP %a, %b; return %r` (either operand order): OP's name."""
    if len(block.args) != 2 or len(block.ops) != 2:
        return None
    body = block.ops[0]
    names = {block.args[0][0], block.args[1][0]}
    if not body.results or _returned(block) != [body.results[0][0]]:
        return None
    if set(body.operands) != names or len(body.operands) != 2:
        return None
    return body.name


def reducer_kind(block: Block, is_bool: bool) -> str | None:
    name = binary_body_op(block, is_bool)
    if name is None:
        return None
    if is_bool:
        return BOOL_REDUCER_KINDS.get(name)
    return REDUCER_KINDS.get(name)


def scatter_kind(block: Block) -> str | None:
    """`return %new` is assign; a binary op of (old, new) is an accumulating kind."""
    if len(block.args) != 2:
        return None
    if len(block.ops) == 1 and _returned(block) == [block.args[1][0]]:
        return "assign"
    name = binary_body_op(block, False)
    return SCATTER_KINDS.get(name or "")


def _deps(block: Block) -> dict[str, set[int]]:
    """Which block arguments each SSA value depends on; None-like (empty) for constants."""
    deps: dict[str, set[int]] = {name: {i} for i, (name, _) in enumerate(block.args)}
    for op in block.ops:
        combined: set[int] = set()
        for ref in op.operands:
            combined |= deps.get(ref.partition("#")[0], set())
        for name, _ in op.results:
            deps[name] = combined
    return deps


def _producer(block: Block, ref: str) -> Op | None:
    name = ref.partition("#")[0]
    for op in block.ops:
        if any(r == name for r, _ in op.results):
            return op
    return None


def comparator_descending(block: Block) -> bool | None:
    """A sort comparator keyed on operand 0 alone: False ascending, True descending, None otherwise.

    JAX compares canonicalised copies of (lhs0, rhs0) with LT (GT for
    descending), after select ops that map -0.0 to 0.0 and NaNs to one NaN.
    """
    if any(op.name not in _CANONICALIZE_OPS for op in block.ops[:-1]):
        return None
    ret = _returned(block)
    if len(ret) != 1:
        return None
    root = _producer(block, ret[0])
    if root is None or root.name != "stablehlo.compare" or len(root.operands) != 2:
        return None
    direction = root.attrs.get("comparison_direction")
    text = direction.value if isinstance(direction, Enum) else ""
    if text not in ("LT", "GT"):
        return None
    deps = _deps(block)
    lhs, rhs = (deps.get(r.partition("#")[0], set()) for r in root.operands)
    if lhs == {0} and rhs == {1}:
        return text == "GT"
    if lhs == {1} and rhs == {0}:
        return text == "LT"
    return None


def arg_reducer(block: Block) -> str | None:
    """The (value, index) reducer of argmax/argmin: 'max' or 'min', else None.

    Arguments are (acc_value, acc_index, new_value, new_index); both results
    are selects between acc and new, and the value comparison acc vs new is
    GT/GE for argmax, LT/LE for argmin (ties go to the lower index).
    """
    if len(block.args) != 4:
        return None
    names = [name for name, _ in block.args]
    ret = _returned(block)
    if len(ret) != 2:
        return None
    for ref, (a, b) in zip(ret, ((names[0], names[2]), (names[1], names[3]))):
        sel = _producer(block, ref)
        if sel is None or sel.name != "stablehlo.select" or set(sel.operands[1:]) != {a, b}:
            return None
    for op in block.ops:
        if op.name != "stablehlo.compare":
            continue
        direction = op.attrs.get("comparison_direction")
        text = direction.value if isinstance(direction, Enum) else ""
        if op.operands == [names[0], names[2]] and text in ("GT", "GE", "LT", "LE"):
            return "max" if text in ("GT", "GE") else "min"
        if op.operands == [names[2], names[0]] and text in ("GT", "GE", "LT", "LE"):
            return "min" if text in ("GT", "GE") else "max"
    return None
