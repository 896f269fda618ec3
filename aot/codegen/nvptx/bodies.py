"""The GPU kernel bodies, in the one order a kernel tries them: the first whose `applies`
takes the kernel emits it.

Where two bodies accept one kernel, the earlier wins:
- mma before gemv and gemm: f16/bf16 dots on tensor cores (gemv and gemm take f32 only);
  mma_tf32 takes f32 dots, but only with --gpu-matmul-precision tf32 (GpuBody.precision);
- gemv before gemm: a dot of at most 16 rows is a weight stream, not a tile problem;
- the conv and pool bodies before reduce: global pooling is a reduce over the spatial
  dims, which the row-group reduce body would take too, at a warp per row without the
  pooling body's choice of a block for long rows;
- reduce before columns: a reduction read at one index per root row (a softmax over the
  innermost dim) is a row's work; columns takes reductions read per output column
  (over outer axes), which reduce declines;
- every body before rows: rows (one thread per output row, the CPU's elemental work
  item) takes every kernel the elemental emitter can compute, so it comes last.
sort, argsort and scatter have no elemental lowering: only their own bodies (sort.py,
scatter.py) take them, and a kernel no body takes is refused by name.
"""
from __future__ import annotations

from aot.codegen.nvptx.body import GpuBody, GpuContext
from aot.codegen.nvptx.columns import COLUMNS_BODY
from aot.codegen.nvptx.conv import DIRECT_CONV_BODY, GEMM_CONV_BODY
from aot.codegen.nvptx.elementwise import ELEMENTWISE_BODY, NOT_ELEMENTAL, ROWS_BODY
from aot.codegen.nvptx.pool import GLOBAL_POOL_BODY, WINDOW_POOL_BODY
from aot.codegen.nvptx.gemm import GEMM_BODY, GEMV_BODY
from aot.codegen.nvptx.mma import MMA_BODY, MMA_TF32_BODY
from aot.codegen.nvptx.reduce import REDUCE_BODY
from aot.codegen.nvptx.scatter import SCATTER_BODY
from aot.codegen.nvptx.sort import SORT_BODY
from aot.errors import CodegenError
from aot.plan import Kernel

__all__ = ["BODIES", "GpuBody", "GpuContext", "gpu_body_of"]

BODIES: tuple[GpuBody, ...] = (SORT_BODY, SCATTER_BODY, ELEMENTWISE_BODY, MMA_BODY, MMA_TF32_BODY, GEMV_BODY, GEMM_BODY,
                               GEMM_CONV_BODY,
                               DIRECT_CONV_BODY, WINDOW_POOL_BODY, GLOBAL_POOL_BODY, REDUCE_BODY, COLUMNS_BODY,
                               ROWS_BODY)


def gpu_body_of(kernel: Kernel, matmul_precision: str = "fp32") -> GpuBody:
    """The first body that takes `kernel`, of those `matmul_precision` allows (GpuBody.precision)."""
    body = next((b for b in BODIES if b.precision in (None, matmul_precision) and b.applies(kernel)), None)
    if body is None:
        root = kernel.root.producer
        missing = [op for op in kernel.ops if op in NOT_ELEMENTAL] or [root.op if root is not None else "parameter"]
        raise CodegenError(f"kernel {kernel.name} (root op {missing[-1]}): no GPU body for {missing[0]} yet")
    return body
