"""Primitive op set: shape rules and numpy reference semantics.

Importing this package registers every op. Passes test op *sets* below
rather than listing op names.
"""
# importing each op module registers its ops
from aot.ir.ops import checks, elementwise, indexing, linalg, packed, reduction, shape_ops, sorting  # noqa: F401
from aot.ir.ops.elementwise import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY
from aot.ir.ops.packed import PACKED, Packing
from aot.ir.ops.registry import OPS, OpDef, evaluate, get_op, infer_type

# Output element i depends only on input element i (same shape in and out).
ELEMENTWISE = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | {"compare", "select", "convert"}
# Each output element is one input element (or a pad value): pure index maps.
DATA_MOVEMENT = frozenset({"broadcast", "reshape", "transpose", "slice", "concat", "pad", "reverse"})
# Elemental index maps whose positions depend on data (an operand element may
# be read many times, and the index tensor too): not free to recompute.
INDEXING = frozenset({"gather"})
# Ops whose elements are computed from their own indices alone.
GENERATORS = frozenset({"constant", "iota"})
# Ops whose output elements are sums of products of their operands' elements: the
# contractions that fast kernel bodies accelerate (a packed op's weight is laid out
# for them at compile time: ir/ops/packed.py).
MULTIPLY_ADDS = frozenset({"dot", "conv"}) | PACKED
# Ops that combine many input elements into each output element.
CONTRACTIONS = MULTIPLY_ADDS | {"reduce", "reduce_window"}
# Ops with no elemental form (an output element is not a function of its index
# alone, e.g. scatter, sort): always the root of their own kernel, whose body
# emitter (codegen/cpu/bodies.py) computes the whole output.
NON_ELEMENTAL: frozenset[str] = frozenset({"scatter", "sort", "argsort"})
# Ops kept for their effect, not their value (ir/ops/checks.py): roots that DCE
# keeps, never fused into a kernel; codegen evaluates them after the kernels.
CHECKS: frozenset[str] = frozenset({"check"})

__all__ = [
    "OPS", "OpDef", "evaluate", "get_op", "infer_type",
    "ELEMENTWISE", "DATA_MOVEMENT", "INDEXING", "GENERATORS", "CONTRACTIONS", "NON_ELEMENTAL", "CHECKS",
    "MULTIPLY_ADDS", "PACKED", "Packing",
]
