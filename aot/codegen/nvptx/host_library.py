"""Host-code libraries for the test stand-in CUDA driver (runtime_c/tests/fake_cuda.c).

    paths = write_host_library(plan, [ptx_bytes, cubin_bytes], folder)   # folder/<module_key(image)>.so
    artifact_host_libraries(result, folder)    # the same for every SM's PTX and cubin of an artifact

The stand-in runs no PTX: when the runtime hands it a module image (cuModuleLoadDataEx),
it dlopens `<AOT_FAKE_CUDA_HOST_DIR>/<module_key(image)>.so`, a shared object of the same
kernels built for the host as nvptx/emulate.py builds them (build_host_module, then
run_o3). Besides the host kernels, the library exports the table the stand-in reads
(runtime_c/tests/fake_cuda.h):

    aot_fake_kernel_table: {const char* symbol; void (*run)(void** params); uint32 param_count;
                            uint32 grid[3]; uint32 block[3]; uint32 shared_bytes; int64 blocks;}[n]
    aot_fake_kernel_count: uint32 n

one record per host function: every plan kernel (aot_kernel_<i>: the host build keeps
one function per kernel where the GPU build shares one between kernels of the same code,
kernel.py code_key) and the checks kernel. `run(params)` takes CUDA's kernelParams (each
params[i] points to a uint64 device address) and runs blocks [0, blocks) of the kernel;
grid, block and shared are the launch the kernel's code wants, which the stand-in checks
every launch against.

A module key is 16 lowercase hex digits of the 64-bit FNV-1a hash of the image's bytes:
a PTX text without its NUL (the stand-in hashes strlen bytes of the text it gets), a
cubin's whole ELF (the stand-in finds its size in the ELF headers). Test tooling: nothing
here is in an artifact.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import run_o3
from aot.codegen.nvptx.emulate import build_host_module
from aot.codegen.nvptx.kernel import GpuKernel
from aot.errors import ArgumentError, CodegenError
from aot.plan import ExecutionPlan

if TYPE_CHECKING:
    from aot.driver import CompileResult

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1
TABLE = "aot_fake_kernel_table"
COUNT = "aot_fake_kernel_count"

I8P = ir.IntType(8).as_pointer()
I32 = ir.IntType(32)
I64 = ir.IntType(64)
RUN = ir.FunctionType(ir.VoidType(), [I8P.as_pointer()])
# aot_fake_kernel_record_t: LLVM's natural layout is the C one (56 bytes, blocks at 48)
RECORD = ir.LiteralStructType([I8P, RUN.as_pointer(), I32, ir.ArrayType(I32, 3), ir.ArrayType(I32, 3), I32, I64])


def module_key(image: bytes) -> str:
    """The name the stand-in looks a module's host code up by: FNV-1a 64 of `image`."""
    digest = FNV_OFFSET
    for byte in image:
        digest = ((digest ^ byte) * FNV_PRIME) & MASK64
    return f"{digest:016x}"


def _emit_run(module: ir.Module, kernel: GpuKernel) -> ir.Function:
    """`run(params)`: the kernel's host function over the addresses params[i] point to, all blocks."""
    host = module.get_global(kernel.symbol)
    run = ir.Function(module, RUN, name=f"aot_fake_run_{kernel.symbol}")
    run.linkage = "internal"
    params = run.args[0]
    params.name = "params"
    builder = ir.IRBuilder(run.append_basic_block("entry"))
    args = []
    for i, (arg, param) in enumerate(zip(kernel.args, host.args)):
        slot = builder.load(builder.gep(params, [ir.Constant(I32, i)]), name=f"{arg.value}.slot")
        address = builder.load(builder.bitcast(slot, I64.as_pointer()), name=f"{arg.value}.address")
        args.append(builder.inttoptr(address, param.type, name=arg.value))
    builder.call(host, [*args, ir.Constant(I64, 0), ir.Constant(I64, kernel.blocks)])
    builder.ret_void()
    return run


def _emit_table(module: ir.Module, kernels: Sequence[GpuKernel]) -> None:
    records = []
    for kernel in kernels:
        text = bytearray(kernel.symbol.encode("ascii") + b"\0")
        name = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(text)), name=f"aot_fake_name_{kernel.symbol}")
        name.linkage = "private"
        name.global_constant = True
        name.initializer = ir.Constant(name.type.pointee, text)
        records.append(ir.Constant(RECORD, [
            name.bitcast(I8P), _emit_run(module, kernel), ir.Constant(I32, len(kernel.args)),
            ir.Constant(ir.ArrayType(I32, 3), [kernel.grid, 1, 1]),
            ir.Constant(ir.ArrayType(I32, 3), [kernel.block, 1, 1]),
            ir.Constant(I32, kernel.shared_bytes), ir.Constant(I64, kernel.blocks)]))
    table = ir.GlobalVariable(module, ir.ArrayType(RECORD, len(records)), name=TABLE)
    table.global_constant = True
    table.initializer = ir.Constant(table.type.pointee, records)
    count = ir.GlobalVariable(module, I32, name=COUNT)
    count.global_constant = True
    count.initializer = ir.Constant(I32, len(records))


def build_host_object(plan: ExecutionPlan, matmul_precision: str = "fp32") -> bytes:
    """An ELF object of `plan`'s kernels for this host (as emulate.py builds them) and the table."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = CpuTarget.host()
    machine = target.target_machine()  # position-independent: it goes into a shared object
    module, kernels, checks = build_host_module(plan, target, matmul_precision)
    # the kernels are reached through the table only: internal, so a call never binds to a
    # same-named kernel of another library in the process
    for fn in module.functions:
        if not fn.is_declaration:
            fn.linkage = "internal"
    _emit_table(module, [*kernels, *([checks] if checks else [])])
    return machine.emit_object(run_o3(module, machine, vectorize=True, back_end="host-code library"))


def link_shared_library(obj: bytes) -> bytes:
    """`obj` linked into a shared object by the host's C compiler ($CC, else cc), with libm and libc
    for the libcalls LLVM may emit (memcpy, fmodf)."""
    with tempfile.TemporaryDirectory(prefix="aot-host-library-") as tmp:
        Path(tmp, "kernels.o").write_bytes(obj)
        # -z defs: a symbol nothing defines (a libcall LLVM chose) fails here, not at dlopen
        command = [os.environ.get("CC") or "cc", "-shared", "-Wl,-z,noexecstack", "-Wl,-z,defs", "-o", "kernels.so",
                   "kernels.o", "-lm"]
        try:
            result = subprocess.run(command, cwd=tmp, capture_output=True, text=True)
        except OSError as err:
            raise CodegenError(f"linking the host-code library failed ({' '.join(command)}): {err}") from None
        if result.returncode != 0:
            raise CodegenError(f"linking the host-code library failed ({' '.join(command)}, exit "
                               f"{result.returncode}): {result.stderr.strip()}")
        return Path(tmp, "kernels.so").read_bytes()


def _check_image(image: bytes) -> None:
    if image[:4] == b"\x7fELF":
        return
    if b"\0" in image:
        raise ArgumentError("a PTX image is given without its NUL (the stand-in hashes the text before it), "
                           f"but this one holds a NUL at byte {image.index(0)}")


def write_host_library(plan: ExecutionPlan, images: Sequence[bytes], folder: str | os.PathLike,
                       matmul_precision: str = "fp32") -> list[Path]:
    """Build `plan`'s host-code library once and install it in `folder` as `<module_key(image)>.so`
    for each of `images` (the artifact's PTX texts, without NUL, and cubins, as the runtime will
    load them); returns those paths, one per distinct key in `images` order."""
    for image in images:
        _check_image(image)
    library = link_shared_library(build_host_object(plan, matmul_precision))
    directory = Path(folder)
    directory.mkdir(parents=True, exist_ok=True)
    paths = list(dict.fromkeys(directory / f"{module_key(bytes(image))}.so" for image in images))
    handle, staged = tempfile.mkstemp(prefix=".host-library-", suffix=".so", dir=directory)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(library)
        for path in paths:
            # a hard link per key (each renamed into place, so a reader never sees half a file)
            linked = path.with_name(f".{path.name}.{os.getpid()}")
            try:
                os.link(staged, linked)
            except OSError:
                linked.write_bytes(library)
            os.replace(linked, path)
    finally:
        os.unlink(staged)
    return paths


def artifact_host_libraries(result: CompileResult, folder: str | os.PathLike) -> None:
    """The host-code library of `result` (compiled with cuda in its targets) installed in
    `folder` for every SM's PTX and cubin section of its artifact, built with the manifest's
    matmul precision."""
    from aot.artifact import read_artifact

    cuda = result.manifest.get("cuda")
    if cuda is None:
        raise ArgumentError("the artifact holds no GPU code: compile it with target 'cuda' or 'cpu,cuda'")
    sections = read_artifact(result.artifact).sections
    images = [sections[entry[kind]] for entry in cuda["sms"] for kind in ("ptx", "cubin") if kind in entry]
    write_host_library(result.plan, images, folder, cuda.get("matmul_precision", "fp32"))
