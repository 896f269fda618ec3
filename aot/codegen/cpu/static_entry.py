"""One relocatable object for a plan: kernels, weights and a typed entry, for static linking.

What `aot-compile --emit c` links into a user's program instead of loading an artifact
(tfcompile's model): no runtime, no loader, no dlopen. The object holds

    int32_t <prefix>_run(const void* input..., void* output..., void* arena);

which does what the runtime's single-threaded aot_run does (runtime_c/src/context.c): copy
each donated input into its output's buffer unless both are one buffer, call every kernel
over all of its work items in plan order (aot_model_entry, kernel.py), then evaluate the
plan's run-time checks: 0, or 1 + the index of the first failing one (aot_model_checks).

Kernel bodies are the very modules the artifact path builds (build.kernel_body), optimized
alone as there (optimize_text: a body with its own vectors keeps the loop vectorizer off),
then linked at the IR level into one module that is only code-generated, not optimized
again. Everything but <prefix>_run is made internal, so two models link into one program.
The weights are a read-only section of their own (.rodata.<prefix>_weights, 64-byte
aligned), pulled in by `.incbin` in module-level assembly: printing megabytes of weights
as an LLVM constant costs seconds per MB. Module assembly needs LLVM's assembly parser for
the target, and llvmlite initializes the host's only, so the object is built for the host
architecture (a cross target is an ArgumentError).
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.cpu.build import kernel_body
from aot.codegen.cpu.kernel import ENTRY_TYPE, body_type, emit_checks, emit_entry, emit_kernel_call, kernel_work_items
from aot.codegen.cpu.symbols import check_module, check_object
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.targets import host_arch
from aot.codegen.llvm_pipeline import module_text, optimize_text
from aot.errors import ArgumentError, CodegenError
from aot.plan import ExecutionPlan

WEIGHTS_ALIGN = 64  # as the runtime aligns them (code_info.ALIGNMENT)
I8 = ir.IntType(8)
I8P = I8.as_pointer()
I32 = ir.IntType(32)
I64 = ir.IntType(64)


def run_symbol(prefix: str) -> str:
    return f"{prefix}_run"


def weights_symbol(prefix: str) -> str:
    return f"{prefix}_weights"


def check_static_target(target: CpuTarget) -> None:
    """The object is built for the host's architecture only (see the module docstring)."""
    if target.arch != host_arch():
        raise ArgumentError(f"--emit c builds for this host's architecture ({host_arch()}); CPU '{target.cpu}' is "
                            f"{target.arch} code, which needs LLVM's {target.arch} assembler (not in llvmlite)")


def _weights_asm(prefix: str, path: str) -> str:
    """Module assembly defining the local symbol <prefix>_weights: the file's bytes, read-only."""
    section = f".rodata.{weights_symbol(prefix)}"
    quoted = path.replace("\\", "\\\\").replace('"', '\\"')  # an assembler string: \\ and \"
    lines = [f'.pushsection {section},"a",@progbits', f".balign {WEIGHTS_ALIGN}", f"{weights_symbol(prefix)}:",
             f'.incbin "{quoted}"', ".popsection"]
    return "".join(f'module asm "{_llvm_string(line)}"\n' for line in lines)


def _llvm_string(text: str) -> str:
    """`text` inside an LLVM assembly string: '"', '\\' and non-printable bytes as \\XX."""
    return "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in text.encode())


def entry_text(plan: ExecutionPlan, target: CpuTarget, prefix: str, bodies: Sequence[str],
               machine: llvm.TargetMachine) -> str:
    """The entry module's assembly (without the weights' module assembly): internal kernel
    thunks, aot_model_entry and aot_model_checks as the artifact has them, and <prefix>_run."""
    module = ir.Module(name=f"{prefix}_entry")
    module.triple = target.triple
    declared: dict[str, ir.Function] = {}
    kernels = []
    for index, (kernel, body) in enumerate(zip(plan.kernels, bodies)):
        if body not in declared:
            declared[body] = ir.Function(module, body_type(kernel), name=body)
        fn = emit_kernel_call(module, plan, kernel, f"aot_kernel_{index}", declared[body])
        kernels.append((fn, kernel_work_items(kernel, target)))
    entry = emit_entry(module, kernels)
    checks = emit_checks(module, plan) if plan.checks else None
    for fn in [entry, *(fn for fn, _ in kernels), *([checks] if checks else [])]:
        fn.linkage = "internal"  # inlined into <prefix>_run; nothing outside calls them
    weights = ir.GlobalVariable(module, ir.ArrayType(I8, 0), name=weights_symbol(prefix))
    weights.visibility = "hidden"  # defined in this object (module assembly): PC-relative, no GOT
    weights.align = WEIGHTS_ALIGN
    _emit_run(module, plan, prefix, entry, checks, weights)
    return module_text(module, machine)


def _emit_run(module: ir.Module, plan: ExecutionPlan, prefix: str, entry: ir.Function,
              checks: ir.Function | None, weights: ir.GlobalVariable) -> ir.Function:
    graph = plan.graph
    n_in, n_out = len(graph.inputs), len(graph.outputs)
    fn = ir.Function(module, ir.FunctionType(I32, [I8P] * (n_in + n_out + 1)), name=run_symbol(prefix))
    fn.attributes.add("nounwind")
    for i, arg in enumerate(fn.args[:n_in]):
        arg.name = f"input{i}"
    for i, arg in enumerate(fn.args[n_in:n_in + n_out]):
        arg.name = f"output{i}"
    fn.args[-1].name = "arena"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    # the runtime's pointer tables (aot_model_entry reads a buffer's address from them)
    tables = []
    for args, name in ((fn.args[:n_in], "inputs"), (fn.args[n_in:n_in + n_out], "outputs")):
        table = builder.alloca(ir.ArrayType(I8P, max(len(args), 1)), name=name)
        for i, arg in enumerate(args):
            builder.store(arg, builder.gep(table, [ir.Constant(I32, 0), ir.Constant(I32, i)], inbounds=True))
        tables.append(builder.bitcast(table, I8P.as_pointer(), name=f"{name}.table"))
    # donated inputs: the code reads them from the output's buffer (context.c: donate_cpu)
    memmove = module.declare_intrinsic("llvm.memmove", [I8P, I8P, I64])
    for d in plan.donations:
        source, dest = fn.args[d.input], fn.args[n_in + d.output]
        bytes_ = graph.inputs[d.input].type.nbytes
        with builder.if_then(builder.icmp_unsigned("!=", source, dest, name=f"donation{d.input}.apart")):
            builder.call(memmove, [dest, source, ir.Constant(I64, bytes_), ir.Constant(ir.IntType(1), 0)])
    base = builder.bitcast(weights, I8P, name="weights")
    arguments = [*tables, fn.args[-1], base]
    assert entry.function_type == ENTRY_TYPE
    builder.call(entry, arguments)
    builder.ret(builder.call(checks, arguments) if checks is not None else ir.Constant(I32, 0))
    return fn


def emit_static_object(plan: ExecutionPlan, target: CpuTarget, prefix: str) -> bytes:
    """The ELF relocatable object exporting only <prefix>_run (see the module docstring)."""
    check_static_target(target)
    machine = target.target_machine()
    llvm.initialize_native_asmparser()  # for the weights' module assembly
    linked: llvm.ModuleRef | None = None
    bodies: list[str] = []
    seen: set[str] = set()
    for index in range(len(plan.kernels)):
        symbol, text = kernel_body(plan, target, index, machine)
        bodies.append(symbol)
        if symbol in seen:  # equal work, one body (build.py)
            continue
        seen.add(symbol)
        optimized = optimize_text(text, machine, "CPU")
        check_module(optimized)
        if linked is None:
            linked = optimized
        else:
            linked.link_in(optimized)
    public = run_symbol(prefix)
    with tempfile.TemporaryDirectory(prefix="aot-emit-c-") as tmp:
        path = os.path.join(tmp, "weights.bin")
        with open(path, "wb") as f:
            f.write(plan.weights)
        text = entry_text(plan, target, prefix, bodies, machine) + _weights_asm(prefix, path)
        # O3 on the entry alone: the thunks and aot_model_entry inline into <prefix>_run
        entry = optimize_text(text, machine, "CPU")
        if linked is None:
            linked = entry
        else:
            linked.link_in(entry)
        _localize(linked, public)
        check_module(linked, frozenset({weights_symbol(prefix)}))
        try:
            obj = machine.emit_object(linked)
        except RuntimeError as err:
            raise CodegenError(f"LLVM could not emit the static object for '{prefix}': {err}") from None
    check_object(obj)
    return obj


def _localize(module: llvm.ModuleRef, public: str) -> None:
    """Every definition but `public` internal (a local symbol): the bodies' hashed names and
    aot_model_entry would clash when two models link into one program."""
    local = (llvm.Linkage.internal, llvm.Linkage.private)
    for value in [*module.functions, *module.global_variables]:
        if value.is_declaration or value.name == public or value.linkage in local:
            continue
        value.linkage = llvm.Linkage.internal
        value.visibility = llvm.Visibility.default  # a local symbol has default visibility
