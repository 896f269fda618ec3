"""The shared LLVM step (codegen/llvm_pipeline.py): which modules skip the loop vectorizer."""
from __future__ import annotations

import numpy as np

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.bodies import body_of
from aot.codegen.cpu.build import kernel_body
from aot.codegen.llvm_pipeline import OWN_VECTORS, optimize_text
from aot.ir import Builder, DType, Graph, TensorType
from aot.pipeline import PipelineOptions, default_passes, run_pipeline

HASWELL = CpuTarget.from_name("haswell")

# a scalar loop the loop vectorizer turns into <8 x float> code on AVX2
SCALE_LOOP = """
define void @scale(ptr noalias %x, ptr noalias %y) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %px = getelementptr inbounds float, ptr %x, i64 %i
  %v = load float, ptr %px, align 4
  %s = fmul float %v, 2.0
  %py = getelementptr inbounds float, ptr %y, i64 %i
  store float %s, ptr %py, align 4
  %next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %next, 1000
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
"""


def _optimized(first_line: str) -> str:
    text = f'{first_line}target triple = "{HASWELL.triple}"\n{SCALE_LOOP}'
    return str(optimize_text(text, HASWELL.target_machine(), "test"))


def test_a_plain_module_is_loop_vectorized():
    assert "<8 x float>" in _optimized("")


def test_a_module_of_own_vector_code_is_not():
    optimized = _optimized(OWN_VECTORS)
    assert "x float>" not in optimized
    assert "fmul float" in optimized


def _conv_relu_plan(channels: int, kernel: int):
    graph = Graph()
    x = graph.add_input("x", TensorType(DType.F32, (1, channels, 9, 9)))
    b = Builder(graph)
    w = b.constant(np.random.default_rng(0).standard_normal((32, channels, kernel, kernel)).astype(np.float32))
    pad = kernel // 2
    y = b.op("conv", [x, w], strides=(1, 1), padding=((pad, pad), (pad, pad)), dilation=(1, 1), groups=1)
    graph.add_output(b.op("exp", [y]), "y")
    return run_pipeline(graph, PipelineOptions(passes=default_passes(HASWELL.vector_lanes)))


def test_conv_bodies_are_marked_and_elemental_ones_are_not():
    """A body's text says whether it skips the loop vectorizer: packed and pointwise convs (vector
    code throughout) do; an elemental body, scalar code for LLVM to vectorize, keeps it."""
    machine = HASWELL.target_machine()
    for channels, kernel in ((16, 3), (16, 1)):
        plan = _conv_relu_plan(channels, kernel)
        (index,) = [i for i, k in enumerate(plan.kernels) if body_of(k, HASWELL) is not None]
        body = body_of(plan.kernels[index], HASWELL)
        assert body is not None and body.own_vectors, body
        text = kernel_body(plan, HASWELL, index, machine).text
        assert text.startswith(OWN_VECTORS)
    graph = Graph()
    x = graph.add_input("x", TensorType(DType.F32, (4, 100)))
    graph.add_output(Builder(graph).op("exp", [x]), "y")
    plan = run_pipeline(graph, PipelineOptions(passes=default_passes(HASWELL.vector_lanes)))
    (kernel,) = plan.kernels
    assert body_of(kernel, HASWELL) is None
    text = kernel_body(plan, HASWELL, 0, machine).text
    assert not text.startswith(OWN_VECTORS)


def test_own_vector_code_runs_o2_and_other_code_o3(monkeypatch):
    import llvmlite.binding as llvm
    levels = []
    real = llvm.create_pipeline_tuning_options

    def spy(speed_level: int = 2):
        levels.append(speed_level)
        return real(speed_level=speed_level)
    monkeypatch.setattr(llvm, "create_pipeline_tuning_options", spy)
    _optimized("")
    _optimized(OWN_VECTORS)
    assert levels == [3, 2]


def _summing_loop(unroll: bool) -> str:
    """`for i in 0..n: *out += x[i]` built with for_range, optimized as own vector code."""
    from llvmlite import ir

    from aot.codegen.loops import for_range

    module = ir.Module("loops")
    module.triple = HASWELL.triple
    f32, ptr = ir.FloatType(), ir.FloatType().as_pointer()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, ptr, ir.IntType(64)]), "sum")
    x, out, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with for_range(b, 0, n, "i", unroll=unroll) as i:
        b.store(b.fadd(b.load(out), b.load(b.gep(x, [i], inbounds=True))), out)
    b.ret_void()
    return str(optimize_text(OWN_VECTORS + str(module), HASWELL.target_machine(), "test"))


def test_a_loop_marked_not_to_unroll_stays_rolled():
    # a run-time trip count: LLVM unrolls the small body (runtime unrolling), unless told not to
    assert _summing_loop(unroll=True).count("fadd") > 1
    rolled = _summing_loop(unroll=False)
    assert rolled.count("fadd") == 1
    assert "llvm.loop.unroll.disable" in rolled
