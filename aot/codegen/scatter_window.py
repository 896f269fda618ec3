"""Where one scatter update lands, for the scatter bodies of both back ends.

An update at scatter position `scatter_index` writes a window of the operand: its
start along each operand dim comes from the index vector (start_index_map), the
batching index, or 0, and the window is applied only if it lies wholly inside the
operand (aot/ir/ops/indexing.py). Within the window, element `window_index` of the
update lands at start + window offset.
"""
from __future__ import annotations

from llvmlite import ir

from aot.codegen.constants import constant
from aot.codegen.elemental import ZERO, ElementalEmitter, index_as_i64
from aot.codegen.loops import const_i64, linearize
from aot.ir.graph import Node
from aot.ir.ops.indexing import ScatterDims

# scatter kind -> the elemental emitter's combine kind
COMBINE_KIND = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


def window_origin(b: ir.IRBuilder, e: ElementalEmitter, node: Node, dims: ScatterDims,
                  scatter_index: list[ir.Value], name: str) -> tuple[list[ir.Value], ir.Value]:
    """The operand index where the update at `scatter_index` starts, and whether its window fits."""
    operand, indices, _ = node.inputs
    start_map, batching_map = dims.start_map(), dims.batching_map()
    starts, checks = [], []
    for d in range(operand.type.rank):
        if d in start_map:
            at = list(scatter_index)
            if dims.index_vector_dim < indices.type.rank:
                at.insert(dims.index_vector_dim, const_i64(start_map[d]))
            start = index_as_i64(e, e.value(indices, at), indices.type.dtype)
            # 0 <= start <= dim - window (one unsigned compare covers both)
            room = operand.type.shape[d] - dims.window_extent(d)
            checks.append(b.icmp_unsigned("<=", start, const_i64(room), name=f"{name}.fits{d}"))
        elif d in batching_map:
            start = scatter_index[batching_map[d]]
        else:
            start = ZERO
        starts.append(start)
    fits = e.all_of(checks)
    return starts, fits if fits is not None else constant(ir.IntType(1), 1)


def update_element(b: ir.IRBuilder, node: Node, dims: ScatterDims, starts: list[ir.Value],
                   scatter_index: list[ir.Value], window_index: list[ir.Value], name: str) -> tuple[list[ir.Value], ir.Value]:
    """The index of the update element at `window_index` of the window at `scatter_index`, and
    the linear operand offset it lands on."""
    operand, _, updates = node.inputs
    update_index: list[ir.Value] = [ZERO] * updates.type.rank
    for d, i in zip(dims.update_scatter_dims, scatter_index):
        update_index[d] = i
    for d, i in zip(dims.update_window_dims, window_index):
        update_index[d] = i
    offsets = dict(zip(dims.window_operand_dims, window_index))
    target = [b.add(start, offsets[d]) if d in offsets else start for d, start in enumerate(starts)]
    return update_index, linearize(b, target, operand.type.shape, name)
