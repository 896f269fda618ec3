"""The LLVM step every back end shares: parse and verify the llvmlite module, then O3 (O2 for own vector code)."""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from aot.errors import CodegenError


def module_text(module: ir.Module, machine: llvm.TargetMachine) -> str:
    """`module` as LLVM assembly, with `machine`'s data layout: what is parsed, and what a
    per-kernel cache keys on. Printing is costly (about 0.2 s per MB), so print once."""
    module.data_layout = str(machine.target_data)
    return str(module)


def parse_verified(text: str, back_end: str) -> llvm.ModuleRef:
    """Parse and verify LLVM assembly; `back_end` names the module in LLVM's errors."""
    try:
        parsed = llvm.parse_assembly(text)
        parsed.verify()
    except RuntimeError as err:
        raise CodegenError(f"LLVM rejected the generated {back_end} module: {err}") from None
    parsed.name = "aot"
    return parsed


# The first line of a module whose code is vector code already (cpu/bodies.py: own_vectors):
# LLVM's loop vectorizer is left out for it, as it found nothing to gain there.
OWN_VECTORS = "; aot: own vector code\n"


def run_passes(parsed: llvm.ModuleRef, machine: llvm.TargetMachine, *, vectorize: bool,
               loop_vectorize: bool | None = None, speed_level: int = 3) -> llvm.ModuleRef:
    """The O3 (or `speed_level`) pipeline with unrolling and, if `vectorize`, SLP
    vectorization and (unless `loop_vectorize` is False) loop vectorization, in place."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    tuning.loop_vectorization = vectorize if loop_vectorize is None else vectorize and loop_vectorize
    tuning.slp_vectorization = vectorize
    tuning.loop_unrolling = True
    passes = llvm.create_pass_builder(machine, tuning)
    passes.getModulePassManager().run(parsed, passes)
    return parsed


def optimize_text(text: str, machine: llvm.TargetMachine, back_end: str) -> llvm.ModuleRef:
    """Parse, verify and optimize LLVM assembly with vectorization. Text that starts with
    OWN_VECTORS gets O2 without the loop vectorizer: its loops and vectors are laid out
    already, and O3's extra passes found nothing in them. On resnet18 (two x86 variants)
    that cut optimization and codegen from about 5 to 3.8 s of CPU with the same run time (A/B,
    native and znver3); dropping the SLP vectorizer too saved little more and made
    znver3's convs 8% slower."""
    own_vectors = text.startswith(OWN_VECTORS)
    return run_passes(parse_verified(text, back_end), machine, vectorize=True,
                      loop_vectorize=not own_vectors, speed_level=2 if own_vectors else 3)


def run_o3(module: ir.Module, machine: llvm.TargetMachine, *, vectorize: bool, back_end: str) -> llvm.ModuleRef:
    """Parse and verify `module` for `machine`, then run the O3 pipeline with unrolling and,
    if `vectorize`, loop and SLP vectorization. `back_end` names the module in LLVM's errors."""
    parsed = parse_verified(module_text(module, machine), back_end)
    return run_passes(parsed, machine, vectorize=vectorize)
