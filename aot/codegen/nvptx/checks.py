"""The GPU checks kernel: the plan's run-time checks (ir/ops/checks.py) evaluated on the device.

    __global__ void aot_model_checks(void* buffer0, ..., int32_t* status);

Launched once after the last kernel (grid 1, block 1): its one thread writes
*status = 1 + the index of the first of `plan.checks` whose boolean is false, 0 when
all pass, as the CPU code's `aot_model_checks` returns it (codegen/cpu/kernel.py),
and the runtime reports `checks[*status - 1].message`.

Its parameters are the buffers the checks read, each once and at its base (arena and
weights at offset 0, model input / output k), then the status word; each check's byte
offset is in the code. One address per check would cap a model at 511 checks (CUDA's
4 KiB of parameters; manifest_check.MAX_KERNEL_ARGS) where the manifest allows 2^20.

The checks' bytes are all loaded first and folded by a select chain from the last
check to the first, so the loads are independent (in flight together) and the code
has no branch; a check costs a load and a select, nothing a warp of threads would
speed up. The host realization (nvptx/emulate.py) has the same parameters plus the
(block_begin, block_end) every emulated kernel takes, unused here.
"""
from __future__ import annotations

from llvmlite import ir

from aot.codegen.loops import I64
from aot.codegen.nvptx.kernel import GpuArg, GpuKernel
from aot.errors import CodegenError
from aot.plan import ExecutionPlan

# the CPU code's name for the same function (codegen/cpu/kernel.py), as FORMAT.md spells it
CHECKS_SYMBOL = "aot_model_checks"
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I8P = I8.as_pointer()
STATUS = GpuArg("status", 0, 0, "status")


def check_buffers(plan: ExecutionPlan) -> tuple[list[GpuArg], list[tuple[int, int]]]:
    """The buffers the checks read, in first-use order (each at its base), and per check
    (which of those, byte offset of its boolean in it)."""
    buffers: list[GpuArg] = []
    slots: dict[tuple[str, int], int] = {}
    reads: list[tuple[int, int]] = []
    for i, check in enumerate(plan.checks):
        where = plan.slices.get(check.ok.name)
        if where is None:
            raise CodegenError(f"check {i} ({check.loc or 'no source node'}): "
                               f"value %{check.ok.name} has no buffer slice")
        if where.kind in ("arena", "weights"):
            key, offset = (where.kind, 0), where.offset
        elif where.kind in ("input", "output"):
            key, offset = (where.kind, where.index), 0
        else:
            raise CodegenError(f"value %{check.ok.name} has a slice of unknown kind {where.kind!r}")
        if key not in slots:
            slots[key] = len(buffers)
            buffers.append(GpuArg(key[0], key[1], 0, key[0] if key[0] in ("arena", "weights") else f"{key[0]}{key[1]}"))
        reads.append((slots[key], offset))
    return buffers, reads


def emit_checks(module: ir.Module, plan: ExecutionPlan, realization: str = "gpu") -> GpuKernel | None:
    """`aot_model_checks` for `plan`'s checks (None when it has none); `realization` "gpu"
    (a ptx_kernel) or "host" (with the emulator's two block-range parameters)."""
    if not plan.checks:
        return None
    buffers, reads = check_buffers(plan)
    extra = [I64, I64] if realization == "host" else []
    params = [I8P] * len(buffers) + [I32.as_pointer()] + extra
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name=CHECKS_SYMBOL)
    if realization == "gpu":
        fn.calling_convention = "ptx_kernel"
    fn.attributes.add("nounwind")
    for param, arg in zip(fn.args, buffers):
        param.name = arg.value
    status = fn.args[len(buffers)]
    status.name = "status"
    if extra:
        fn.args[-2].name, fn.args[-1].name = "block_begin", "block_end"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    failed = []
    for i, (slot, offset) in enumerate(reads):
        address = builder.gep(fn.args[slot], [ir.Constant(I64, offset)], inbounds=True, name=f"check{i}.ptr")
        byte = builder.load(address, name=f"check{i}.byte", align=1)
        failed.append(builder.icmp_unsigned("==", byte, ir.Constant(I8, 0), name=f"check{i}.failed"))
    answer: ir.Value = ir.Constant(I32, 0)
    for i in reversed(range(len(failed))):
        answer = builder.select(failed[i], ir.Constant(I32, i + 1), answer, name=f"first{i}")
    builder.store(answer, status, align=4)
    builder.ret_void()
    return GpuKernel(CHECKS_SYMBOL, "checks", "checks", 1, 1, 1, 0, 0, (*buffers, STATUS))
