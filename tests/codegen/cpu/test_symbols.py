"""The undefined-symbol guard (aot/codegen/cpu/symbols.py): LLVM IR in, the object's undefined
symbols (with the functions that use them) or the CodegenError out."""
from __future__ import annotations

import llvmlite.binding as llvm
import pytest
from llvmlite import ir

from aot.codegen.cpu import CpuTarget, emit_cpu
from aot.codegen import math as cpu_math
from aot.codegen.cpu.symbols import check_module, check_object, undefined_references
from aot.errors import CodegenError
from aot.ir import Builder, DType, Graph, TensorType
from aot.plan import ExecutionPlan, Kernel, Slice

HASWELL = CpuTarget.from_name("haswell")  # x86 with F16C: converts to f16 from f32 only

NARROW_F64_TO_F16 = """\
define half @narrow(double %x) {
  %h = fptrunc double %x to half
  ret half %h
}
"""
FILL_AND_COPY = """\
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memmove.p0.p0.i64(ptr, ptr, i64, i1)
define void @fill(ptr %dst, ptr %src, i64 %n) {
  call void @llvm.memset.p0.i64(ptr %dst, i8 0, i64 %n, i1 false)
  call void @llvm.memcpy.p0.p0.i64(ptr %dst, ptr %src, i64 %n, i1 false)
  call void @llvm.memmove.p0.p0.i64(ptr %dst, ptr %src, i64 %n, i1 false)
  ret void
}
"""
CALLS_EXPF = """\
declare float @expf(float)
define float @kernel(float %x) {
  %y = call float @expf(float %x)
  ret float %y
}
"""


def _parse(text: str, target: CpuTarget) -> llvm.ModuleRef:
    machine = target.target_machine()
    module = llvm.parse_assembly(text)
    module.triple = target.triple
    module.data_layout = str(machine.target_data)
    return module


def _object(text: str, target: CpuTarget) -> bytes:
    return target.target_machine().emit_object(_parse(text, target))


def test_module_calling_an_undefined_function_is_a_codegen_error():
    with pytest.raises(CodegenError, match="optimized LLVM module references undefined symbols .*'expf'"):
        check_module(_parse(CALLS_EXPF, HASWELL))


def test_object_with_a_libgcc_call_is_a_codegen_error_naming_symbol_and_function():
    obj = _object(NARROW_F64_TO_F16, HASWELL)
    assert undefined_references(obj) == {"__truncdfhf2": ["narrow"]}
    with pytest.raises(CodegenError, match=r"'__truncdfhf2' \(usually an f64 -> f16 fptrunc; .*\) in narrow"):
        check_object(obj)


def test_libc_memory_functions_pass():
    """memcpy/memset/memmove resolve from the process's libc when the runtime dlopens the code."""
    module = _parse(FILL_AND_COPY, HASWELL)
    check_module(module)
    obj = HASWELL.target_machine().emit_object(module)
    assert undefined_references(obj) == {"memset": ["fill"], "memcpy": ["fill"], "memmove": ["fill"]}
    check_object(obj)


def test_does_not_flag_an_aarch64_f64_to_f16_conversion():
    """AArch64 converts f64 -> f16 in one instruction: no call, nothing undefined."""
    assert undefined_references(_object(NARROW_F64_TO_F16, CpuTarget.from_name("neoverse-v1"))) == {}


def test_not_an_elf_object_is_a_codegen_error():
    with pytest.raises(CodegenError, match="not an ELF image"):
        undefined_references(b"\x7fELX" + bytes(60))
    elf32 = bytearray(_object(NARROW_F64_TO_F16, HASWELL))
    elf32[4] = 1  # EI_CLASS: ELFCLASS32
    with pytest.raises(CodegenError, match="64-bit little-endian"):
        undefined_references(bytes(elf32))


def _atan2_plan() -> ExecutionPlan:
    g = Graph()
    y, x = (g.add_input(name, TensorType(DType.F32, (4,))) for name in ("y", "x"))
    out = Builder(g).op("atan2", [y, x])
    g.add_output(out, "out")
    slices = {"y": Slice("input", 0, 0, 16), "x": Slice("input", 1, 0, 16), out.name: Slice("output", 0, 0, 16)}
    return ExecutionPlan(g, [Kernel("k.out", out, list(g.nodes), [y, x])], slices, 64, 0, b"")


def test_emit_cpu_fails_instead_of_writing_code_that_cannot_load(monkeypatch):
    """An emitter that calls libm (here atan2 replaced by a call to atan2f) stops the compile."""
    def libm_atan2(lib: cpu_math.MathLib, b: ir.IRBuilder, y: ir.Value, x: ir.Value) -> ir.Value:
        declared = lib.module.globals.get("atan2f")
        fn = declared or ir.Function(lib.module, ir.FunctionType(y.type, [y.type, x.type]), "atan2f")
        return b.call(fn, [y, x])

    plan = _atan2_plan()
    assert emit_cpu(plan, HASWELL).shared_object[:4] == b"\x7fELF"  # the real lowering compiles
    monkeypatch.setattr(cpu_math.MathLib, "atan2", libm_atan2)
    with pytest.raises(CodegenError, match="'atan2f'"):
        emit_cpu(plan, HASWELL)
