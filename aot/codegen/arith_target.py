"""What the shared scalar emitters (codegen/elemental.py, codegen/math.py) need to know of a target.

The elemental emitter and the math library are target-neutral LLVM IR except
for two choices: whether rounding intrinsics (floor, ceil, roundeven) lower to
instructions or would become libm calls, and whether half <-> float
conversions lower to instructions, and whether a max or min against a constant is
cheaper as a compare and select. CpuTarget (cpu/target.py) and NvptxTarget
(nvptx/target.py) both answer them; nothing else of a target reaches those
emitters.
"""
from __future__ import annotations

from typing import Protocol


class ArithTarget(Protocol):
    @property
    def native_rounding(self) -> bool:
        """floor/ceil/roundeven lower to instructions (not libm calls)."""
        ...

    @property
    def native_f16(self) -> bool:
        """fpext/fptrunc between half and float lower to instructions; f16 is stored as half."""
        ...

    @property
    def select_bounded_minmax(self) -> bool:
        """A float max/min against a non-NaN constant is cheaper as a compare and select than
        as llvm.maximum/minimum (x86: maxps/minps, which return the second operand on NaN,
        against maxps, an unordered compare and a blend)."""
        ...
