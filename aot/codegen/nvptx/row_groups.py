"""Which kernels a block can compute cooperatively, reduction by reduction (nvptx/reduce.py).

A kernel with fused reductions splits into *groups*: the root's elements that share
their first `outer` index dims. The cooperative body runs one group per (part of a)
block; that is right only where every fused reduction is read, inside a group, at
ONE index that depends on the group alone: then each reduction is one value per
group, computed once by all the group's threads together, and substituted for the
reduce wherever the rest of the kernel reads it.

    softmax [R, N]: root[o, j] = exp(x[o, j] - max[o]) / sum[o]     outer = 1 (a row a group)
    ReduceSum axis 1 of [R, K], keepdims 0: root[o] = sum[o]         outer = 1 (an element a group)

`find` decides it from the IR alone, by walking the kernel from the root with each
index component held as a symbolic expression of the group's dims ("o", d), the
position in the group ("j", d) and the reduction loops ("k", reduce, axis); an index
map that is not a plain permutation (slice, reverse, reshape, gather ...) wraps its
inputs in a term naming the node, so equal expressions are equal indices. A reduce
qualifies where every path reaches it at one expression made of "o" dims only, as
row_cache.py and the elemental emitter's row hoisting (ElementalEmitter._hoist) ask of
a row-invariant reduction, here decided before any code is emitted.

Also required, for a body worth having: each reduction covers its operand's innermost
dim (consecutive threads then read consecutive elements), and its register type is
one a warp shuffle moves (f32, f64, i32, i64; f16/bf16/float8 compute in f32). A
reduction over outer dims only (ReduceSum axis 0 of [4096, 64]) is declined: its
reads would be strided by the row; the column body (columns.py) takes it, a thread or
a block's slice per output element.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from aot.codegen.elemental import register_type
from aot.ir.graph import Node, Value
from aot.ir.ops import DATA_MOVEMENT, ELEMENTWISE, GENERATORS
from aot.plan import Kernel

# register types a warp shuffle moves (nvptx/simt.py _shfl_down)
SHUFFLED = frozenset({"float", "double", "i32", "i64"})
# ops the walk maps indices through; anything else (dot, conv, pooling, sort ...) is declined
WALKED = ELEMENTWISE | DATA_MOVEMENT | GENERATORS | {"reduce", "gather"}

Term = tuple  # a symbolic index component (see the module docstring)
ZERO: Term = ("c", 0)


@dataclass(frozen=True)
class RowGroups:
    """The root's elements in groups sharing index[:outer]: `count` groups of `row` elements
    each; `reduces` are the kernel's reductions in dependency order; `extent` is the
    longest loop a group runs (its row, or a reduced extent)."""

    outer: int
    count: int
    row: int
    reduces: tuple[Node, ...]
    extent: int


def find(kernel: Kernel) -> RowGroups | None:
    """The kernel's groups, finest rows first: a root row per group, else one element."""
    root = kernel.root
    if root.producer is None or root.type.size == 0 or any(n.op not in WALKED for n in kernel.nodes):
        return None
    reduces = tuple(n for n in kernel.nodes if n.op == "reduce")
    if not reduces or not all(_shuffled(r) for r in reduces):
        return None
    for outer in sorted({max(root.type.rank - 1, 0), root.type.rank}):
        if _invariant(kernel, outer, reduces):
            count = _product(root.type.shape[:outer])
            row = _product(root.type.shape[outer:])
            extent = max([row, *(_product(r.inputs[0].type.shape[a] for a in r.attrs["axes"]) for r in reduces)])
            return RowGroups(outer, count, row, reduces, extent)
    return None


def _shuffled(reduce: Node) -> bool:
    (x,) = reduce.inputs
    if x.type.rank == 0 or x.type.rank - 1 not in reduce.attrs["axes"]:
        return False
    return str(register_type(reduce.out.type.dtype)) in SHUFFLED


def _product(dims: Iterator[int] | tuple[int, ...]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


def _invariant(kernel: Kernel, outer: int, reduces: tuple[Node, ...]) -> bool:
    """Every reduce is read at one index, made of the group's dims only."""
    found = requests(kernel, outer)
    if found is None:
        return False
    for r in reduces:
        seen = found.get(id(r))
        if seen is None or len(seen) != 1:
            return False
        (index,) = seen
        if any(symbol[0] != "o" for term in index for symbol in symbols(term)):
            return False
    return True


def requests(kernel: Kernel, outer: int) -> dict[int, set[tuple[Term, ...]]] | None:
    """id(reduce) -> the symbolic indices the root reads it at (None: an op the walk cannot map)."""
    members = {id(n) for n in kernel.nodes}
    root = kernel.root
    start = tuple(("o", d) if d < outer else ("j", d) for d in range(root.type.rank))
    found: dict[int, set[tuple[Term, ...]]] = {}
    seen: set[tuple[int, tuple[Term, ...]]] = set()
    stack: list[tuple[Value, tuple[Term, ...]]] = [(root, start)]
    while stack:
        value, index = stack.pop()
        if (id(value), index) in seen:
            continue
        seen.add((id(value), index))
        node = value.producer
        if node is None or id(node) not in members:
            continue  # a param: read from memory
        if node.op == "reduce":
            found.setdefault(id(node), set()).add(index)
        stack.extend(_operand_indices(node, index))
    return found


def _operand_indices(node: Node, index: tuple[Term, ...]) -> list[tuple[Value, tuple[Term, ...]]]:
    """The index each operand of `node` is read at when `node` is read at `index`, as
    codegen/elemental.py's emitter for the op computes it."""
    op, attrs, inputs = node.op, node.attrs, node.inputs
    if op in ELEMENTWISE:
        return [(x, index) for x in inputs]
    if op in GENERATORS:
        return []
    if op == "broadcast":
        (x,) = inputs
        return [(x, tuple(index[d] if x.type.shape[i] != 1 else ZERO for i, d in enumerate(attrs["dims"])))]
    if op == "transpose":
        sub = [ZERO] * len(index)
        for i, p in enumerate(attrs["perm"]):
            sub[p] = index[i]
        return [(inputs[0], tuple(sub))]
    if op == "reshape":
        (x,) = inputs
        in_shape, out_shape = x.type.shape, node.out.type.shape
        if [d for d in in_shape if d != 1] == [d for d in out_shape if d != 1]:
            moving = iter(i for i, d in zip(index, out_shape) if d != 1)
            return [(x, tuple(next(moving) if d != 1 else ZERO for d in in_shape))]
        return [(x, tuple(("f", id(node), d, index) for d in range(len(in_shape))))]
    if op == "reduce":
        (x,) = inputs
        kept = iter(index)
        return [(x, tuple(("k", id(node), d) if d in attrs["axes"] else next(kept) for d in range(x.type.rank)))]
    if op in ("slice", "reverse", "pad"):
        # each operand dim is a function of the same output dim alone
        return [(inputs[0], tuple(("f", id(node), d, (t,)) for d, t in enumerate(index)))]
    if op == "concat":
        axis = attrs["axis"]
        return [(x, tuple(("f", id(node), n, (t,)) if d == axis else t for d, t in enumerate(index)))
                for n, x in enumerate(inputs)]
    # gather: positions read from data; every operand index may depend on every output dim
    return [(x, tuple(("f", id(node), n, d, index) for d in range(x.type.rank))) for n, x in enumerate(inputs)]


def symbols(term: Term) -> Iterator[Term]:
    """The "o", "j" and "k" leaves of a term."""
    if term[0] in ("o", "j", "k"):
        yield term
    elif term[0] == "f":
        for part in term[1:]:
            if isinstance(part, tuple):
                for inner in part:
                    if isinstance(inner, tuple):
                        yield from symbols(inner)

