"""The elemental work item: one innermost row of a kernel's root, computed element by element.

A kernel without a body of its own (cpu/bodies.py, nvptx/bodies.py) splits into
`work_items(root)` independent items, the rows of its root's output; item w is
the row at flat index w over every dim but the last. Both back ends run the same
item body: the CPU kernel over a [begin, end) range of items, the GPU "rows" body
one item per thread.
"""
from __future__ import annotations

from llvmlite import ir

from aot.codegen import row_cache
from aot.codegen.elemental import ElementalEmitter
from aot.codegen.loops import const_i64, delinearize, for_range
from aot.ir.graph import Value
from aot.plan import Kernel


def work_items(root: Value) -> int:
    """Rows of the root's output: the product of every dim but the innermost (1 for rank <= 1)."""
    items = 1
    for dim in root.type.shape[:-1]:
        items *= dim
    return items


def emit_work_item(builder: ir.IRBuilder, elemental: ElementalEmitter, kernel: Kernel, out_ptr: ir.Value,
                   item: ir.Value) -> None:
    """The elemental body of work item `item` (an i64): one innermost row of the root's
    output, or its one element at rank 0. Target-neutral: the NVPTX kernels run it too."""
    root = kernel.root
    dtype = root.type.dtype
    shape = root.type.shape
    cache = row_cache.find(kernel)

    def store(linear: ir.Value, index: list[ir.Value]) -> None:
        addr = builder.gep(out_ptr, [linear], inbounds=True, name=f"{root.name}.out")
        if cache is not None:  # the preamble's reduction loop left V's element here
            elemental.substitute(cache.value, builder.load(addr, name=f"{cache.value.name}.cached", align=4))
        value = elemental.value(root, index)
        if cache is not None:
            elemental.substitute(cache.value, None)
        builder.store(elemental.to_storage(value, dtype), addr, align=dtype.itemsize)

    if not shape:
        store(const_i64(0), [])
        return
    inner = shape[-1]
    outer_index = delinearize(builder, item, shape[:-1], "item")
    row = builder.mul(item, const_i64(inner), name="row", flags=["nuw", "nsw"])
    # values invariant in the inner loop (a fused reduction's result) go to the row preamble
    elemental.begin_row(outer_index, row, shape)
    main = builder.append_basic_block(f"{root.name}.main")
    builder.position_at_end(main)
    if cache is not None:
        # hoist the caching reduction now, before the inner loop substitutes V
        elemental.row_cache_fill = (cache.value, out_ptr, row)
        elemental.value(cache.reduce.out, outer_index)
        elemental.row_cache_fill = None
    with for_range(builder, 0, inner, f"{root.name}.j") as j:
        elemental.push_scope()
        store(builder.add(row, j, name=f"{root.name}.at", flags=["nuw", "nsw"]), [*outer_index, j])
        elemental.pop_scope()
    elemental.end_row(main)
