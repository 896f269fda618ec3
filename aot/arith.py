"""Integer helpers shared by the IR, the passes, codegen and the importers."""
from __future__ import annotations


def ceil_div(a: int, b: int) -> int:
    """a / b rounded up, for b > 0 (exact on ints of any size, unlike math.ceil(a / b))."""
    return -(-a // b)


def align_up(n: int, alignment: int) -> int:
    """The least multiple of `alignment` (> 0) that is >= n."""
    return ceil_div(n, alignment) * alignment
