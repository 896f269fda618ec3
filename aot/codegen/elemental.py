"""Elemental IR emission (as XLA's ElementalIrEmitter): the scalar of a value at a multi-index.

`ElementalEmitter.value(v, index)` returns the element of `v` at `index`
(a list of i64 LLVM values), in its register type. A kernel's params are
loads from their buffers; fused nodes are generated inline, recursively:
index-mapping ops remap the index, elementwise ops combine operand scalars,
contractions loop over their contracted/window dims with an accumulator.

Register types: f16, bf16 and float8 compute in f32 and are rounded back to
their own precision after every op (as the reference does); float8 reads
through a 256-entry table and writes by bit manipulation, saturating (ONNX
Cast's default: see f32_to_float8); unsigned ints share the signless LLVM
int types and use unsigned compares, divisions and conversions; bool is i1 in
registers and one byte in memory. Out-of-bounds positions (pad, concat,
conv padding) clamp their index and select, so no branch and no stray read.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from aot.codegen import math as m
from aot.codegen.constants import constant
from aot.codegen.loops import I64, const_i64, delinearize, for_nest, for_range, linearize
from aot.codegen.arith_target import ArithTarget
from aot.errors import CodegenError
from aot.ir.graph import Node, Value
from aot.ir.types import FLOAT8_FORMATS, DType, SIGNED_DTYPES, UNSIGNED_DTYPES, float8_saturate
from aot.ir.ops.indexing import GatherDims
from aot.ir.ops.linalg import conv_lhs_dilation, dot_free_dims
from aot.ir.ops.packed import Packing
from aot.ir.ops.reduction import reduce_identity, window_dilations

ZERO = const_i64(0)
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
HALF = ir.HalfType()
# fast-math flags for accumulations: reassociation lets LLVM vectorize them; no nnan/ninf
ACCUMULATE = ("reassoc", "contract")
# independent accumulators of a float max/min reduction (ElementalEmitter.accumulate_unrolled)
REDUCE_UNROLL = 8

_REGISTER = {
    DType.F16: m.F32, DType.BF16: m.F32, DType.F32: m.F32, DType.F64: m.F64,
    DType.I8: I8, DType.U8: I8, DType.I16: I16, DType.I32: ir.IntType(32), DType.I64: I64, DType.BOOL: I1,
    DType.U16: I16, DType.U32: ir.IntType(32), DType.U64: I64,
    DType.F8E4M3FN: m.F32, DType.F8E4M3FNUZ: m.F32, DType.F8E5M2: m.F32, DType.F8E5M2FNUZ: m.F32,
}
_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def register_type(dtype: DType) -> ir.Type:
    return _REGISTER[dtype]


def storage_type(dtype: DType, target: ArithTarget) -> ir.Type:
    if dtype is DType.F16:
        return HALF if target.native_f16 else I16
    if dtype is DType.BF16:
        return I16
    if dtype is DType.BOOL or dtype.is_float8:
        return I8
    return _REGISTER[dtype]


# -- float8 -------------------------------------------------------------------------
def float8_to_f32(b: ir.IRBuilder, bits: ir.Value, dtype: DType, name: str) -> ir.Value:
    """Exact: a load from a private 256-entry f32 table of the format's values."""
    module = b.module
    symbol = f"aot.{dtype.value}.table"
    table = module.globals.get(symbol)
    if table is None:
        values = np.arange(256, dtype=np.uint8).view(dtype.to_numpy()).astype(np.float32)
        ty = ir.ArrayType(m.F32, 256)
        table = ir.GlobalVariable(module, ty, name=symbol)
        table.linkage = "private"
        table.global_constant = True
        table.initializer = constant(ty, [float(v) for v in values])
        table.align = 64
    slot = b.gep(table, [ZERO, b.zext(bits, I64)], inbounds=True, name=f"{name}.f8slot")
    return b.load(slot, name=name, align=4)


def f32_to_float8(lib: m.MathLib, b: ir.IRBuilder, x: ir.Value, dtype: DType, saturate: bool = False) -> ir.Value:
    """Round to nearest even. Values that round past the largest finite value, and infinities,
    give infinity (e5m2) or NaN (the others), as ml_dtypes' astype and ONNX Cast with saturate=0;
    saturate: they give the largest finite value of x's sign. NaN gives NaN."""
    fmt = FLOAT8_FORMATS[dtype]
    i32 = ir.IntType(32)
    bits = b.bitcast(x, i32)
    sign = b.trunc(b.lshr(bits, i32(31)), I8)
    magnitude_bits = b.and_(bits, i32(0x7FFFFFFF))
    magnitude = b.bitcast(magnitude_bits, m.F32)
    # normal range: round the f32 mantissa to fmt.mantissa bits (a carry bumps the exponent)
    shift = 23 - fmt.mantissa
    lsb = b.and_(b.lshr(magnitude_bits, i32(shift)), i32(1))
    rounded = b.add(magnitude_bits, b.add(i32((1 << (shift - 1)) - 1), lsb))
    normal = b.sub(b.lshr(rounded, i32(shift)), i32((127 - fmt.bias) << fmt.mantissa))
    # subnormal range: |x| / (smallest subnormal), rounded to even (2**mantissa is the smallest normal's code)
    scaled = b.fmul(magnitude, constant(m.F32, 2.0 ** (fmt.bias - 1 + fmt.mantissa)))
    even = lib.roundeven(b, scaled)  # llvm.roundeven is a roundevenf call without SSE4.1
    subnormal = b.fptoui(even, i32)
    smallest_normal = constant(m.F32, 2.0 ** (1 - fmt.bias))
    code = b.select(b.fcmp_ordered("<", magnitude, smallest_normal), subnormal, normal)
    overflow = b.icmp_unsigned(">", code, i32(fmt.max_code))
    if saturate:
        past = i32(fmt.max_code)
    elif fmt.inf_code is not None:
        past = i32(fmt.inf_code)
    else:
        past = i32(fmt.nan_code)
    code = b.trunc(b.select(overflow, past, code), I8)
    if fmt.fnuz:
        # no -0; 0x80 is NaN, so a negative value that rounds to 0 is +0, and NaN carries no sign
        negative = b.and_(b.icmp_unsigned("!=", sign, I8(0)), b.icmp_unsigned("!=", code, I8(0)))
        nan_or_code = b.select(b.icmp_unsigned("==", code, I8(fmt.nan_code)), code, b.or_(code, I8(0x80)))
        signed = b.select(negative, nan_or_code, code)
        nan = I8(fmt.nan_code)
    else:
        signed = b.or_(code, b.shl(sign, I8(7)))
        nan = b.or_(I8(fmt.nan_code), b.shl(sign, I8(7)))
    is_nan = b.fcmp_unordered("uno", x, x)
    return b.select(is_nan, nan, signed, name="f8.bits")


def _narrowed_from_f64(value: ir.Value) -> bool:
    """Whether `value` is an fptrunc of an f64 (a COMPUTED_IN_F64 result, a convert from f64)."""
    if not isinstance(value, ir.CastInstr) or value.opname != "fptrunc":
        return False
    return isinstance(value.operands[0].type, ir.DoubleType)


def where(node: Node) -> str:
    return f"node %{node.out.name} from {node.loc or '<unknown>'}"


def no_lowering(node: Node, dtype: DType | None = None) -> CodegenError:
    dtype = dtype or node.out.type.dtype
    return CodegenError(f"no cpu lowering for {node.op} {dtype.value} ({where(node)})")


Emitter = Callable[["ElementalEmitter", Node, list[ir.Value]], ir.Value]
EMITTERS: dict[str, Emitter] = {}


def emits(*ops: str):
    def register(fn: Emitter) -> Emitter:
        for op in ops:
            EMITTERS[op] = fn
        return fn

    return register


def _index_key(i: ir.Value) -> object:
    """Identity of an index value for the element cache: constants by value (emitters make
    their own zeros for unit dims), everything else by object."""
    if isinstance(i, ir.Constant):
        return ("constant", i.constant)
    return id(i)


class ElementalEmitter:
    """Emits elements of one kernel's values into `builder`'s current position.

    `params` maps id(value) -> typed element pointer (set up by the kernel);
    `fused` holds id() of the nodes generated inline; `alloca` adds an
    accumulator slot to the function's entry block.
    """

    def __init__(
        self, builder: ir.IRBuilder, lib: m.MathLib, target: ArithTarget,
        params: dict[int, ir.Value], fused: set[int], alloca: Callable[[ir.Type, str], ir.Value],
    ):
        self.b = builder
        self.lib = lib
        self.target = target
        self.params = params
        self.fused = fused
        self.alloca = alloca
        # cache of (value, index) -> scalar, one scope per loop level: an entry is only
        # reused where it dominates (same or enclosing loop body)
        self._scopes: list[dict[tuple[int, ...], tuple[Sequence[ir.Value], ir.Value]]] = [{}]
        # id(value) -> the scalar value() returns for it at any index (see substitute)
        self._substitutes: dict[int, ir.Value] = {}
        # row hoisting (set by begin_row): values whose index is made only of the row's
        # index values and constants do not change in the inner loop; they are emitted
        # once per row into a preamble chain of blocks that runs before the inner loop
        self._row_ids: set[int] = set()
        self._row_scope = 0
        self._preamble: ir.Block | None = None
        self._row_start: tuple[tuple[ir.Value, ...], ir.Value, tuple[int, ...]] | None = None
        # row caching (codegen/row_cache.py): while set, the reduction loop over this
        # value's row also stores each element at pointer + row start + position
        self.row_cache_fill: tuple[Value, ir.Value, ir.Value] | None = None
        self._hoisting = 0  # > 0 while a preamble segment is emitted

    # -- entry point -------------------------------------------------------------
    def value(self, v: Value, index: Sequence[ir.Value]) -> ir.Value:
        if self.substituted(v):
            return self._substitutes[id(v)]
        key = (id(v), *(_index_key(i) for i in index))
        for scope in reversed(self._scopes):
            hit = scope.get(key)
            if hit is not None:
                return hit[1]
        if self._preamble is not None and self._row_invariant(index):
            return self._hoist(v, index, key)
        result = self._compute(v, index)
        self._scopes[-1][key] = (tuple(index), result)
        return result

    def _compute(self, v: Value, index: Sequence[ir.Value]) -> ir.Value:
        if id(v) in self.params:
            return self.load(v, index)
        if v.producer is None or id(v.producer) not in self.fused:
            raise CodegenError(f"value %{v.name} is neither a param nor a fused node of its kernel")
        node = v.producer
        emitter = EMITTERS.get(node.op)
        if emitter is None:
            raise no_lowering(node)
        result = emitter(self, node, list(index))
        if isinstance(result, ir.Instruction) and not result.name:
            result.name = v.name  # dumps read like the graph
        return result

    # -- row hoisting ---------------------------------------------------------------
    def begin_row(self, row_index: Sequence[ir.Value], row_start: ir.Value | None = None,
                  shape: Sequence[int] = ()) -> None:
        """Start a row: the builder's current (open) block becomes the preamble chain.

        `row_start` (the row's linear offset in the root, of `shape`): a value of the root's
        shape read in this row is addressed as row_start + j rather than re-linearized from
        the delinearized row index, which LLVM cannot always see through (a [1, 4, 1500,
        1500] softmax ran 1.7x slower than a [4, 1500, 1500] one).
        """
        self._row_ids = {id(i) for i in row_index}
        self._row_start = (tuple(row_index), row_start, tuple(shape)) if row_start is not None else None
        self._preamble = self.b.block
        self.push_scope()
        self._row_scope = len(self._scopes) - 1

    def end_row(self, main: ir.Block) -> None:
        """Close the preamble chain into `main` (the inner loop's entry); keep the builder where it was."""
        assert self._preamble is not None
        resume = self.b.block
        self.b.position_at_end(self._preamble)
        self.b.branch(main)
        self.b.position_at_end(resume)
        self._preamble = None
        self._row_ids = set()
        self._row_start = None
        self.pop_scope()

    def _row_invariant(self, index: Sequence[ir.Value]) -> bool:
        return all(isinstance(i, ir.Constant) or id(i) in self._row_ids for i in index)

    def _hoist(self, v: Value, index: Sequence[ir.Value], key: tuple[int, ...]) -> ir.Value:
        """Emit `v` at a row-invariant index into a new preamble segment, cached for the whole row.

        Values this one needs that are row-invariant too are hoisted while it is
        emitted: they land in the chain before this segment, so they dominate it.
        """
        assert self._preamble is not None
        resume = self.b.block
        segment = self.b.append_basic_block(f"{v.name}.row")
        self.b.position_at_end(segment)
        self._hoisting += 1
        try:
            result = self._compute(v, index)  # nested hoists extend the chain before `segment`
        finally:
            self._hoisting -= 1
        end = self.b.block
        self.b.position_at_end(self._preamble)
        self.b.branch(segment)
        self._preamble = end
        self.b.position_at_end(resume)
        self._scopes[self._row_scope][key] = (tuple(index), result)
        return result

    def substitute(self, v: Value, scalar: ir.Value | None) -> None:
        """Make value(v, ...) return `scalar` (None: compute v again).

        For fast dot/conv kernels: they compute the contraction themselves and
        run the fused epilogue elementally on each result; the caller must ask
        only for the root element that reads v at the scalar's own index.
        """
        if scalar is None:
            self._substitutes.pop(id(v), None)
        else:
            self._substitutes[id(v)] = scalar

    def push_scope(self) -> None:
        self._scopes.append({})

    def pop_scope(self) -> None:
        self._scopes.pop()

    # -- memory -------------------------------------------------------------------
    def load(self, v: Value, index: Sequence[ir.Value]) -> ir.Value:
        linear = self._row_linear(v, index)
        if linear is None:
            linear = linearize(self.b, index, v.type.shape, v.name)
        return self.load_at(v, linear)

    def substituted(self, v: Value) -> bool:
        """value(v) returns a substitute here (never in the row preamble, which runs before any)."""
        return id(v) in self._substitutes and not self._hoisting

    def load_at(self, v: Value, linear: ir.Value) -> ir.Value:
        """The element of param `v` at row-major offset `linear`."""
        ptr = self.params[id(v)]
        addr = self.b.gep(ptr, [linear], inbounds=True, name=f"{v.name}.addr")
        raw = self.b.load(addr, name=f"{v.name}.raw", align=v.type.dtype.itemsize)
        return self.from_storage(raw, v.type.dtype, v.name)

    def _row_linear(self, v: Value, index: Sequence[ir.Value]) -> ir.Value | None:
        """row_start + index[-1] where v has the root's shape and `index` lies in the current row."""
        if self._row_start is None:
            return None
        row_index, row_start, shape = self._row_start
        if v.type.shape != shape or len(index) != len(row_index) + 1:
            return None
        if any(_index_key(a) != _index_key(b) for a, b in zip(index, row_index)):
            return None
        return self.b.add(row_start, index[-1], name=f"{v.name}.at", flags=["nuw", "nsw"])

    def from_storage(self, raw: ir.Value, dtype: DType, name: str) -> ir.Value:
        if dtype is DType.F16:
            if self.target.native_f16:
                return self.b.fpext(raw, m.F32, name=name)
            return m.f16_bits_to_f32(self.lib, self.b, raw)
        if dtype is DType.BF16:
            return m.bf16_bits_to_f32(self.b, raw)
        if dtype.is_float8:
            return float8_to_f32(self.b, raw, dtype, name)
        if dtype is DType.BOOL:
            return self.b.icmp_unsigned("!=", raw, I8(0), name=name)
        return raw

    def to_storage(self, value: ir.Value, dtype: DType) -> ir.Value:
        if dtype is DType.F16:
            if not self.target.native_f16:
                return m.f32_to_f16_bits(self.lib, self.b, value)
            if _narrowed_from_f64(value):
                # x86 instruction selection merges fptrunc f64 -> f32 -> f16 (when a copysign sits
                # between) into one f64 -> f16 fptrunc: a call to libgcc's __truncdfhf2, which the
                # loader cannot resolve, and one rounding where the graph asks for two. Rounding
                # the f32 bits as integers keeps both roundings and vectorizes.
                return self.b.bitcast(m.f32_to_f16_bits(self.lib, self.b, value), HALF)
            return self.b.fptrunc(value, HALF)
        if dtype is DType.BF16:
            return m.f32_to_bf16_bits(self.b, value)
        if dtype.is_float8:
            return f32_to_float8(self.lib, self.b, value, dtype)
        if dtype is DType.BOOL:
            return self.b.zext(value, I8)
        return value

    def round_to(self, value: ir.Value, dtype: DType) -> ir.Value:
        """Round an f32 register value to the precision of f16/bf16/float8 (no-op otherwise)."""
        if dtype.is_narrow_float:
            return self.from_storage(self.to_storage(value, dtype), dtype, "rounded")
        return value

    def round_from_f64(self, value: ir.Value, dtype: DType) -> ir.Value:
        """An f64 value rounded once to float `dtype`, in its register type. f16/bf16/float8 go
        through f32 rounded to odd: rounding to nearest twice (to f32, then to dtype) can land on
        the other side of a tie of dtype."""
        if dtype is DType.F64:
            return value
        if dtype is DType.F32:
            return self.b.fptrunc(value, m.F32)
        return self.round_to(m.f64_to_f32_odd(self.b, value), dtype)

    # -- scalars --------------------------------------------------------------------
    def immediate(self, dtype: DType, value: float | int | bool) -> ir.Constant:
        """An LLVM constant of `dtype`'s register type holding `value` converted as numpy would."""
        if dtype.is_float8:
            # an infinity here is a reduction identity, held in the f32 register as it is
            wide = float(value)
            if not math.isinf(wide):
                with np.errstate(all="ignore"):
                    wide = float(np.array(wide).astype(dtype.to_numpy()).astype(np.float32))
            return constant(register_type(dtype), wide)
        with np.errstate(all="ignore"):
            scalar = np.array(value).astype(dtype.to_numpy()).item()
        ty = register_type(dtype)
        if dtype.is_float:
            return constant(ty, float(scalar))
        bits = ty.width
        wrapped = int(scalar) & ((1 << bits) - 1)
        if bits > 1 and wrapped >= 1 << (bits - 1):
            wrapped -= 1 << bits
        return constant(ty, wrapped)

    def convert(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        b = self.b
        if src is dst:
            return v
        if dst is DType.BOOL:
            if src.is_float:
                return b.fcmp_unordered("!=", v, constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, constant(v.type, 0))
        dst_ty = register_type(dst)
        if src.is_float and dst.is_float:
            if src is DType.F64 and dst in (DType.F16, DType.BF16):
                return self.round_from_f64(v, dst)
            if src is DType.F64 and dst.is_float8:
                v = m.f64_to_f32_odd(b, v)  # single correct rounding
            elif isinstance(v.type, ir.DoubleType) and not isinstance(dst_ty, ir.DoubleType):
                v = b.fptrunc(v, dst_ty)
            elif not isinstance(v.type, ir.DoubleType) and isinstance(dst_ty, ir.DoubleType):
                v = b.fpext(v, dst_ty)
            if dst.is_float8:
                v = self.float8_clamp(v, dst)
            return self.round_to(v, dst)
        if src.is_float:
            sat = "fptoui.sat" if dst in UNSIGNED_DTYPES else "fptosi.sat"
            suffix = "f64" if isinstance(v.type, ir.DoubleType) else "f32"
            fn = m.intrinsic(b.module, f"llvm.{sat}.i{dst_ty.width}.{suffix}", dst_ty, [v.type])
            return b.call(fn, [v])
        signed = src in SIGNED_DTYPES
        if dst.is_float:
            f = b.sitofp(v, dst_ty) if signed else b.uitofp(v, dst_ty)
            return self.round_to(f, dst)
        if dst_ty.width > v.type.width:
            return b.sext(v, dst_ty) if signed else b.zext(v, dst_ty)
        if dst_ty.width < v.type.width:
            return b.trunc(v, dst_ty)
        return v

    def float8_clamp(self, v: ir.Value, dtype: DType) -> ir.Value:
        """convert to float8 saturates (ONNX Cast's default): clamp to the largest finite value in f32
        first, then the rounding cannot overflow; NaN compares false and passes through."""
        limit = float(float8_saturate(np.array(np.inf), dtype).astype(np.float32))
        high, low = constant(v.type, limit), constant(v.type, -limit)
        v = self.b.select(self.b.fcmp_ordered(">", v, high), high, v)
        return self.b.select(self.b.fcmp_ordered("<", v, low), low, v)

    def combine(self, kind: str, acc: ir.Value, x: ir.Value, dtype: DType) -> ir.Value:
        """One step of a reduction of `kind` (sum, prod, max, min) in register type."""
        b = self.b
        if dtype is DType.BOOL:
            return b.or_(acc, x) if kind in ("sum", "max") else b.and_(acc, x)
        if dtype.is_float:
            if kind == "sum":
                return b.fadd(acc, x, flags=ACCUMULATE)
            if kind == "prod":
                return b.fmul(acc, x, flags=ACCUMULATE)
            return self.lib.maximum(b, acc, x) if kind == "max" else self.lib.minimum(b, acc, x)
        if kind == "sum":
            return b.add(acc, x)
        if kind == "prod":
            return b.mul(acc, x)
        return self.int_minmax(kind, acc, x, dtype)

    def int_minmax(self, kind: str, a: ir.Value, c: ir.Value, dtype: DType) -> ir.Value:
        op = ">" if kind == "max" else "<"
        if dtype in SIGNED_DTYPES:
            pick = self.b.icmp_signed(op, a, c)
        else:
            pick = self.b.icmp_unsigned(op, a, c)
        return self.b.select(pick, a, c)

    def in_bounds(self, position: ir.Value, size: int, name: str) -> tuple[ir.Value, ir.Value]:
        """(0 <= position < size, position clamped to 0 when out of bounds)."""
        ok = self.b.icmp_unsigned("<", position, const_i64(size), name=f"{name}.inb")
        return ok, self.b.select(ok, position, ZERO, name=f"{name}.clamp")

    def dilated_in_bounds(self, position: ir.Value, size: int, dilation: int, name: str) -> tuple[ir.Value, ir.Value]:
        """In a dimension of `size` elements spread `dilation` apart: (position hits an element,
        that element's index, clamped to 0 when it does not)."""
        if dilation == 1:
            return self.in_bounds(position, size, name)
        ok, clamped = self.in_bounds(position, (size - 1) * dilation + 1, name)
        on_element = self.b.icmp_unsigned("==", self.b.urem(clamped, const_i64(dilation)), ZERO, name=f"{name}.hit")
        ok = self.b.and_(ok, on_element)
        element = self.b.udiv(clamped, const_i64(dilation), name=f"{name}.elem")
        return ok, self.b.select(ok, element, ZERO, name=f"{name}.clamp")

    def all_of(self, conditions: Sequence[ir.Value]) -> ir.Value | None:
        result = None
        for cond in conditions:
            result = cond if result is None else self.b.and_(result, cond)
        return result

    def accumulate_unrolled(self, node: Node, extent: int, unroll: int, init: ir.Value,
                            step: Callable[[ir.Value, ir.Value], ir.Value],
                            merge: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
        """accumulate_loop over one axis with `unroll` independent accumulators (acc[k % unroll]),
        merged at the end. Each trip computes `unroll` consecutive elements as isomorphic
        chains that LLVM's SLP vectorizer turns into vector code, even where the loop
        vectorizer refuses (a max over select(mask, x, -inf) folds into a select on the
        accumulator, which it cannot vectorize). Only for kinds whose order does not
        matter: float max/min are associative, and the float sum is already `reassoc`."""
        name = node.out.name
        slots = [self.alloca(init.type, f"{name}.acc{u}") for u in range(unroll)]
        for slot in slots:
            self.b.store(init, slot)
        blocks = extent // unroll
        with for_range(self.b, 0, blocks, f"{name}.kb") as block:
            self.push_scope()
            base = self.b.mul(block, const_i64(unroll), flags=["nuw", "nsw"])
            for u, slot in enumerate(slots):
                k = self.b.add(base, const_i64(u), name=f"{name}.k{u}", flags=["nuw", "nsw"])
                self.b.store(step(k, self.b.load(slot)), slot)
            self.pop_scope()
        if extent % unroll:
            self.push_scope()
            with for_range(self.b, blocks * unroll, extent, f"{name}.kt") as k:
                self.b.store(step(k, self.b.load(slots[0])), slots[0])
            self.pop_scope()
        acc = self.b.load(slots[0])
        for slot in slots[1:]:
            acc = merge(acc, self.b.load(slot))
        return acc

    def accumulate_loop(self, node: Node, extents: Sequence[int], init: ir.Value,
                        step: Callable[[list[ir.Value], ir.Value], ir.Value]) -> ir.Value:
        """acc = init; for idx in nest(extents): acc = step(idx, acc); returns acc."""
        name = node.out.name
        slot = self.alloca(init.type, f"{name}.acc")
        self.b.store(init, slot)
        self.push_scope()
        with for_nest(self.b, list(extents), f"{name}.k") as loop_index:
            acc = self.b.load(slot, name=f"{name}.acc")
            self.b.store(step(loop_index, acc), slot)
        self.pop_scope()
        return self.b.load(slot, name=f"{name}.sum")


# == index-mapping ops ===============================================================
@emits("constant")
def _constant(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    array: np.ndarray = node.attrs["value"]
    dtype = node.out.type.dtype
    if array.size == 1:
        return e.immediate(dtype, array.reshape(-1)[0].item())
    module = e.b.module
    symbol = f"const.{node.out.name}"
    glob = module.globals.get(symbol)
    if glob is None:
        data = bytearray(np.ascontiguousarray(array).tobytes())
        glob = ir.GlobalVariable(module, ir.ArrayType(I8, len(data)), name=symbol)
        glob.linkage = "private"
        glob.global_constant = True
        glob.initializer = constant(ir.ArrayType(I8, len(data)), data)
        glob.align = 64
    ptr = e.b.bitcast(glob, storage_type(dtype, e.target).as_pointer(), name=f"{symbol}.ptr")
    linear = linearize(e.b, index, node.out.type.shape, node.out.name)
    raw = e.b.load(e.b.gep(ptr, [linear], inbounds=True), name=f"{node.out.name}.raw", align=dtype.itemsize)
    return e.from_storage(raw, dtype, node.out.name)


@emits("iota")
def _iota(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    return e.convert(index[node.attrs["dim"]], DType.I64, node.out.type.dtype)


@emits("broadcast")
def _broadcast(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    (x,) = node.inputs
    sub = [index[d] if x.type.shape[i] != 1 else ZERO for i, d in enumerate(node.attrs["dims"])]
    return e.value(x, sub)


@emits("reshape")
def _reshape(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    (x,) = node.inputs
    in_shape, out_shape = x.type.shape, node.out.type.shape
    if [d for d in in_shape if d != 1] == [d for d in out_shape if d != 1]:
        # only unit dims inserted or removed: map the non-unit dims one to one
        moving = iter(i for i, d in zip(index, out_shape) if d != 1)
        sub = [next(moving) if d != 1 else ZERO for d in in_shape]
        return e.value(x, sub)
    linear = linearize(e.b, index, out_shape, node.out.name)
    # a reshape keeps the row-major order: where it (or a chain of reshapes) reads a buffer,
    # load at the same linear offset rather than delinearize into the operand's dims
    # (a division and a remainder per dim on every load of a gemm's im2col operand)
    source = x
    while id(source) not in e.params and source.producer is not None and source.producer.op == "reshape" \
            and id(source.producer) in e.fused:
        source = source.producer.inputs[0]
    if id(source) in e.params and not e.substituted(source):
        return e.load_at(source, linear)
    return e.value(x, delinearize(e.b, linear, in_shape, node.out.name))


@emits("transpose")
def _transpose(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    sub: list[ir.Value] = [ZERO] * len(index)
    for i, p in enumerate(node.attrs["perm"]):
        sub[p] = index[i]
    return e.value(node.inputs[0], sub)


@emits("slice")
def _slice(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    sub = []
    for d, (i, start, stride) in enumerate(zip(index, node.attrs["start"], node.attrs["stride"])):
        scaled = i if stride == 1 else e.b.mul(i, const_i64(stride), flags=["nuw", "nsw"])
        sub.append(scaled if start == 0 else e.b.add(scaled, const_i64(start), name=f"{node.out.name}.i{d}", flags=["nuw", "nsw"]))
    return e.value(node.inputs[0], sub)


@emits("concat")
def _concat(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    axis = node.attrs["axis"]
    result: ir.Value | None = None
    offset = 0
    for operand in node.inputs:
        size = operand.type.shape[axis]
        if size == 0:
            continue
        local = e.b.sub(index[axis], const_i64(offset), name=f"{node.out.name}.at{offset}")
        _, clamped = e.in_bounds(local, size, f"{node.out.name}.{operand.name}")
        sub = list(index)
        sub[axis] = clamped
        element = e.value(operand, sub)
        if result is None:
            result = element
        else:
            starts_here = e.b.icmp_signed(">=", index[axis], const_i64(offset))
            result = e.b.select(starts_here, element, result, name=node.out.name)
        offset += size
    if result is None:  # every operand is empty: so is the output, never read
        return constant(register_type(node.out.type.dtype), None)
    return result


@emits("pad")
def _pad(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    (x,) = node.inputs
    dtype = node.out.type.dtype
    fill = e.immediate(dtype, node.attrs["value"])
    if x.type.size == 0:
        return fill
    checks, sub = [], []
    for d, (i, low, size) in enumerate(zip(index, node.attrs["low"], x.type.shape)):
        if low == 0 and node.attrs["high"][d] == 0:
            sub.append(i)
            continue
        ok, clamped = e.in_bounds(e.b.sub(i, const_i64(low)), size, f"{node.out.name}.d{d}")
        checks.append(ok)
        sub.append(clamped)
    element = e.value(x, sub)
    inside = e.all_of(checks)
    return element if inside is None else e.b.select(inside, element, fill, name=node.out.name)


# == elementwise ops =============================================================
def _float_unary(e: ElementalEmitter, op: str, x: ir.Value) -> ir.Value:
    b, lib = e.b, e.lib
    if op == "neg":
        return b.fneg(x)
    if op == "abs":
        return lib.fabs(b, x)
    if op == "sign":
        one = constant(x.type, 1.0)
        negative = b.select(b.fcmp_ordered("<", x, constant(x.type, 0.0)), constant(x.type, -1.0), x)
        return b.select(b.fcmp_ordered(">", x, constant(x.type, 0.0)), one, negative)
    if op == "sqrt":
        return lib.sqrt(b, x)
    if op == "rsqrt":
        return b.fdiv(constant(x.type, 1.0), lib.sqrt(b, x))
    if op == "floor":
        return lib.floor(b, x)
    if op == "ceil":
        return lib.ceil(b, x)
    if op == "round":
        return lib.roundeven(b, x)
    if op == "copy":
        return x
    if op in ("exp", "log", "tanh", "logistic", "erf", "sin", "cos", "expm1", "log1p", "tan"):
        return getattr(lib, op)(b, x)
    raise KeyError(op)


def _int_unary(e: ElementalEmitter, op: str, x: ir.Value, dtype: DType) -> ir.Value:
    b = e.b
    zero = constant(x.type, 0)
    signed = dtype in SIGNED_DTYPES
    if op == "copy":
        return x
    if op == "not":
        return b.xor(x, constant(x.type, -1))
    if op in ("popcnt", "clz"):
        # single instructions where the CPU has them, inline bit tricks otherwise (never a call)
        name = f"llvm.{'ctpop' if op == 'popcnt' else 'ctlz'}.i{x.type.width}"
        extra = [I1] if op == "clz" else []
        fn = m.intrinsic(b.module, name, x.type, [x.type, *extra])
        return b.call(fn, [x, I1(0)] if op == "clz" else [x])  # ctlz(0) = width, not poison
    if op == "neg":
        return b.sub(zero, x)
    if op == "abs":
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x) if signed else x
    if op == "sign":
        positive = b.zext(b.icmp_signed(">", x, zero) if signed else b.icmp_unsigned("!=", x, zero), x.type)
        if not signed:
            return positive
        return b.sub(positive, b.zext(b.icmp_signed("<", x, zero), x.type))
    raise KeyError(op)


def _bool_unary(e: ElementalEmitter, op: str, x: ir.Value) -> ir.Value:
    if op == "not":
        return e.b.xor(x, I1(1))
    if op in ("copy", "abs", "sign"):
        return x
    raise KeyError(op)


@emits("neg", "abs", "exp", "log", "tanh", "logistic", "sqrt", "rsqrt", "floor", "ceil", "round",
       "erf", "sin", "cos", "sign", "not", "copy", "expm1", "log1p", "tan", "popcnt", "clz")
def _unary(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    dtype = node.out.type.dtype
    x = e.value(node.inputs[0], index)
    try:
        if dtype.is_narrow_float and node.op in m.COMPUTED_IN_F64:
            # the f32 version would compute in f64 and round to f32; round once, to dtype
            return e.round_from_f64(_float_unary(e, node.op, e.b.fpext(x, m.F64)), dtype)
        if dtype.is_float:
            return e.round_to(_float_unary(e, node.op, x), dtype)
        if dtype is DType.BOOL:
            return _bool_unary(e, node.op, x)
        return _int_unary(e, node.op, x, dtype)
    except KeyError:
        raise no_lowering(node) from None


def _int_div(e: ElementalEmitter, a: ir.Value, c: ir.Value, dtype: DType) -> ir.Value:
    """Truncating division, defined everywhere: x/0 = 0, MIN/-1 = MIN (wraps), never a trap."""
    b = e.b
    zero, one = constant(a.type, 0), constant(a.type, 1)
    by_zero = b.icmp_unsigned("==", c, zero)
    safe = b.select(by_zero, one, c)
    if dtype in SIGNED_DTYPES:
        minus_one = constant(a.type, -1)
        safe = b.select(b.icmp_signed("==", safe, minus_one), one, safe)
        quotient = b.sdiv(a, safe)
        quotient = b.select(b.icmp_signed("==", c, minus_one), b.sub(zero, a), quotient)
    else:
        quotient = b.udiv(a, safe)
    return b.select(by_zero, zero, quotient)


def _int_pow(e: ElementalEmitter, base: ir.Value, exponent: ir.Value, dtype: DType) -> ir.Value:
    """Binary exponentiation over every exponent bit (wrapping); negative exponents give 1/x^n truncated."""
    b = e.b
    ty = base.type
    one = constant(ty, 1)
    result: ir.Value = one
    square = base
    for bit in range(ty.width - (1 if dtype in SIGNED_DTYPES else 0)):
        set_ = b.trunc(b.lshr(exponent, constant(ty, bit)), I1)
        result = b.select(set_, b.mul(result, square), result)
        square = b.mul(square, square)
    if dtype not in SIGNED_DTYPES:
        return result
    zero = constant(ty, 0)
    odd = b.trunc(exponent, I1)
    minus_one = constant(ty, -1)
    negative_power = b.select(b.icmp_signed("==", base, one), one,
                              b.select(b.icmp_signed("==", base, minus_one), b.select(odd, minus_one, one), zero))
    return b.select(b.icmp_signed("<", exponent, zero), negative_power, result)


@emits("is_finite")
def _is_finite(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    x = e.value(node.inputs[0], index)
    return e.b.fcmp_ordered("<", e.lib.fabs(e.b, x), constant(x.type, math.inf), name=node.out.name)


def _int_rem(e: ElementalEmitter, a: ir.Value, c: ir.Value, dtype: DType) -> ir.Value:
    """Truncated remainder (sign of the dividend), defined everywhere: x % 0 = 0, MIN % -1 = 0."""
    b = e.b
    zero, one = constant(a.type, 0), constant(a.type, 1)
    undefined = b.icmp_unsigned("==", c, zero)
    if dtype in SIGNED_DTYPES:
        undefined = b.or_(undefined, b.icmp_signed("==", c, constant(a.type, -1)))
    safe = b.select(undefined, one, c)
    remainder = b.srem(a, safe) if dtype in SIGNED_DTYPES else b.urem(a, safe)
    return b.select(undefined, zero, remainder)


def _shift(e: ElementalEmitter, op: str, a: ir.Value, c: ir.Value) -> ir.Value:
    """Shifts by the amount read as unsigned; amounts >= the width give 0 (sign fill for arithmetic)."""
    b = e.b
    width = constant(a.type, a.type.width)
    too_far = b.icmp_unsigned(">=", c, width)
    safe = b.select(too_far, constant(a.type, 0), c)
    if op == "shift_left":
        return b.select(too_far, constant(a.type, 0), b.shl(a, safe))
    if op == "shift_right_logical":
        return b.select(too_far, constant(a.type, 0), b.lshr(a, safe))
    fill = b.ashr(a, constant(a.type, a.type.width - 1))
    return b.select(too_far, fill, b.ashr(a, safe))


@emits("add", "sub", "mul", "div", "max", "min", "pow", "and", "or", "xor", "atan2", "rem",
       "shift_left", "shift_right_arithmetic", "shift_right_logical")
def _binary(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    dtype = node.out.type.dtype
    a = e.value(node.inputs[0], index)
    c = e.value(node.inputs[1], index)
    b, op = e.b, node.op
    if dtype.is_float:
        simple = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv}
        if op in simple:
            return e.round_to(simple[op](a, c), dtype)
        if op in ("max", "min"):
            return e.combine(op, a, c, dtype)
        if op in ("pow", "atan2"):
            function = e.lib.pow if op == "pow" else e.lib.atan2
            if dtype.is_narrow_float:
                # computed in f64 as for f32: round the f64 result once, to dtype (not to f32 first)
                return e.round_from_f64(function(b, b.fpext(a, m.F64), b.fpext(c, m.F64)), dtype)
            return function(b, a, c)
        if op == "rem":
            return e.round_to(e.lib.fmod(b, a, c), dtype)
        raise no_lowering(node)
    if dtype is DType.BOOL:
        table = {"and": b.and_, "or": b.or_, "xor": b.xor, "add": b.or_, "mul": b.and_, "max": b.or_, "min": b.and_}
        if op not in table:
            raise no_lowering(node)
        return table[op](a, c)
    if op in ("add", "sub", "mul"):
        return {"add": b.add, "sub": b.sub, "mul": b.mul}[op](a, c)
    if op in ("max", "min"):
        return e.int_minmax(op, a, c, dtype)
    if op == "div":
        return _int_div(e, a, c, dtype)
    if op == "pow":
        return _int_pow(e, a, c, dtype)
    if op in ("and", "or", "xor"):
        return {"and": b.and_, "or": b.or_, "xor": b.xor}[op](a, c)
    if op == "rem":
        return _int_rem(e, a, c, dtype)
    if op.startswith("shift_"):
        return _shift(e, op, a, c)
    raise no_lowering(node)


@emits("compare")
def _compare(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    dtype = node.inputs[0].type.dtype
    a = e.value(node.inputs[0], index)
    c = e.value(node.inputs[1], index)
    op = _FCMP[node.attrs["direction"]]
    if dtype.is_float:
        # ordered (false on NaN) except ne, which is true on NaN (IEEE, numpy)
        if op == "!=":
            return e.b.fcmp_unordered(op, a, c, name=node.out.name)
        return e.b.fcmp_ordered(op, a, c, name=node.out.name)
    if dtype in SIGNED_DTYPES:
        return e.b.icmp_signed(op, a, c, name=node.out.name)
    return e.b.icmp_unsigned(op, a, c, name=node.out.name)


@emits("select")
def _select(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    pred = e.value(node.inputs[0], index)
    on_true = e.value(node.inputs[1], index)
    on_false = e.value(node.inputs[2], index)
    return e.b.select(pred, on_true, on_false, name=node.out.name)


@emits("convert")
def _convert(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    x = e.value(node.inputs[0], index)
    return e.convert(x, node.inputs[0].type.dtype, node.out.type.dtype)


# == contractions ====================================================================
@emits("reduce")
def _reduce(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    (x,) = node.inputs
    kind, axes = node.attrs["kind"], node.attrs["axes"]
    dtype = node.out.type.dtype
    kept = iter(index)
    base = [None if d in axes else next(kept) for d in range(x.type.rank)]

    fill = e.row_cache_fill if e.row_cache_fill is not None and e.row_cache_fill[0] is x else None

    def element_at(loop_index: list[ir.Value]) -> ir.Value:
        sub = list(base)
        for axis, i in zip(axes, loop_index):
            sub[axis] = i
        element = e.value(x, sub)
        if fill is not None:  # keep the element for the inner loop (row_cache.py)
            _, pointer, row = fill
            address = e.b.gep(pointer, [e.b.add(row, loop_index[0])], inbounds=True, name=f"{x.name}.cached")
            e.b.store(element, address, align=4)
        return element

    def step(loop_index: list[ir.Value], acc: ir.Value) -> ir.Value:
        return e.combine(kind, acc, element_at(loop_index), dtype)

    init = e.immediate(dtype, reduce_identity(kind, dtype))
    extents = [x.type.shape[a] for a in axes]
    selected = x.producer is not None and x.producer.op == "select"
    if (kind in ("max", "min") and dtype in (DType.F32, DType.F64) and len(axes) == 1 and not selected
            and e.lib.target.select_bounded_minmax):
        return _float_minmax_row(e, node, extents[0], lambda k: element_at([k]), kind, dtype)
    # the loop vectorizer handles plain reductions best; a select feeding the reduction
    # (a masked max: select(mask, x, -inf)) folds into a select on the accumulator,
    # which it cannot vectorize, so those get independent accumulators instead
    if selected and dtype.is_float and kind in ("sum", "max", "min") and len(axes) == 1 and extents[0] >= 2 * REDUCE_UNROLL:
        acc = e.accumulate_unrolled(node, extents[0], REDUCE_UNROLL, init, lambda k, a: step([k], a),
                                    lambda a, c: e.combine(kind, a, c, dtype))
        return e.round_to(acc, dtype)
    return e.round_to(e.accumulate_loop(node, extents, init, step), dtype)


def _float_minmax_row(e: ElementalEmitter, node: Node, extent: int, element_at: Callable[[ir.Value], ir.Value],
                      kind: str, dtype: DType) -> ir.Value:
    """A float max/min over one axis, bit for bit llvm.maximum/minimum's, in x86's one-instruction
    max/min: llvm.maxnum/minnum with nnan and nsz (maxps/minps) and, beside it, whether any
    element is NaN (then the result is NaN). Where the result is a zero, whose sign nsz left
    open, a second loop over the row finds whether a +0.0 (max) or -0.0 (min) is among the
    elements. llvm.maximum's own lowering takes a max, an unordered compare and three blends
    per vector: whisper's softmax rows of 1500 spent a third of their time in it.
    `element_at(k)`: element k (and whatever the reduction's loop does with it: row_cache)."""
    b = e.b
    name = node.out.name
    init = e.immediate(dtype, reduce_identity(kind, dtype))
    ty = init.type
    suffix = "f32" if dtype is DType.F32 else "f64"
    combine = m.intrinsic(b.module, f"llvm.{'maxnum' if kind == 'max' else 'minnum'}.{suffix}", ty, [ty, ty])
    acc_slot = e.alloca(ty, f"{name}.acc")
    nan_slot = e.alloca(ir.IntType(1), f"{name}.nan")
    b.store(init, acc_slot)
    b.store(ir.Constant(ir.IntType(1), 0), nan_slot)
    e.push_scope()
    with for_range(b, 0, extent, f"{name}.k0") as k:  # named as accumulate_loop's first level
        x = element_at(k)
        b.store(b.call(combine, [b.load(acc_slot), x], fastmath=("nnan", "nsz")), acc_slot)
        b.store(b.or_(b.load(nan_slot), b.fcmp_unordered("uno", x, x)), nan_slot)
    e.pop_scope()
    result_slot = e.alloca(ty, f"{name}.result")
    # a NaN element made the nnan chain poison: the select never picks it then
    b.store(b.select(b.load(nan_slot), e.immediate(dtype, math.nan), b.load(acc_slot)), result_slot)
    with b.if_then(b.fcmp_ordered("==", b.load(result_slot), e.immediate(dtype, 0.0))):
        # the zero's sign: max is +0.0 if any element is +0.0, min -0.0 if any is -0.0
        width = ir.IntType(64 if dtype is DType.F64 else 32)
        wanted = 0 if kind == "max" else 1 << (width.width - 1)
        found_slot = e.alloca(ir.IntType(1), f"{name}.signed_zero")
        b.store(ir.Constant(ir.IntType(1), 0), found_slot)
        e.push_scope()
        with for_range(b, 0, extent, f"{name}.z") as k:
            bits = b.bitcast(element_at(k), width)
            b.store(b.or_(b.load(found_slot), b.icmp_unsigned("==", bits, ir.Constant(width, wanted))), found_slot)
        e.pop_scope()
        plus, minus = e.immediate(dtype, 0.0), e.immediate(dtype, -0.0)
        b.store(b.select(b.load(found_slot), plus if kind == "max" else minus, minus if kind == "max" else plus),
                result_slot)
    return b.load(result_slot, name=f"{name}.minmax")


def _multiply_add(e: ElementalEmitter, node: Node, acc: ir.Value, a: ir.Value, c: ir.Value) -> ir.Value:
    dtype = node.out.type.dtype
    if dtype.is_float:
        return e.b.fadd(acc, e.b.fmul(a, c, flags=("contract",)), flags=ACCUMULATE)
    if dtype is DType.BOOL:
        raise no_lowering(node)
    return e.b.add(acc, e.b.mul(a, c))


@emits("dot")
def _dot(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    lhs, rhs = node.inputs
    lb, rb, lc, rc = (node.attrs[k] for k in ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract"))
    dtype = node.out.type.dtype
    if dtype is DType.BOOL:
        raise no_lowering(node)
    lsub: list[ir.Value | None] = [None] * lhs.type.rank
    rsub: list[ir.Value | None] = [None] * rhs.type.rank
    for k, (ld, rd) in enumerate(zip(lb, rb)):
        lsub[ld] = rsub[rd] = index[k]
    position = len(lb)
    for d in dot_free_dims(lhs.type.rank, lb, lc):
        lsub[d] = index[position]
        position += 1
    for d in dot_free_dims(rhs.type.rank, rb, rc):
        rsub[d] = index[position]
        position += 1

    def step(loop_index: list[ir.Value], acc: ir.Value) -> ir.Value:
        ls, rs = list(lsub), list(rsub)
        for ld, rd, i in zip(lc, rc, loop_index):
            ls[ld] = rs[rd] = i
        return _multiply_add(e, node, acc, e.value(lhs, ls), e.value(rhs, rs))

    init = e.immediate(dtype, 0)
    extents = [lhs.type.shape[d] for d in lc]
    return e.round_to(e.accumulate_loop(node, extents, init, step), dtype)


@emits("packed_dot")
def _packed_dot(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    """out[.., n] = sum over k of x[.., k, ..] * wp[block of n, k, lane of n] (ir/ops/packed.py)."""
    lhs, wp = node.inputs
    (contract,) = node.attrs["lhs_contract"]
    dtype = node.out.type.dtype
    if dtype is DType.BOOL:
        raise no_lowering(node)
    block, lane = _block_and_lane(e, node, index[-1])
    lsub: list[ir.Value | None] = list(index[:-1])
    lsub.insert(contract, None)

    def step(loop_index: list[ir.Value], acc: ir.Value) -> ir.Value:
        (k,) = loop_index
        ls = list(lsub)
        ls[contract] = k
        return _multiply_add(e, node, acc, e.value(lhs, ls), e.value(wp, [block, k, lane]))

    init = e.immediate(dtype, 0)
    return e.round_to(e.accumulate_loop(node, [lhs.type.shape[contract]], init, step), dtype)


def _block_and_lane(e: ElementalEmitter, node: Node, feature: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Where a packed op's weight holds output feature `feature`: its block and lane."""
    packing = Packing.of(node.attrs)
    name = node.out.name
    block = e.b.udiv(feature, const_i64(packing.lanes), name=f"{name}.block")
    within = e.b.urem(feature, const_i64(packing.lanes), name=f"{name}.within")
    lane = e.b.sub(const_i64(packing.lanes - 1), within, name=f"{name}.lane") if packing.reversed else within
    return block, lane


@emits("conv")
def _conv(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    x, w = node.inputs
    if node.out.type.dtype is DType.BOOL:
        raise no_lowering(node)
    if x.type.size == 0 or w.type.size == 0:  # all padding or no channels: nothing to read
        return e.immediate(node.out.type.dtype, 0)
    out_channel = index[1]
    return _conv_sum(e, node, index, w.type.shape[0], w.type.shape[2:],
                     lambda c, offsets: e.value(w, [out_channel, c, *offsets]))


@emits("packed_conv")
def _packed_conv(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    """conv with the weight read where ir/ops/packed.py's packing holds it: wp[block, c, *taps, lane]."""
    x, wp = node.inputs
    if node.out.type.dtype is DType.BOOL:
        raise no_lowering(node)
    if x.type.size == 0:  # all padding: nothing to read
        return e.immediate(node.out.type.dtype, 0)
    block, lane = _block_and_lane(e, node, index[1])
    return _conv_sum(e, node, index, node.attrs["channels"], wp.type.shape[2:-1],
                     lambda c, offsets: e.value(wp, [block, c, *offsets, lane]))


def _conv_sum(e: ElementalEmitter, node: Node, index: list[ir.Value], out_channels: int, kernel: Sequence[int],
              weight: Callable[[ir.Value, list[ir.Value]], ir.Value]) -> ir.Value:
    """out[index] of a conv over x = node.inputs[0]; `weight(c, taps)` reads the weight of output
    channel index[1], input channel c (within its group) and kernel tap `taps`."""
    x = node.inputs[0]
    dtype = node.out.type.dtype
    groups = node.attrs["groups"]
    strides, dilation, padding = node.attrs["strides"], node.attrs["dilation"], node.attrs["padding"]
    lhs_dilation = conv_lhs_dilation(node.attrs, x.type.rank - 2)
    in_channels = x.type.shape[1] // groups
    out_per_group = out_channels // groups
    spatial_in = x.type.shape[2:]
    spatial_out = node.out.type.shape[2:]
    batch, out_channel = index[0], index[1]
    name = node.out.name
    channel_base = None
    if groups > 1:
        group = e.b.udiv(out_channel, const_i64(out_per_group), name=f"{name}.group")
        channel_base = e.b.mul(group, const_i64(in_channels), name=f"{name}.cbase")

    def step(loop_index: list[ir.Value], acc: ir.Value) -> ir.Value:
        c, offsets = loop_index[0], loop_index[1:]
        channel = c if channel_base is None else e.b.add(channel_base, c, name=f"{name}.c")
        checks, positions = [], []
        for d, k in enumerate(offsets):
            pos = e.b.mul(index[2 + d], const_i64(strides[d])) if strides[d] != 1 else index[2 + d]
            pos = e.b.add(pos, e.b.mul(k, const_i64(dilation[d])) if dilation[d] != 1 else k)
            low, _ = padding[d]
            if low:
                pos = e.b.sub(pos, const_i64(low), name=f"{name}.p{d}")
            last = (spatial_out[d] - 1) * strides[d] + (kernel[d] - 1) * dilation[d] - low
            if low == 0 and last < spatial_in[d] and lhs_dilation[d] == 1:
                positions.append(pos)  # never in the padding
                continue
            ok, clamped = e.dilated_in_bounds(pos, spatial_in[d], lhs_dilation[d], f"{name}.p{d}")
            checks.append(ok)
            positions.append(clamped)
        xv = e.value(x, [batch, channel, *positions])
        inside = e.all_of(checks)
        if inside is not None:
            xv = e.b.select(inside, xv, e.immediate(x.type.dtype, 0))
        wv = weight(c, offsets)
        return _multiply_add(e, node, acc, xv, wv)

    init = e.immediate(dtype, 0)
    return e.round_to(e.accumulate_loop(node, [in_channels, *kernel], init, step), dtype)


@emits("reduce_window")
def _reduce_window(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    (x,) = node.inputs
    kind = node.attrs["kind"]
    dtype = node.out.type.dtype
    window, strides, padding = node.attrs["window"], node.attrs["strides"], node.attrs["padding"]
    base_dilation, window_dilation = window_dilations(node.attrs, x.type.rank)
    identity = e.immediate(dtype, reduce_identity(kind, dtype))
    name = node.out.name
    if x.type.size == 0:  # every window lies in the padding
        return identity

    def step(loop_index: list[ir.Value], acc: ir.Value) -> ir.Value:
        checks, sub = [], []
        for d, k in enumerate(loop_index):
            pos = e.b.mul(index[d], const_i64(strides[d])) if strides[d] != 1 else index[d]
            pos = e.b.add(pos, e.b.mul(k, const_i64(window_dilation[d])) if window_dilation[d] != 1 else k)
            low, high = padding[d]
            if low == 0 and high == 0 and base_dilation[d] == 1:
                sub.append(pos)
                continue
            ok, clamped = e.dilated_in_bounds(e.b.sub(pos, const_i64(low)), x.type.shape[d], base_dilation[d], f"{name}.w{d}")
            checks.append(ok)
            sub.append(clamped)
        element = e.value(x, sub)
        inside = e.all_of(checks)
        if inside is not None:
            element = e.b.select(inside, element, identity)
        return e.combine(kind, acc, element, dtype)

    return e.round_to(e.accumulate_loop(node, list(window), identity, step), dtype)


# == indexing ==========================================================================
@emits("reverse")
def _reverse(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    shape = node.out.type.shape
    sub = [e.b.sub(const_i64(shape[d] - 1), i, name=f"{node.out.name}.r{d}") if d in node.attrs["dims"] else i
           for d, i in enumerate(index)]
    return e.value(node.inputs[0], sub)


def index_as_i64(e: ElementalEmitter, value: ir.Value, dtype: DType) -> ir.Value:
    """An index element widened to i64 (sign-extended unless unsigned)."""
    if value.type.width == 64:
        return value
    return e.b.sext(value, I64) if dtype in SIGNED_DTYPES else e.b.zext(value, I64)


@emits("gather")
def _gather(e: ElementalEmitter, node: Node, index: list[ir.Value]) -> ir.Value:
    """XLA's elemental gather: read the start index vector, clamp it, add the window offset."""
    operand, indices = node.inputs
    dims = GatherDims(operand.type, indices.type, node.attrs)
    name = node.out.name
    if operand.type.size == 0:  # zero-size slices of an empty operand (as the reference)
        return e.immediate(node.out.type.dtype, 0)
    batch_index = [index[d] for d in dims.batch_dims]
    start_map, batching_map = dims.start_map(), dims.batching_map()
    offsets = dict(zip(dims.window_operand_dims, (index[d] for d in dims.offset_dims)))
    sub: list[ir.Value] = []
    for d in range(operand.type.rank):
        position = offsets.get(d, ZERO)
        if d in start_map:
            at = list(batch_index)
            if dims.index_vector_dim < indices.type.rank:
                at.insert(dims.index_vector_dim, const_i64(start_map[d]))
            start = index_as_i64(e, e.value(indices, at), indices.type.dtype)
            high = const_i64(operand.type.shape[d] - dims.slice_sizes[d])
            start = e.b.select(e.b.icmp_signed("<", start, ZERO), ZERO, start)
            start = e.b.select(e.b.icmp_signed(">", start, high), high, start, name=f"{name}.s{d}")
            position = e.b.add(start, position, name=f"{name}.i{d}")
        elif d in batching_map:
            position = batch_index[batching_map[d]]
        sub.append(position)
    return e.value(operand, sub)
