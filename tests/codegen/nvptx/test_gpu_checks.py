"""The GPU checks kernel (aot/codegen/nvptx/checks.py): emulated, it passes and fails exactly as
the CPU artifact and the reference interpreter do, with the same message; its parameters are
the buffers the checks read, each at its base, then the status word; ptxas takes it."""
from __future__ import annotations

import numpy as np
import pytest

from aot.codegen.cpu.kernel import CHECKS_SYMBOL as CPU_CHECKS_SYMBOL
from aot.codegen.nvptx import NvptxTarget, assemble, emit_gpu
from aot.codegen.nvptx.checks import CHECKS_SYMBOL
from aot.codegen.nvptx.emulate import EmulatedKernels
from aot.driver import compile_model
from aot.errors import RunError
from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.pipeline import run_pipeline
from aot.runtime.session import Session
from gpu_util import SMS, assembles_for_every_sm, emulated_matches_onnxruntime, gather_check_model, gpu_plan, needs_ptxas

# three checks, whose booleans a model input, a model output and the arena hold
CHECKED = """
graph @g(%x: f32[4], %t: f32[], %flag: i1[]) {
  %m = reduce(%x) {axes = [0], kind = "max"} : f32[]
  %ok = compare(%m, %t) {direction = "lt"} : i1[]
  %big = compare(%m, %t) {direction = "gt"} : i1[]
  %small = not(%big) : i1[]
  %c1 = check(%flag) {message = "flag must be set"} : i1[] loc("a")
  %c2 = check(%ok) {message = "max of x must stay below t"} : i1[] loc("b")
  %c3 = check(%small) {message = "max of x must not exceed t"} : i1[] loc("c")
  %y = exp(%x) : f32[4]
  return %y as "y", %ok as "ok"
}
"""
GOOD_IDS = {"i": np.array([1, -10, 9]), "j": np.array([0, 3, -1])}
BAD_IDS = [{"i": np.array([1, 10, 9]), "j": GOOD_IDS["j"]},  # the first Gather's check
           {"i": GOOD_IDS["i"], "j": np.array([0, -11, 1])},  # the second's
           {"i": np.array([-11, 0, 0]), "j": np.array([0, 0, 10])}]  # both: the first is reported


@pytest.fixture(scope="module")
def gather():
    result = compile_model(gather_check_model(), target="cpu,cuda", sm="sm_90")
    return result, EmulatedKernels(result.plan), Session(result.artifact)


def test_passing_checks_give_onnxruntimes_outputs():
    plan = emulated_matches_onnxruntime(gather_check_model(), GOOD_IDS)
    assert len(plan.checks) == 2


@pytest.mark.parametrize("bad", range(len(BAD_IDS)))
def test_failing_check_is_the_cpu_artifacts_run_error(gather, bad):
    _, emulated, session = gather
    feeds = BAD_IDS[bad]
    with pytest.raises(RunError) as from_cpu:
        session.run(None, feeds)
    with pytest.raises(RunError) as from_gpu:
        emulated.run([feeds["i"], feeds["j"]])
    assert str(from_gpu.value) == str(from_cpu.value)
    assert str(from_gpu.value).startswith("node 'second'" if bad == 1 else "node 'first'")
    # the kernels stay usable after a failed run
    np.testing.assert_array_equal(emulated.run([GOOD_IDS["i"], GOOD_IDS["j"]])[0], session.run(None, GOOD_IDS)[0])


def test_manifest_launch_is_the_emitted_kernel(gather):
    result, _, _ = gather
    code = emit_gpu(result.plan, NvptxTarget("sm_90"))
    assert code.checks is not None and code.checks.body == "checks"
    assert result.manifest["cuda"]["sms"][0]["checks"] == code.checks.launch_json()
    # both checks' booleans sit in the arena: one argument for it, then the status word
    assert code.checks.launch_json() == {"symbol": "aot_model_checks", "grid": [1, 1, 1], "block": [1, 1, 1],
                                         "shared_bytes": 0,
                                         "args": [{"kind": "arena", "offset": 0}, {"kind": "status"}]}


def test_checks_in_inputs_outputs_and_arena():
    plan = run_pipeline(parse_graph(CHECKED))
    kinds = [plan.slices[c.ok.name].kind for c in plan.checks]
    assert kinds == ["input", "output", "arena"]
    checks = emit_gpu(plan, NvptxTarget("sm_80")).checks
    assert [a.to_json() for a in checks.args] == [{"kind": "input", "index": 2}, {"kind": "output", "index": 1},
                                                  {"kind": "arena", "offset": 0}, {"kind": "status"}]
    emulated = EmulatedKernels(plan)
    x = np.array([1.0, 3.0, -2.0, 0.5], np.float32)
    for t, flag in ((4.0, True), (4.0, False), (3.0, True), (2.0, True), (2.0, False)):
        feeds = {"x": x, "t": np.array(t, np.float32), "flag": np.array(flag)}
        try:
            want = interpret(plan.graph, feeds)
        except RunError as reference:
            with pytest.raises(RunError) as ours:
                emulated.run(list(feeds.values()))
            assert str(ours.value) == str(reference)
            continue
        got = emulated.run(list(feeds.values()))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        assert got[1] == want[1]


def test_a_plan_without_checks_has_no_checks_kernel():
    from gpu_util import dense_softmax_model

    code = emit_gpu(gpu_plan(dense_softmax_model()), NvptxTarget("sm_90"))
    assert code.checks is None and "aot_model_checks" not in code.ptx


def test_the_symbol_is_the_cpu_codes():
    assert CHECKS_SYMBOL == CPU_CHECKS_SYMBOL


@needs_ptxas
def test_checks_kernel_assembles_without_spills():
    for plan in (gpu_plan(gather_check_model()), run_pipeline(parse_graph(CHECKED))):
        assert assembles_for_every_sm(plan)  # every kernel, the checks kernel too
        for sm in SMS:
            info = assemble(emit_gpu(plan, NvptxTarget(sm)).ptx, sm)[CHECKS_SYMBOL]
            print(sm, info)
            assert info.spill_store_bytes == info.spill_load_bytes == info.stack_bytes == 0, (sm, info)
