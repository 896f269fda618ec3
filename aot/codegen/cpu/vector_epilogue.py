"""A fused epilogue computed on whole vectors: one run of consecutive root elements at once.

A fast body (depthwise, pointwise and packed convs, packed dot) ends each tile with
runs of output elements that are consecutive in the root's row-major order, all at
one (batch, channel) or one matrix row: an output row, a flattened plane, a pixel
run. store_epilogue (epilogue.py) computes the epilogue element by element and
leaves LLVM's SLP vectorizer to rebuild vectors from the copies; for a 56x56 plane
that was 3 MB of IR and 4 s of compile time for one kernel. Here the epilogue is
emitted once per run on <count x f32> vectors:

  - the contraction is the run's accumulator vector (partners: zeros);
  - a value that does not vary along the run (a per-channel bias, a clip bound:
    every op under it broadcasts the run's dims away) is computed once, as the
    scalar path would at the run's first element, and splat;
  - a param of the root's shape (a residual) is one vector load at the run's offset;
  - elementwise f32 ops (add, sub, mul, div, max, min, neg, abs, sqrt, compare,
    select) run on the vectors, and so do exp, log, tanh, logistic and erf (math.py's
    bodies take vectors); other transcendentals call the scalar math function lane by
    lane, as the element path does.

Anything else (other dtypes, index-mapping ops between the contraction and the root,
a leaf that varies along the run in another way) is not vectorizable: store_run then
takes the element path, so every epilogue still compiles, only bigger.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from aot.codegen.constants import constant
from aot.codegen.cpu.body import KernelContext
from aot.codegen.cpu.epilogue import store_epilogue
from aot.codegen.fused_epilogue import Epilogue
from aot.codegen.loops import const_i64
from aot.codegen.math import F32, VECTOR_FUNCTIONS, bounded_minmax, intrinsic
from aot.ir.graph import Node, Value
from aot.ir.ops import ELEMENTWISE
from aot.ir.types import DType

I32 = ir.IntType(32)
_SIMPLE = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
# no floor/ceil/round: without SSE4.1 they become libm calls, which the element path avoids
_VECTOR_INTRINSICS = {"max": "maximum", "min": "minimum", "abs": "fabs", "sqrt": "sqrt"}
_LANE_BY_LANE = {"exp", "log", "tanh", "logistic", "erf", "sin", "cos", "expm1", "log1p", "tan"}
_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class _NotVectorizable(Exception):
    """The epilogue has something store_run cannot compute on vectors."""


def store_run(ctx: KernelContext, epilogue: Epilogue, values: ir.Value | Sequence[ir.Value],
              index_of: Callable[[int], list[ir.Value]], linear0: ir.Value, varying: frozenset[int],
              lanes: Sequence[int] | None = None) -> None:
    """Store root elements linear0 + l for l in `lanes` (default: every lane of `values`).

    `values`: the contraction at those elements, a <n x f32> vector (lane l for element
    linear0 + l) or n scalars. `index_of(l)`: the root index of element linear0 + l (the
    element path needs them all; the vector path only lane 0's). `varying`: the root dims
    whose index changes along the run (an output row: the width; a plane: height and
    width); the others are the same for every lane.
    """
    b = ctx.builder
    count = values.type.count if isinstance(values, ir.Value) else len(values)
    stored = list(range(count)) if lanes is None else list(lanes)
    if vectorizable(ctx, epilogue, varying):
        vector = values if isinstance(values, ir.Value) else _gather(b, values)
        ctx.elemental.push_scope()
        result = _VectorEpilogue(ctx, epilogue, vector, index_of(0), linear0, varying).value(ctx.kernel.root)
        ctx.elemental.pop_scope()
        _store(ctx, result, linear0, stored, count)
        return
    scalars = [b.extract_element(values, I32(lane)) for lane in range(count)] if isinstance(values, ir.Value) else values
    store_epilogue(ctx, epilogue, [(scalars[lane], index_of(lane), b.add(linear0, const_i64(lane), flags=["nuw", "nsw"]))
                                   for lane in stored])


def vectorizable(ctx: KernelContext, epilogue: Epilogue, varying: frozenset[int]) -> bool:
    """Whether the root can be computed on vectors along runs varying in `varying` (no IR emitted)."""
    if ctx.kernel.root.type.dtype is not DType.F32:
        return False
    try:
        _VectorEpilogue(ctx, epilogue, None, [], None, varying).value(ctx.kernel.root)
    except _NotVectorizable:
        return False
    return True


def _gather(b: ir.IRBuilder, scalars: Sequence[ir.Value]) -> ir.Value:
    vector: ir.Value = constant(ir.VectorType(F32, len(scalars)), None)
    for lane, scalar in enumerate(scalars):
        vector = b.insert_element(vector, scalar, I32(lane))
    return vector


def _store(ctx: KernelContext, result: ir.Value, linear0: ir.Value, stored: Sequence[int], count: int) -> None:
    b = ctx.builder
    root = ctx.kernel.root
    if list(stored) == list(range(count)):
        addr = b.bitcast(b.gep(ctx.out_ptr, [linear0], inbounds=True), ir.VectorType(F32, count).as_pointer())
        b.store(result, addr, align=4)
        return
    for lane in stored:  # a partial run: its lanes one by one (the rest is another run's)
        at = b.add(linear0, const_i64(lane), flags=["nuw", "nsw"])
        b.store(b.extract_element(result, I32(lane)), b.gep(ctx.out_ptr, [at], inbounds=True, name=f"{root.name}.out"),
                align=4)


class _VectorEpilogue:
    """The root on one run's vectors. With `contraction` None it is a dry run: it walks the
    same graph, emits nothing and raises _NotVectorizable where the real one would fail."""

    def __init__(self, ctx: KernelContext, epilogue: Epilogue, contraction: ir.Value | None,
                 index0: list[ir.Value], linear0: ir.Value | None, varying: frozenset[int]):
        self.ctx = ctx
        self.b = ctx.builder
        self.epilogue = epilogue
        self.contraction = contraction
        self.index0 = index0
        self.linear0 = linear0
        self.varying = varying
        self.dry = contraction is None
        self.count = 0 if contraction is None else contraction.type.count
        self.shape = ctx.kernel.root.type.shape
        self.fused = ctx.elemental.fused
        self.params = ctx.elemental.params
        self.partners = {id(p.out) for p in epilogue.partners}
        self._done: dict[int, ir.Value | None] = {}
        self._reads: dict[int, bool] = {}

    def value(self, v: Value) -> ir.Value | None:
        if id(v) not in self._done:
            self._done[id(v)] = self._compute(v)
        return self._done[id(v)]

    def _compute(self, v: Value) -> ir.Value | None:
        if v is self.epilogue.contraction.out:
            return self.contraction
        if id(v) in self.partners:
            return None if self.dry else constant(ir.VectorType(F32, self.count), [0.0] * self.count)
        if self.uniform(v):
            if self.dry:
                return None
            scalar = self.ctx.elemental.value(v, self.index0)
            if scalar.type != F32 and v.type.dtype is not DType.BOOL:
                raise _NotVectorizable(f"%{v.name}: {v.type.dtype}")
            return self._splat(scalar)
        if v.type.shape != self.shape:
            raise _NotVectorizable(f"%{v.name} is not of the root's shape")
        if id(v) in self.params or v.producer is None or id(v.producer) not in self.fused:
            if v.type.dtype is not DType.F32 or id(v) not in self.params:
                raise _NotVectorizable(f"%{v.name}: a {v.type.dtype} param")
            if self.dry:
                return None
            addr = self.b.gep(self.params[id(v)], [self.linear0], inbounds=True, name=f"{v.name}.addr")
            vec = ir.VectorType(F32, self.count)
            return self.b.load(self.b.bitcast(addr, vec.as_pointer()), name=f"{v.name}.v", align=4)
        return self._op(v.producer)

    def reads_contraction(self, v: Value) -> bool:
        if id(v) not in self._reads:
            node = v.producer
            self._reads[id(v)] = (v is self.epilogue.contraction.out or id(v) in self.partners or (
                node is not None and id(v) not in self.params and id(node) in self.fused
                and any(self.reads_contraction(x) for x in node.inputs)))
        return self._reads[id(v)]

    def uniform(self, v: Value) -> bool:
        """v is the same at every element of the run (and does not read the contraction)."""
        if self.reads_contraction(v):
            return False
        if all(v.type.shape[d] == 1 for d in self.varying if d < len(v.type.shape)) and v.type.rank == len(self.shape):
            return True
        node = v.producer
        if node is None or id(v) in self.params or id(node) not in self.fused:
            return False
        if node.op == "broadcast":
            (x,) = node.inputs
            dims = list(node.attrs["dims"])
            return all(d not in dims or x.type.shape[dims.index(d)] == 1 for d in self.varying)
        if node.op in ELEMENTWISE:
            return all(self.uniform(x) for x in node.inputs)
        return False

    def _splat(self, scalar: ir.Value) -> ir.Value:
        vec = ir.VectorType(scalar.type, self.count)
        if isinstance(scalar, ir.Constant) and isinstance(scalar.type, ir.FloatType):
            # a constant vector, so that bounded_minmax sees a constant bound
            return constant(vec, [0.0 if scalar.constant is None else scalar.constant] * self.count)
        one = self.b.insert_element(constant(vec, None), scalar, I32(0))
        return self.b.shuffle_vector(one, constant(vec, None), constant(ir.VectorType(I32, self.count), [0] * self.count))

    def _op(self, node: Node) -> ir.Value | None:
        op = node.op
        if op not in ELEMENTWISE:
            raise _NotVectorizable(f"{op} %{node.out.name} between the contraction and the root")
        floats = [x.type.dtype for x in node.inputs if x.type.dtype is not DType.BOOL]
        if any(d is not DType.F32 for d in floats) or node.out.type.dtype not in (DType.F32, DType.BOOL):
            raise _NotVectorizable(f"{op} %{node.out.name} on {node.out.type.dtype}")
        if op == "compare" and node.attrs["direction"] not in _FCMP:
            raise _NotVectorizable(f"compare {node.attrs['direction']}")
        if node.out.type.dtype is DType.BOOL and op != "compare":
            raise _NotVectorizable(f"{op} %{node.out.name} on bool")
        if op == "convert" and node.inputs[0].type.dtype is not node.out.type.dtype:
            raise _NotVectorizable(f"convert %{node.out.name} from {node.inputs[0].type.dtype}")
        if op not in (*_SIMPLE, *_VECTOR_INTRINSICS, *_LANE_BY_LANE, "neg", "copy", "convert", "compare", "select"):
            raise _NotVectorizable(f"{op} %{node.out.name}")
        args = [self.value(x) for x in node.inputs]
        if self.dry:
            return None
        b = self.b
        if op in _SIMPLE:
            return getattr(b, _SIMPLE[op])(*args, name=node.out.name)
        if op in ("max", "min"):
            bounded = bounded_minmax(b, self.ctx.target, op, *args)
            if bounded is not None:
                return bounded
        if op in _VECTOR_INTRINSICS:
            ty = args[0].type
            fn = intrinsic(b.module, f"llvm.{_VECTOR_INTRINSICS[op]}.v{self.count}f32", ty, [ty] * len(args))
            return b.call(fn, args, name=node.out.name)
        if op == "neg":
            return b.fneg(args[0], name=node.out.name)
        if op in ("copy", "convert"):
            return args[0]
        if op == "compare":
            direction = _FCMP[node.attrs["direction"]]
            # as the element path: ordered (false on NaN) except !=, true on NaN
            compare = b.fcmp_unordered if direction == "!=" else b.fcmp_ordered
            return compare(direction, args[0], args[1], name=node.out.name)
        if op == "select":
            return b.select(args[0], args[1], args[2], name=node.out.name)
        # a transcendental: the element path's function, on the vector where its body takes
        # vectors (the same operations per lane, so the same results), else lane by lane
        function = getattr(self.ctx.elemental.lib, op)
        if op in VECTOR_FUNCTIONS:
            return function(b, args[0])
        result: ir.Value = constant(args[0].type, None)
        for lane in range(self.count):
            result = b.insert_element(result, function(b, b.extract_element(args[0], I32(lane))), I32(lane))
        return result
