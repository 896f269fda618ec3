"""Assemble PTX with NVIDIA's ptxas (when installed) and read its per-kernel resource report."""
from __future__ import annotations

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


@dataclass(frozen=True)
class PtxasInfo:
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


def ptxas_path() -> str | None:
    return shutil.which("ptxas")


def assemble(ptx: str, sm: str) -> dict[str, PtxasInfo]:
    """Run `ptxas -arch=<sm> -v` on `ptx`; per kernel symbol, what it reports. Raises
    CodegenError with ptxas's messages when it rejects the PTX or is not installed."""
    tool = ptxas_path()
    if tool is None:
        raise CodegenError("ptxas is not installed (it comes with the CUDA toolkit)")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernels.ptx"
        source.write_text(ptx)
        done = subprocess.run([tool, f"-arch={sm}", "-v", str(source), "-o", str(Path(tmp) / "kernels.cubin")],
                              capture_output=True, text=True)
    report = done.stdout + done.stderr
    if done.returncode != 0:
        raise CodegenError(f"ptxas -arch={sm} rejected the PTX:\n{report}")
    return parse_report(report)


def parse_report(report: str) -> dict[str, PtxasInfo]:
    """ptxas -v prints, per entry, a 'Compiling entry function' line, then the stack/spill line,
    then 'Used N registers'."""
    found: dict[str, PtxasInfo] = {}
    kernel: str | None = None
    frame: tuple[int, int, int] = (0, 0, 0)
    for line in report.splitlines():
        if (m := _ENTRY.search(line)) is not None:
            kernel, frame = m.group(1), (0, 0, 0)
        elif (m := _FRAME.search(line)) is not None:
            frame = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) is not None and kernel is not None:
            found[kernel] = PtxasInfo(int(m.group(1)), *frame)
            kernel = None
    return found
