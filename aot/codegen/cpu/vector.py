"""f32 vector helpers shared by the microkernels: splat, FMA, loads and stores of L lanes,
and the register budget of an accumulator tile."""
from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.constants import constant
from aot.codegen.loops import const_i64
from aot.codegen.math import F32, intrinsic
from aot.codegen.cpu.target import CpuTarget

# accumulator tile: at most MAX_ROWS rows (one broadcast each per step) x column vectors.
# At most three quarters of the target's vector registers hold accumulators, and always
# room is left for one loaded vector and the broadcast (more loaded vectors may be read
# from memory again as FMA operands; a spilled accumulator costs a store and a load per
# step): 24 of AVX-512's 32 (a 6 x 4 tile of 16 lanes halves the broadcasts per FMA: an
# LM head of 32 x 128 x 50,257, 74 -> 82 GFLOP/s), 12 of AVX2's 16 (6 x 2 ymm: the classic
# 6 x 16 SGEMM tile), 24 of NEON's 32 (6 vectors of 4 registers), 8 of SSE's 16
MAX_ROWS = 6
ACCUMULATOR_SHARE = (3, 4)


def registers_per_vector(target: CpuTarget, lanes: int) -> int:
    """Vector registers one `lanes`-wide f32 vector takes on `target`."""
    return ceil_div(lanes, target.register_lanes)


def accumulator_budget(target: CpuTarget, lanes: int) -> int:
    """Accumulator vectors of `lanes` f32 a register tile may hold on `target` (at least 1)."""
    num, den = ACCUMULATOR_SHARE
    per_vector = registers_per_vector(target, lanes)
    share = target.vector_registers * num // den // per_vector
    room = (target.vector_registers - 1 - per_vector) // per_vector  # one loaded vector, one broadcast
    return max(1, min(share, room))


def max_rows(target: CpuTarget, lanes: int) -> int:
    """Rows of a tile one column vector wide: MAX_ROWS, fewer where the budget is smaller."""
    return min(MAX_ROWS, accumulator_budget(target, lanes))


def vector_of(lanes: int) -> ir.VectorType:
    return ir.VectorType(F32, lanes)


def splat(b: ir.IRBuilder, scalar: ir.Value, lanes: int, name: str) -> ir.Value:
    one = b.insert_element(constant(vector_of(lanes), None), scalar, constant(ir.IntType(32), 0), name=f"{name}.ins")
    mask = constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes)
    return b.shuffle_vector(one, constant(vector_of(lanes), None), mask, name=name)


def fma(b: ir.IRBuilder, a: ir.Value, c: ir.Value, acc: ir.Value, name: str) -> ir.Value:
    """a * c + acc: one fused instruction where the target has FMA, a multiply and an add
    elsewhere (llvm.fmuladd; llvm.fma would call libm's fmaf there, which the code cannot link)."""
    ty = a.type
    fn = intrinsic(b.module, f"llvm.fmuladd.v{ty.count}f32", ty, [ty, ty, ty])
    return b.call(fn, [a, c, acc], name=name)


def load_vector(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, lanes: int, name: str) -> ir.Value:
    """L floats at base[offset:] (any alignment)."""
    addr = b.gep(base, [offset], inbounds=True, name=f"{name}.addr")
    return b.load(b.bitcast(addr, vector_of(lanes).as_pointer()), name=name, align=4)


def masked_load(b: ir.IRBuilder, target: CpuTarget, base: ir.Value, offset: ir.Value, lanes: int,
                lane_mask: Callable[[int, int], ir.Value], fill: float, name: str) -> ir.Value:
    """<lanes x f32> at base[offset:]: lanes where the mask is false are `fill` and their
    memory is not read (offset may point outside the buffer). `lane_mask(first, count)`
    gives the <count x i1> mask of lanes first .. first+count-1.

    A vector wider than one register of `target` is loaded in register-wide pieces, each
    with a mask built at its own width. LLVM 22's X86 back end mishandles a <16 x i1>
    mask on AVX2 when it splits the load itself and proves one half all-false: a
    release build loads that half unmasked and drops the fill (issue 9: the SPP
    block's 13x13 max pool read the next row), a build with assertions aborts.
    """
    piece = min(lanes, target.register_lanes)
    assert lanes % piece == 0 and (lanes // piece) & (lanes // piece - 1) == 0, (lanes, piece)
    parts = []
    for first in range(0, lanes, piece):
        at = b.add(offset, const_i64(first)) if first else offset
        mask = lane_mask(first, piece)
        bits = _constant_bits(mask)
        if bits is not None and not any(bits):
            parts.append(constant(vector_of(piece), [fill] * piece))
        elif bits is not None and all(bits):
            parts.append(load_vector(b, base, at, piece, f"{name}.part{first}"))
        else:
            parts.append(_register_masked_load(b, base, at, mask, fill, f"{name}.part{first}"))
    while len(parts) > 1:  # concatenate neighbours: 2 x <p> -> <2p>, until one vector is left
        width = parts[0].type.count
        both = constant(ir.VectorType(ir.IntType(32), 2 * width), list(range(2 * width)))
        parts = [b.shuffle_vector(lo, hi, both, name=f"{name}.cat") for lo, hi in zip(parts[::2], parts[1::2])]
    return parts[0]


def _constant_bits(mask: ir.Value) -> list[bool] | None:
    """The lanes of a constant <n x i1> mask as bools, None where the mask is computed.
    llvmlite keeps a vector constant's elements as ir.Constant objects, each truthy
    whatever its value: their own .constant is the bit."""
    if not isinstance(mask, ir.Constant) or not isinstance(mask.constant, list):
        return None
    return [bool(lane.constant) if isinstance(lane, ir.Constant) else bool(lane) for lane in mask.constant]


def _register_masked_load(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, mask: ir.Value, fill: float, name: str) -> ir.Value:
    vec = vector_of(mask.type.count)
    fn = intrinsic(b.module, f"llvm.masked.load.v{vec.count}f32.p0", vec, [vec.as_pointer(), mask.type, vec])
    addr = b.bitcast(b.gep(base, [offset]), vec.as_pointer())  # not inbounds: masked-off lanes may lie outside
    return b.call(fn, [addr, mask, constant(vec, [fill] * vec.count)], name=name)


def store_vector(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, vec: ir.Value, name: str) -> None:
    addr = b.gep(base, [offset], inbounds=True, name=f"{name}.addr")
    b.store(vec, b.bitcast(addr, vec.type.as_pointer()), align=4)


def prefetch(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, locality: int) -> None:
    """Prefetch the cache line of base[offset] for reading: locality 3 into L1 (prefetcht0 on
    x86), 2 into L2 (prefetcht1). The address may lie outside the buffer (a prefetch never
    faults), so it is not `inbounds`."""
    byte_ptr = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fn = intrinsic(b.module, "llvm.prefetch.p0", ir.VoidType(), [byte_ptr, i32, i32, i32])
    address = b.bitcast(b.gep(base, [offset]), byte_ptr)
    b.call(fn, [address, constant(i32, 0), constant(i32, locality), constant(i32, 1)])  # read, locality, data
