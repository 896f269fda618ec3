"""Which aarch64 extensions code for a CPU may use: the manifest's cpu[].aarch64_features.

Code for a Neoverse V1 uses SVE (LLVM selects predicated loads for masked ones, even in
fixed-width code) and dies with SIGILL on a Neoverse N1; the runtime looks each listed
extension up in the kernel's hardware capabilities (getauxval, runtime_c/src/
cpu_features_aarch64.c) and refuses the code, naming what is missing, before it loads it.

llvmlite does not say which features an LLVM CPU name implies, and a hand-copied table of
LLVM's processors would go stale with each LLVM. So each extension is asked of LLVM by what
it selects: a small function that LLVM compiles with the extension's instruction where the
target has it and without it otherwise (an fp16 add is `fadd v.4h` with full fp16, a
widening add without). Each probe lowers on every aarch64 target, so asking never aborts
LLVM. Only extensions LLVM selects for plain IR are listed (those reached through
intrinsics alone never appear in this compiler's code).
"""
from __future__ import annotations

import functools
import re

import llvmlite.binding as llvm

_TRIPLE = "aarch64-unknown-linux-gnu"

# (LLVM's feature name, probe IR, what its assembly holds with the feature), in the order
# of the manifest's list; runtime_c/src/cpu_features_aarch64.c knows the same names.
_PROBES: tuple[tuple[str, str, str], ...] = (
    ("lse", """
define i32 @probe(ptr %p) {
  %r = atomicrmw add ptr %p, i32 1 seq_cst
  ret i32 %r
}""", r"\bldadd"),
    ("fullfp16", """
define <4 x half> @probe(<4 x half> %a, <4 x half> %b) {
  %r = fadd <4 x half> %a, %b
  ret <4 x half> %r
}""", r"\bfadd\tv\d+\.4h"),
    ("dotprod", """
define <4 x i32> @probe(<4 x i32> %acc, <16 x i8> %a, <16 x i8> %b) {
  %x = sext <16 x i8> %a to <16 x i32>
  %y = sext <16 x i8> %b to <16 x i32>
  %m = mul <16 x i32> %x, %y
  %r = call <4 x i32> @llvm.vector.partial.reduce.add.v4i32.v16i32(<4 x i32> %acc, <16 x i32> %m)
  ret <4 x i32> %r
}
declare <4 x i32> @llvm.vector.partial.reduce.add.v4i32.v16i32(<4 x i32>, <16 x i32>)""", r"\bsdot\b"),
    ("i8mm", """
define <4 x i32> @probe(<4 x i32> %acc, <16 x i8> %a, <16 x i8> %b) {
  %x = zext <16 x i8> %a to <16 x i32>
  %y = sext <16 x i8> %b to <16 x i32>
  %m = mul <16 x i32> %x, %y
  %r = call <4 x i32> @llvm.vector.partial.reduce.add.v4i32.v16i32(<4 x i32> %acc, <16 x i32> %m)
  ret <4 x i32> %r
}
declare <4 x i32> @llvm.vector.partial.reduce.add.v4i32.v16i32(<4 x i32>, <16 x i32>)""", r"\busdot\b"),
    ("bf16", """
define <4 x bfloat> @probe(<4 x float> %a) {
  %r = fptrunc <4 x float> %a to <4 x bfloat>
  ret <4 x bfloat> %r
}""", r"\bbfcvtn\b"),
    ("sve", """
define void @probe(ptr %p, ptr %q, <4 x i1> %m) {
  %v = call <4 x float> @llvm.masked.load.v4f32.p0(ptr %p, i32 4, <4 x i1> %m, <4 x float> zeroinitializer)
  store <4 x float> %v, ptr %q
  ret void
}
declare <4 x float> @llvm.masked.load.v4f32.p0(ptr, i32, <4 x i1>, <4 x float>)""", r"\bz\d+\.s\b"),
    # NEON has no 64-bit lane multiply: SVE multiplies under a predicate, SVE2 without one
    ("sve2", """
define <2 x i64> @probe(<2 x i64> %a, <2 x i64> %b) {
  %r = mul <2 x i64> %a, %b
  ret <2 x i64> %r
}""", r"\bmul\tz\d+\.d, z\d+\.d, z\d+\.d"),
    ("cssc", """
define i64 @probe(i64 %a, i64 %b) {
  %r = call i64 @llvm.smax.i64(i64 %a, i64 %b)
  ret i64 %r
}
declare i64 @llvm.smax.i64(i64, i64)""", r"\bsmax\tx\d+"),
    ("mops", """
define void @probe(ptr %d, ptr %s, i64 %n) {
  call void @llvm.memcpy.p0.p0.i64(ptr %d, ptr %s, i64 %n, i1 false)
  ret void
}
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)""", r"\bcpyf"),
)

AARCH64_CHECKED_FEATURES: tuple[str, ...] = tuple(name for name, _, _ in _PROBES)


@functools.lru_cache(maxsize=64)
def aarch64_features(cpu: str, features: str) -> tuple[str, ...]:
    """The AARCH64_CHECKED_FEATURES that LLVM uses in code for `cpu` with the feature string
    `features` ("+sve,-bf16"), in that order."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple(_TRIPLE).create_target_machine(cpu=cpu, features=features, opt=2, reloc="pic")
    found = []
    for name, probe, selected in _PROBES:
        module = llvm.parse_assembly(f'target triple = "{_TRIPLE}"\n{probe}')
        module.verify()
        if re.search(selected, machine.emit_assembly(module)):
            found.append(name)
    return tuple(found)
