"""nvptx/ptxas.py: the cubin and per-kernel report of `ptxas -v` (registers, stack, spills and
static shared memory), and its errors."""
from __future__ import annotations

import pytest

from aot.codegen.nvptx import ptxas
from aot.codegen.nvptx.ptxas import PtxasInfo, assemble, assemble_cubin, parse_report, ptxas_version
from aot.errors import CodegenError
from gpu_util import needs_ptxas

# one kernel with 1 KiB of static shared memory and a barrier
SHARED_PTX = """.version 7.0
.target sm_80
.address_size 64
.visible .entry stage(.param .u64 out)
{
  .shared .align 4 .b8 tile[1024];
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, tile;
  add.u32 %r3, %r3, %r2;
  st.shared.u32 [%r3], %r1;
  bar.sync 0;
  ld.shared.u32 %r1, [%r3+4];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  st.global.u32 [%rd2], %r1;
  ret;
}
"""


def test_report_reads_registers_spills_stack_and_shared_memory():
    report = ("ptxas info    : 0 bytes gmem\n"
              "ptxas info    : Compiling entry function 'aot_kernel_0' for 'sm_90'\n"
              "ptxas info    : Function properties for aot_kernel_0\n"
              "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
              "ptxas info    : Used 64 registers, used 1 barriers, 4096 bytes smem, 384 bytes cmem[0]\n"
              "ptxas info    : Compiling entry function 'aot_kernel_1' for 'sm_90'\n"
              "ptxas info    : Function properties for aot_kernel_1\n"
              "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
              "ptxas info    : Used 12 registers, used 0 barriers, 376 bytes cmem[0]\n")
    assert parse_report(report) == {"aot_kernel_0": PtxasInfo(64, 16, 8, 4, 4096),
                                    "aot_kernel_1": PtxasInfo(12, 0, 0, 0, 0)}


@needs_ptxas
@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
def test_assemble_cubin_gives_an_elf_cubin_and_the_report(sm):
    done = assemble_cubin(SHARED_PTX, sm)
    assert done.cubin[:4] == b"\x7fELF"
    assert done.kernels["stage"].shared_bytes == 1024 and done.kernels["stage"].registers > 0
    assert assemble(SHARED_PTX, sm) == done.kernels
    assert assemble_cubin(SHARED_PTX, sm).cubin == done.cubin  # same PTX, same bytes: artifacts stay deterministic


@needs_ptxas
def test_rejected_ptx_is_a_codegen_error_with_ptxas_messages():
    # PTX 7.0 predates sm_90: ptxas refuses; the message names the SM, not a temp path
    bad = SHARED_PTX.replace(".target sm_80", ".target sm_90")
    with pytest.raises(CodegenError, match=r"ptxas -arch=sm_90 rejected the PTX") as err:
        assemble_cubin(bad, "sm_90")
    assert "kernels.sm_90.ptx, line 2" in str(err.value) and "/tmp" not in str(err.value)


@needs_ptxas
def test_version_is_read_from_ptxas():
    assert ptxas_version().count(".") == 2


def test_missing_ptxas_is_a_codegen_error(monkeypatch):
    monkeypatch.setattr(ptxas, "ptxas_path", lambda: None)
    assert ptxas_version() is None
    with pytest.raises(CodegenError, match="ptxas is not installed"):
        assemble_cubin(SHARED_PTX, "sm_80")
