"""What the NVPTX back end emits code for: one SM architecture and its PTX version."""
from __future__ import annotations

from dataclasses import dataclass

import llvmlite.binding as llvm

from aot.errors import ArgumentError
from aot.gpu_options import check_matmul_precision

TRIPLE = "nvptx64-nvidia-cuda"
# the lowest PTX ISA version that has each architecture (NOTES: sm_80 -> 7.0, sm_90 -> 7.8)
PTX_FEATURES = {"sm_80": "+ptx70", "sm_90": "+ptx78"}


@dataclass(frozen=True)
class NvptxTarget:
    sm: str  # "sm_80" or "sm_90"
    matmul_precision: str = "fp32"  # gpu_options.MATMUL_PRECISIONS

    def __post_init__(self) -> None:
        if self.sm not in PTX_FEATURES:
            raise ArgumentError(f"GPU architecture '{self.sm}': aot generates code for {', '.join(PTX_FEATURES)}")
        check_matmul_precision(self.matmul_precision)

    @property
    def triple(self) -> str:
        return TRIPLE

    @property
    def features(self) -> str:
        return PTX_FEATURES[self.sm]

    # ArithTarget (codegen/arith_target.py): PTX has cvt.rmi/rpi/rni and f16 <-> f32 cvt on every SM
    @property
    def native_rounding(self) -> bool:
        return True

    @property
    def native_f16(self) -> bool:
        return True

    @property
    def select_bounded_minmax(self) -> bool:
        return False  # max.NaN.f32 / min.NaN.f32: llvm.maximum/minimum are one instruction

    def target_machine(self) -> llvm.TargetMachine:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        target = llvm.Target.from_triple(TRIPLE)
        return target.create_target_machine(cpu=self.sm, features=self.features, opt=3)

    @property
    def data_layout(self) -> str:
        return str(self.target_machine().target_data)
