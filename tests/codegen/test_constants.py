"""aot/codegen/constants.py: one shared ir.Constant per (type, value), telling apart every
value that prints differently."""
from __future__ import annotations

from llvmlite import ir

from aot.codegen import constants
from aot.codegen.constants import constant

F32 = ir.FloatType()
I1 = ir.IntType(1)
I32 = ir.IntType(32)


def test_an_equal_type_and_value_give_the_same_object_and_text():
    vec = ir.VectorType(I32, 8)
    first, second = constant(vec, [0] * 8), constant(ir.VectorType(I32, 8), [0] * 8)
    assert first is second
    assert str(first) == str(ir.Constant(vec, [0] * 8))


def test_values_that_print_differently_are_different_constants():
    assert str(constant(F32, 0.0)) != str(constant(F32, -0.0))
    assert str(constant(I1, True)) == str(ir.Constant(I1, True))
    assert str(constant(I1, 1)) == str(ir.Constant(I1, 1))
    assert constant(I32, 1) is not constant(ir.IntType(64), 1)
    assert str(constant(ir.VectorType(F32, 2), ir.Undefined)) == str(ir.Constant(ir.VectorType(F32, 2), ir.Undefined))
    mask = [True, False, True, True]  # a lane mask, and its ints: printed `i1 true` and `i1 1`
    bools, ints = constant(ir.VectorType(I1, 4), mask), constant(ir.VectorType(I1, 4), [int(v) for v in mask])
    assert bools is not ints and bools is constant(ir.VectorType(I1, 4), tuple(mask))
    assert str(bools) == str(ir.Constant(ir.VectorType(I1, 4), mask))
    assert str(ints) == str(ir.Constant(ir.VectorType(I1, 4), [int(v) for v in mask]))
    nan = float("nan")
    assert constant(F32, nan) is constant(F32, nan) and str(constant(F32, nan)) == str(ir.Constant(F32, nan))
    assert str(constant(ir.DoubleType(), -nan)) == str(ir.Constant(ir.DoubleType(), -nan))


def test_float_zeros_are_spelled_short_and_mean_what_llvmlite_spells_long():
    vec = ir.VectorType(F32, 4)
    assert str(constant(vec, None)) == str(constant(vec, [0.0] * 4)) == "<4 x float> zeroinitializer"
    assert str(constant(F32, 0.0)) == "float 0.0"
    assert constant(vec, None).constant[0].constant is None  # its lanes, as ir.Constant(vec, None) has them
    # a -0.0 lane, or an integer zero, keeps llvmlite's spelling
    assert str(constant(vec, [0.0, -0.0, 0.0, 0.0])) == str(ir.Constant(vec, [0.0, -0.0, 0.0, 0.0]))
    assert str(constant(ir.VectorType(I1, 2), [False, False])) == str(ir.Constant(ir.VectorType(I1, 2), [False, False]))
    # LLVM reads both spellings as the same constants
    import llvmlite.binding as llvm
    texts = []
    for short in (True, False):
        module = ir.Module()
        fn = ir.Function(module, ir.FunctionType(vec, [vec, F32]), "f")
        b = ir.IRBuilder(fn.append_basic_block())
        zero_vec, zero = (constant(vec, None), constant(F32, 0.0)) if short else (ir.Constant(vec, None), ir.Constant(F32, 0.0))
        b.ret(b.fadd(b.select(b.fcmp_ordered("==", fn.args[1], zero), fn.args[0], zero_vec), zero_vec))
        texts.append(str(llvm.parse_assembly(str(module))))
    assert texts[0] == texts[1]


def test_a_vector_of_ir_values_is_made_each_time():
    element = ir.Constant(F32, 1.0)
    vec = ir.VectorType(F32, 2)
    assert constant(vec, [element, element]) is not constant(vec, [element, element])


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(constants, "_MAX_ENTRIES", 4)
    monkeypatch.setattr(constants, "_made", {})
    for value in range(10):
        constant(I32, value)
    assert len(constants._made) <= 4
