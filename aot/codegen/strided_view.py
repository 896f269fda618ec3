"""Where a kernel reads an operand through fused data movement: a strided view of a param.

A dot body that loads its operands itself (cpu/dot_dynamic.py, nvptx/gemm.py) needs
each operand as param[offset + sum(index[d] * strides[d])]; transposes, slices,
broadcasts, reverses and the reshapes that keep strides affine fold into that view.
"""
from __future__ import annotations

from dataclasses import dataclass

from aot.ir.graph import Node, Value


@dataclass(frozen=True)
class StridedView:
    """value[index] = param[offset + sum(index[d] * strides[d])], in elements."""

    param: Value
    offset: int
    strides: tuple[int, ...]

    @staticmethod
    def of(v: Value, params: set[int], fused: set[int]) -> StridedView | None:
        """The view of `v` through fused data movement down to a kernel param, or None if not affine."""
        if id(v) in params:
            return StridedView(v, 0, _row_major(v.type.shape))
        node = v.producer
        if node is None or id(node) not in fused or node.op not in _VIEW_RULES:
            return None
        source = StridedView.of(node.inputs[0], params, fused)
        if source is None:
            return None
        return _VIEW_RULES[node.op](node, source)


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def _transpose(node: Node, src: StridedView) -> StridedView:
    # out dim i is in dim perm[i]
    return StridedView(src.param, src.offset, tuple(src.strides[p] for p in node.attrs["perm"]))


def _slice(node: Node, src: StridedView) -> StridedView:
    offset = src.offset + sum(s * st for s, st in zip(node.attrs["start"], src.strides))
    return StridedView(src.param, offset, tuple(st * step for st, step in zip(src.strides, node.attrs["stride"])))


def _broadcast(node: Node, src: StridedView) -> StridedView | None:
    # operand dim d lands on out dim dims[d]; new dims and expanded size-1 dims read one element
    strides = [0] * node.out.type.rank
    in_shape = node.inputs[0].type.shape
    for d, out_dim in enumerate(node.attrs["dims"]):
        if in_shape[d] == node.out.type.shape[out_dim]:
            strides[out_dim] = src.strides[d]
    return StridedView(src.param, src.offset, tuple(strides))


def _reverse(node: Node, src: StridedView) -> StridedView:
    shape = node.out.type.shape
    flipped = node.attrs["dims"]
    offset = src.offset + sum((shape[d] - 1) * src.strides[d] for d in flipped)
    return StridedView(src.param, offset, tuple(-s if d in flipped else s for d, s in enumerate(src.strides)))


def _reshape(node: Node, src: StridedView) -> StridedView | None:
    """numpy's no-copy reshape: split dims freely, merge only dims that are contiguous with each other."""
    new_shape = node.out.type.shape
    if node.out.type.size == 0:
        return StridedView(src.param, src.offset, (0,) * len(new_shape))
    old = [(d, s) for d, s in zip(node.inputs[0].type.shape, src.strides) if d != 1]
    new = [(i, d) for i, d in enumerate(new_shape) if d != 1]
    strides = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        oj, nj = oi + 1, ni + 1
        old_size, new_size = old[oi][0], new[ni][1]
        while old_size != new_size:
            if old_size < new_size:
                old_size *= old[oj][0]
                oj += 1
            else:
                new_size *= new[nj][1]
                nj += 1
        # the merged old dims [oi, oj) must form one contiguous run
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        step = old[oj - 1][1]
        for k in reversed(range(ni, nj)):
            strides[new[k][0]] = step
            step *= new[k][1]
        oi, ni = oj, nj
    return StridedView(src.param, src.offset, tuple(strides))


_VIEW_RULES = {"transpose": _transpose, "slice": _slice, "broadcast": _broadcast, "reverse": _reverse,
               "reshape": _reshape}
