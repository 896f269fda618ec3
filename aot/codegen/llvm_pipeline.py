"""The LLVM step every back end shares: parse and verify the llvmlite module, then O3."""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from aot.errors import CodegenError


def run_o3(module: ir.Module, machine: llvm.TargetMachine, *, vectorize: bool, back_end: str) -> llvm.ModuleRef:
    """Parse and verify `module` for `machine`, then run the O3 pipeline with unrolling and,
    if `vectorize`, loop and SLP vectorization. `back_end` names the module in LLVM's errors."""
    module.data_layout = str(machine.target_data)
    try:
        parsed = llvm.parse_assembly(str(module))
        parsed.verify()
    except RuntimeError as err:
        raise CodegenError(f"LLVM rejected the generated {back_end} module: {err}") from None
    parsed.name = "aot"
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = vectorize
    tuning.slp_vectorization = vectorize
    tuning.loop_unrolling = True
    passes = llvm.create_pass_builder(machine, tuning)
    passes.getModulePassManager().run(parsed, passes)
    return parsed
