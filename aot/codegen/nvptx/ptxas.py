"""Assemble PTX with NVIDIA's ptxas (when installed): the cubin, and its per-kernel resource report."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aot.errors import CodegenError

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_VERSION = re.compile(r"release [\d.]+, V([\d.]+)")


@dataclass(frozen=True)
class PtxasInfo:
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int = 0  # static shared memory ("bytes smem"); a launch adds its dynamic bytes


@dataclass(frozen=True)
class Assembly:
    """What ptxas made of one PTX module for one SM: the cubin and, per kernel symbol, its report."""

    cubin: bytes
    kernels: dict[str, PtxasInfo]


def ptxas_path() -> str | None:
    return shutil.which("ptxas")


@functools.cache
def _version_of(tool: str) -> str:
    done = subprocess.run([tool, "--version"], capture_output=True, text=True)
    m = _VERSION.search(done.stdout)
    return m.group(1) if m else "unknown"


def ptxas_version() -> str | None:
    """The installed ptxas's version ("13.0.88"), None without one."""
    tool = ptxas_path()
    return _version_of(tool) if tool is not None else None


def assemble_cubin(ptx: str, sm: str) -> Assembly:
    """Run `ptxas -arch=<sm> -v` on `ptx`: the cubin and what it reports per kernel. Raises
    CodegenError with ptxas's messages when it rejects the PTX or is not installed."""
    tool = ptxas_path()
    if tool is None:
        raise CodegenError("ptxas is not installed (it comes with the CUDA toolkit)")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernels.ptx"
        cubin = Path(tmp) / "kernels.cubin"
        source.write_text(ptx)
        done = subprocess.run([tool, f"-arch={sm}", "-v", str(source), "-o", str(cubin)],
                              capture_output=True, text=True)
        # the temp path means nothing to a reader of the message
        report = (done.stdout + done.stderr).replace(str(source), f"kernels.{sm}.ptx")
        if done.returncode != 0:
            raise CodegenError(f"ptxas -arch={sm} rejected the PTX:\n{report}")
        return Assembly(cubin.read_bytes(), parse_report(report))


def assemble(ptx: str, sm: str) -> dict[str, PtxasInfo]:
    """Per kernel symbol, what `ptxas -arch=<sm> -v` reports for `ptx` (assemble_cubin)."""
    return assemble_cubin(ptx, sm).kernels


def parse_report(report: str) -> dict[str, PtxasInfo]:
    """ptxas -v prints, per entry, a 'Compiling entry function' line, then the stack/spill line,
    then 'Used N registers, ...' (with 'M bytes smem' when the kernel declares shared memory)."""
    found: dict[str, PtxasInfo] = {}
    kernel: str | None = None
    frame: tuple[int, int, int] = (0, 0, 0)
    for line in report.splitlines():
        if (m := _ENTRY.search(line)) is not None:
            kernel, frame = m.group(1), (0, 0, 0)
        elif (m := _FRAME.search(line)) is not None:
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) is not None and kernel is not None:
            smem = _SMEM.search(line)
            found[kernel] = PtxasInfo(int(m.group(1)), *frame, int(smem.group(1)) if smem else 0)
            kernel = None
    return found
