"""The GPU options a compile checks before any work, without loading the NVPTX back end
(whose imports cost a CPU-only compile ~30 ms)."""
from __future__ import annotations

from aot.errors import ArgumentError

# --gpu-matmul-precision: "fp32" computes f32 dots in f32; "tf32" lets them run on tensor
# cores with each input rounded to tf32 (10 mantissa bits), which changes their results
MATMUL_PRECISIONS = ("fp32", "tf32")


def check_matmul_precision(precision: object) -> str:
    if precision not in MATMUL_PRECISIONS:
        raise ArgumentError(f"GPU matmul precision {precision!r} is not supported; choose one of "
                            f"{', '.join(MATMUL_PRECISIONS)}")
    return precision  # type: ignore[return-value]
