"""The register rule of the microkernels: every accumulator tile, with the vectors it loads
and its broadcast, fits the target's vector registers (CpuTarget.register_lanes,
vector_registers), on AVX2, AVX-512, SSE and aarch64 alike, over one 16-lane layout.

A tile over the registers spills its accumulators to the stack on every step of the
reduction (AVX2 at 16 lanes before the rule: 12 "vectors" of two ymm each, 1.6-2x slower).
"""
from __future__ import annotations

import re

import pytest

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.build import kernel_body
from aot.codegen.cpu import packed_conv
from aot.codegen.cpu.conv1x1 import Pointwise, is_pointwise_conv
from aot.codegen.cpu.dot_dynamic import DynamicDot
from aot.codegen.cpu.packed_conv import ConvGeometry, _conv_match
from aot.codegen.cpu.packed_dot import DotTiling, is_cpu_packed_dot
from aot.codegen.cpu.vector import accumulator_budget, registers_per_vector
from aot.codegen.llvm_pipeline import optimize_text
from aot.ir import Builder, DType, Graph, TensorType
from aot.pipeline import run_pipeline
from bodies_util import conv2d, dense

TARGETS = ["skylake-avx512", "znver4", "haswell", "znver3", "x86-64-v2", "neoverse-n1", "generic-aarch64"]


def _target(cpu: str) -> CpuTarget:
    return CpuTarget.from_name(cpu)


def _fits(target: CpuTarget, accumulators: int, lanes: int = 16) -> bool:
    """`accumulators` vectors of `lanes` f32, one loaded vector and one broadcast register fit the
    target's registers: the accumulators never spill (other loaded vectors may be read again)."""
    per_vector = registers_per_vector(target, lanes)
    return (accumulators + 1) * per_vector + 1 <= target.vector_registers


@pytest.mark.parametrize("cpu,budget", [("skylake-avx512", 24), ("haswell", 6), ("x86-64-v2", 2), ("neoverse-n1", 6)])
def test_accumulator_budget_counts_the_targets_registers(cpu, budget):
    assert accumulator_budget(_target(cpu), 16) == budget


@pytest.mark.parametrize("cpu", TARGETS)
@pytest.mark.parametrize("m,k,n", [(1, 64, 256), (6, 32, 64), (64, 128, 512), (3, 16, 17), (200, 8, 2048)])
def test_packed_dot_tile_fits_the_registers(cpu, m, k, n):
    target = _target(cpu)
    plan = run_pipeline(dense(m, k, n)())
    dots = [node for kernel in plan.kernels for node in kernel.nodes if is_cpu_packed_dot(node)]
    assert dots
    for dot in dots:
        t = DotTiling.of(dot, target)
        assert t.lanes == 16
        assert _fits(target, t.mr * t.ncb), (t.mr, t.ncb)
    if target.avx512 and m >= 6 and n >= 64:
        assert (t.mr, t.ncb) == (6, 4)  # AVX-512 keeps its wide tile
    if target.code_path == "avx2" and m >= 6:
        assert (t.mr, t.ncb) == (6, 1)  # the 6 x 16 SGEMM tile: 12 ymm


def _batched_dot(m: int, k: int, n: int) -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, (4, m, k)))
    y = g.add_input("y", TensorType(DType.F32, (4, k, n)))
    g.add_output(Builder(g).op("dot", [x, y], lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,)), "z")
    return g


@pytest.mark.parametrize("cpu", TARGETS)
@pytest.mark.parametrize("m,k,n", [(128, 64, 128), (128, 128, 32), (1, 64, 64), (128, 32, 16), (5, 7, 9)])
def test_dynamic_dot_tile_fits_the_registers(cpu, m, k, n):
    target = _target(cpu)
    plans = [DynamicDot.of(kernel, target) for kernel in run_pipeline(_batched_dot(m, k, n)).kernels]
    plans = [p for p in plans if p is not None]
    assert plans
    for p in plans:
        assert _fits(target, p.mr * p.ncb), (p.mr, p.ncb)
    if target.avx512 and (m, n) == (128, 32):
        assert (p.mr, p.ncb) == (12, 2)  # a narrow head's two blocks x 12 rows


@pytest.mark.parametrize("cpu", TARGETS)
@pytest.mark.parametrize("x_shape,o", [((1, 32, 56, 56), 64), ((1, 96, 7, 7), 320), ((1, 8, 3, 5), 4)])
def test_pointwise_conv_tile_fits_the_registers(cpu, x_shape, o):
    target = _target(cpu)
    convs = [n for kernel in run_pipeline(conv2d(x_shape, o, (1, 1))()).kernels for n in kernel.nodes if is_pointwise_conv(n)]
    assert convs
    for conv in convs:
        s = Pointwise.of(conv, target)
        assert _fits(target, s.mr * s.nv), (s.mr, s.nv)
    if target.avx512 and x_shape[2] == 56:
        assert (s.mr, s.nv) == (6, 4)


@pytest.mark.parametrize("cpu", TARGETS)
@pytest.mark.parametrize("x_shape,o,kernel,strides", [
    ((1, 64, 56, 56), 64, (3, 3), (1, 1)), ((1, 3, 224, 224), 64, (7, 7), (2, 2)), ((1, 16, 9, 11), 48, (3, 3), (1, 1)),
    ((1, 8, 12, 5), 16, (3, 3), (1, 1)),  # one channel block: never paired
])
def test_packed_conv_tile_fits_the_registers(cpu, x_shape, o, kernel, strides):
    target = _target(cpu)
    plan = run_pipeline(conv2d(x_shape, o, kernel, strides=strides, padding=((1, 1), (1, 1)))())
    matches = [m for m in (_conv_match(k, target) for k in plan.kernels) if m is not None]
    assert matches
    for match in matches:
        g = ConvGeometry.of(match)
        assert g.lanes == 16
        assert g.pixels <= match.max_pixels
        assert _fits(target, g.per_item * g.pixels), (g.per_item, g.pixels)
    if target.avx512 and o % 32 == 0:
        assert g.per_item == 2  # AVX-512 pairs channel blocks (where they split into pairs)
    if target.code_path == "avx2" and x_shape[2] >= 56:
        assert (g.per_item, g.pixels) == (1, 6)


# -- in the machine code: no stack traffic in a microkernel's FMA loop ----------------------
def _fma_loops_touching_the_stack(make, cpu: str) -> tuple[int, int]:
    """(FMA loops, those that load or store the stack) in the code for `cpu`: a one-block loop
    (a label, then code without another block up to the jump back to the label) with 8+ FMAs
    is a microkernel's reduction step; a stack operand there is a spilled value."""
    target = _target(cpu)
    plan = run_pipeline(make())
    machine = target.target_machine()
    # each kernel's body as the build optimizes it (its own module and pipeline)
    assembly = "".join(machine.emit_assembly(optimize_text(text, machine, "CPU"))
                       for i in range(len(plan.kernels)) for text in kernel_body(plan, target, i, machine).texts)
    loops: list[str] = []
    label, body = None, []
    for line in assembly.splitlines():
        block = re.match(r"^([.\w]+):", line)
        if block or re.match(r"^\s*# %bb", line):  # a labelled block, or one entered by falling through
            label, body = block.group(1) if block else None, []
            continue
        jump = re.match(r"^\s+j\w+\s+(\S+)$", line)
        if jump:
            if label is not None and jump.group(1) == label and "".join(body).count("vfmadd") >= 8:
                loops.append("\n".join(body))
            label = None  # the block ends at its first jump
        body.append(line)
    return len(loops), sum(1 for body in loops if "(%rsp)" in body)


@pytest.mark.parametrize("cpu", ["haswell", "skylake-avx512"])
@pytest.mark.parametrize("make", [
    conv2d((1, 64, 56, 56), 64, (3, 3), padding=((1, 1), (1, 1))),  # resnet18's 3x3 convs
    conv2d((1, 32, 28, 28), 64, (1, 1)),  # a pointwise conv
    dense(64, 256, 256),  # a 6-row dot tile
], ids=["conv3x3", "pointwise", "dot"])
def test_microkernel_loops_keep_their_values_in_registers(cpu, make):
    loops, spilling = _fma_loops_touching_the_stack(make, cpu)
    assert loops and spilling == 0, (loops, spilling)


def test_unrolled_taps_would_spill_on_avx2(monkeypatch):
    """The check above can fail: AVX2 code with a row's taps unrolled (as AVX-512 has them)
    keeps the shared broadcasts live and spills (the 3x3 convs' loop before the rule)."""
    monkeypatch.setattr(packed_conv, "_taps_unrolled", lambda *args: True)
    _, spilling = _fma_loops_touching_the_stack(conv2d((1, 64, 56, 56), 64, (3, 3), padding=((1, 1), (1, 1))), "haswell")
    assert spilling > 0
