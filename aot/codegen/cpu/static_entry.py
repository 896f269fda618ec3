"""One relocatable object for a plan: kernels, weights and a typed entry, for static linking.

What `aot-compile --emit c` links into a user's program instead of loading an artifact
(tfcompile's model): no runtime, no loader, no dlopen. The object holds

    int32_t <prefix>_run(const void* input..., void* output..., void* arena);
    int32_t <prefix>_run_threads(const void* input..., void* output..., void* arena, aot_pool_t* pool);

<prefix>_run does what the runtime's single-threaded aot_run does (runtime_c/src/context.c):
copy each donated input into its output's buffer unless both are one buffer, call every
kernel over all of its work items in plan order (aot_model_entry, kernel.py), then evaluate
the plan's run-time checks: 0, or 1 + the index of the first failing one (aot_model_checks).
<prefix>_run_threads does the same but hands the kernels to the runtime's aot_pool_run
(aot_runtime.h) as an aot_program_t: a table of {kernel function, work items, cost_ns}, as
an artifact's manifest lists them, and the weights. aot_pool_run is a weak reference, so
the object links without the runtime; with no pool, no runtime linked, or a pool that
refuses the run, the kernels run on the calling thread as in <prefix>_run.

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
from aot.codegen.cpu.kernel import (ENTRY_TYPE, KERNEL_TYPE, body_type, emit_checks, emit_entry, emit_kernel_call,
                                    kernel_work_items)
from aot.codegen.cpu.symbols import check_module, check_object
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.targets import host_arch
from aot.codegen.llvm_pipeline import module_text, optimize_text
from aot.errors import ArgumentError, CodegenError
from aot.kernel_cost import kernel_cost_ns
from aot.plan import ExecutionPlan

WEIGHTS_ALIGN = 64  # as the runtime aligns them (code_info.ALIGNMENT)
I8 = ir.IntType(8)
I8P = I8.as_pointer()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
# aot_runtime.h's aot_kernel_t {fn, work, cost_ns} and aot_program_t {struct_size, kernel_count,
# kernels, weights}, as the C compiler lays them out on x86-64 and aarch64
KERNEL_DESC = ir.LiteralStructType([KERNEL_TYPE.as_pointer(), I64, I64])
PROGRAM = ir.LiteralStructType([I32, I32, KERNEL_DESC.as_pointer(), I8P])
PROGRAM_BYTES = 24
# aot_pool_run(pool, program, inputs, outputs, arena, error): the runtime's, weakly referenced
POOL_RUN_SYMBOL = "aot_pool_run"
POOL_RUN_TYPE = ir.FunctionType(I32, [I8P, PROGRAM.as_pointer(), I8P.as_pointer(), I8P.as_pointer(), I8P, I8P])
# what the object may leave undefined beyond libc's: the runtime's pool, a weak reference
STATIC_UNDEFINED = frozenset({POOL_RUN_SYMBOL})


def run_symbol(prefix: str) -> str:
    return f"{prefix}_run"


def run_threads_symbol(prefix: str) -> str:
    return f"{prefix}_run_threads"


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
    thunks, aot_model_entry and aot_model_checks as the artifact has them, the program table,
    <prefix>_run and <prefix>_run_threads."""
    module = ir.Module(name=f"{prefix}_entry")
    module.triple = target.triple
    declared: dict[str, ir.Function] = {}
    kernels = []
    costs = []
    for index, (kernel, body) in enumerate(zip(plan.kernels, bodies)):
        if body not in declared:
            declared[body] = ir.Function(module, body_type(kernel), name=body)
        fn = emit_kernel_call(module, plan, kernel, f"aot_kernel_{index}", declared[body])
        work = kernel_work_items(kernel, target)
        kernels.append((fn, work))
        costs.append(kernel_cost_ns(kernel, work))
    entry = emit_entry(module, kernels)
    checks = emit_checks(module, plan) if plan.checks else None
    for fn in [entry, *(fn for fn, _ in kernels), *([checks] if checks else [])]:
        fn.linkage = "internal"  # inlined into <prefix>_run; nothing outside calls them
    weights = ir.GlobalVariable(module, ir.ArrayType(I8, 0), name=weights_symbol(prefix))
    weights.visibility = "hidden"  # defined in this object (module assembly): PC-relative, no GOT
    weights.align = WEIGHTS_ALIGN
    program = _emit_program(module, prefix, kernels, costs, weights)
    _emit_run(module, plan, run_symbol(prefix), entry, checks, weights)
    _emit_run(module, plan, run_threads_symbol(prefix), entry, checks, weights, program)
    return module_text(module, machine)


def _emit_program(module: ir.Module, prefix: str, kernels: list[tuple[ir.Function, int]], costs: list[int],
                  weights: ir.GlobalVariable) -> ir.GlobalVariable:
    """The aot_program_t that <prefix>_run_threads hands the runtime's pool: read-only data."""
    table_type = ir.ArrayType(KERNEL_DESC, len(kernels))
    table = ir.GlobalVariable(module, table_type, name=f"{prefix}_kernels")
    table.initializer = ir.Constant(table_type, [ir.Constant(KERNEL_DESC, [fn, ir.Constant(I64, work),
                                                                             ir.Constant(I64, cost)])
                                                 for (fn, work), cost in zip(kernels, costs)])
    table.global_constant = True
    table.linkage = "internal"
    program = ir.GlobalVariable(module, PROGRAM, name=f"{prefix}_program")
    program.initializer = ir.Constant(PROGRAM, [
        ir.Constant(I32, PROGRAM_BYTES), ir.Constant(I32, len(kernels)),
        table.gep([ir.Constant(I32, 0), ir.Constant(I32, 0)]), weights.bitcast(I8P)])
    program.global_constant = True
    program.linkage = "internal"
    return program


def _emit_run(module: ir.Module, plan: ExecutionPlan, symbol: str, entry: ir.Function, checks: ir.Function | None,
              weights: ir.GlobalVariable, program: ir.GlobalVariable | None = None) -> ir.Function:
    """<prefix>_run, or with `program` <prefix>_run_threads (one more parameter: the pool)."""
    graph = plan.graph
    n_in, n_out = len(graph.inputs), len(graph.outputs)
    n_args = n_in + n_out + 1 + (program is not None)
    fn = ir.Function(module, ir.FunctionType(I32, [I8P] * n_args), name=symbol)
    fn.attributes.add("nounwind")
    for i, arg in enumerate(fn.args[:n_in]):
        arg.name = f"input{i}"
    for i, arg in enumerate(fn.args[n_in:n_in + n_out]):
        arg.name = f"output{i}"
    arena = fn.args[n_in + n_out]
    arena.name = "arena"
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
    arguments = [*tables, arena, base]
    assert entry.function_type == ENTRY_TYPE
    if program is None:
        builder.call(entry, arguments)
    else:
        pool = fn.args[-1]
        pool.name = "pool"
        _run_on_pool(builder, module, program, pool, tables, arena, entry, arguments)
    builder.ret(builder.call(checks, arguments) if checks is not None else ir.Constant(I32, 0))
    return fn


def _run_on_pool(builder: ir.IRBuilder, module: ir.Module, program: ir.GlobalVariable, pool: ir.Argument,
                 tables: list[ir.Value], arena: ir.Value, entry: ir.Function, arguments: list[ir.Value]) -> None:
    """aot_pool_run(pool, &program, ...) where there is a pool and the runtime is linked (the weak
    reference is not null); on the calling thread where not, or where the pool refused the run."""
    pool_run = module.globals.get(POOL_RUN_SYMBOL) or ir.Function(module, POOL_RUN_TYPE, name=POOL_RUN_SYMBOL)
    pool_run.linkage = "extern_weak"
    null = ir.Constant(I8P, None)
    has_pool = builder.icmp_unsigned("!=", pool, null, name="has_pool")
    linked = builder.icmp_unsigned("!=", builder.ptrtoint(pool_run, I64), ir.Constant(I64, 0), name="runtime_linked")
    serial = builder.append_basic_block("on_caller")
    pooled = builder.append_basic_block("on_pool")
    done = builder.append_basic_block("ran")
    builder.cbranch(builder.and_(has_pool, linked), pooled, serial)
    builder.position_at_end(pooled)
    status = builder.call(pool_run, [pool, program, *tables, arena, null], name="pool_status")
    builder.cbranch(builder.icmp_signed("==", status, ir.Constant(I32, 0)), done, serial)
    builder.position_at_end(serial)
    builder.call(entry, arguments)
    builder.branch(done)
    builder.position_at_end(done)


def emit_static_object(plan: ExecutionPlan, target: CpuTarget, prefix: str) -> bytes:
    """The ELF relocatable object exporting only <prefix>_run and <prefix>_run_threads (see the
    module docstring)."""
    check_static_target(target)
    machine = target.target_machine()
    llvm.initialize_native_asmparser()  # for the weights' module assembly
    linked: llvm.ModuleRef | None = None
    bodies: list[str] = []
    seen: set[str] = set()
    for index in range(len(plan.kernels)):
        body = kernel_body(plan, target, index, machine)
        bodies.append(body.symbol)
        for symbol, text in ((body.symbol, body.text), *body.helpers):
            if symbol in seen:  # equal work, one body or helper (build.py)
                continue
            seen.add(symbol)
            optimized = optimize_text(text, machine, "CPU")
            check_module(optimized, frozenset(helper for helper, _ in body.helpers))
            if linked is None:
                linked = optimized
            else:
                linked.link_in(optimized)
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
        _localize(linked, frozenset({run_symbol(prefix), run_threads_symbol(prefix)}))
        check_module(linked, frozenset({weights_symbol(prefix)}) | STATIC_UNDEFINED)
        try:
            obj = machine.emit_object(linked)
        except RuntimeError as err:
            raise CodegenError(f"LLVM could not emit the static object for '{prefix}': {err}") from None
    check_object(obj, STATIC_UNDEFINED)
    return obj


def _localize(module: llvm.ModuleRef, public: frozenset[str]) -> None:
    """Every definition but the `public` ones internal (a local symbol): the bodies' hashed names
    and aot_model_entry would clash when two models link into one program."""
    local = (llvm.Linkage.internal, llvm.Linkage.private)
    for value in [*module.functions, *module.global_variables]:
        if value.is_declaration or value.name in public or value.linkage in local:
            continue
        value.linkage = llvm.Linkage.internal
        value.visibility = llvm.Visibility.default  # a local symbol has default visibility
