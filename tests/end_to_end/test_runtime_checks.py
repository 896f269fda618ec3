"""Run-time checks: an ONNX If whose other branch cannot run at the compiled shapes.

The model is shaped like a voice activity detector's sample-rate switch: the
16 kHz branch views the chunk as [2, 5], the 8 kHz branch as [-1, 4], which
no 10-sample chunk fits. onnxruntime runs it for 16 kHz and fails only when
8 kHz selects the bad branch; the compiled artifact must do the same: the
right answer for 16 kHz, and an error naming the If node for 8 kHz, from the
Python Session (1 and 2 threads), the C runtime through `aot run`, and the
reference interpreter alike.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

from aot.artifact import read_artifact
from aot.cli import main
from aot.driver import compile_model, import_model
from aot.errors import IRError, ModelError, RunError, UnsupportedError
from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.ir.printer import print_graph
from aot.planning.buffers import assign_buffers
from aot.planning.fusion import fuse
from aot.rewrite.const_fold import ConstFold
from aot.runtime.session import Session

SHAPES = {"x": (1, 10)}
X = (np.arange(10, dtype=np.float32) - 4.5).reshape(1, 10)
RATE_16K = np.array(16000, np.int64)
RATE_8K = np.array(8000, np.int64)
BAD_BRANCH = "cannot reshape f32[1,10] to [-1, 4]"


def _branch(prefix: str, shape: list[int], scale: float, op_type: str = "ReduceSum") -> onnx.GraphProto:
    """y = op_type(reshape(x, shape), axis 1) * scale, reading the outer scope's x."""
    nodes = [
        helper.make_node("Reshape", ["x", f"{prefix}_shape"], [f"{prefix}_r"], name=f"{prefix}_reshape"),
        helper.make_node(op_type, [f"{prefix}_r", f"{prefix}_axes"], [f"{prefix}_s"], keepdims=0, name=f"{prefix}_sum"),
        helper.make_node("Mul", [f"{prefix}_s", f"{prefix}_k"], [f"{prefix}_y"], name=f"{prefix}_mul"),
    ]
    initializers = [
        helper.make_tensor(f"{prefix}_shape", TensorProto.INT64, [len(shape)], shape),
        helper.make_tensor(f"{prefix}_axes", TensorProto.INT64, [1], [1]),
        helper.make_tensor(f"{prefix}_k", TensorProto.FLOAT, [], [scale]),
    ]
    out = helper.make_tensor_value_info(f"{prefix}_y", TensorProto.FLOAT, [None])
    return helper.make_graph(nodes, prefix, [], [out], initializer=initializers)


def _rate_switch(then_branch: onnx.GraphProto, else_branch: onnx.GraphProto, name: str = "pick_rate",
                 cond: str = "is16k") -> list[onnx.NodeProto]:
    return [helper.make_node("Equal", ["sr", "c16k"], ["is16k"], name="is_16k"),
            helper.make_node("If", [cond], ["y"], name=name, then_branch=then_branch, else_branch=else_branch)]


def _model(nodes: list[onnx.NodeProto], extra_inputs: tuple[onnx.ValueInfoProto, ...] = ()) -> onnx.ModelProto:
    # the chunk length is symbolic, as in a real detector: onnxruntime cannot reject the bad branch at load
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "samples"]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, []), *extra_inputs]
    graph = helper.make_graph(nodes, "vad", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
                              initializer=[helper.make_tensor("c16k", TensorProto.INT64, [], [16000])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _vad() -> onnx.ModelProto:
    """16 kHz selects the [2, 5] branch (then_branch); 8 kHz the [-1, 4] one (else_branch)."""
    return _model(_rate_switch(_branch("b16", [2, 5], 2.0), _branch("b8", [-1, 4], 3.0)))


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.fixture(scope="module")
def vad(tmp_path_factory):
    model = _vad()
    path = tmp_path_factory.mktemp("checks") / "vad.aot"
    result = compile_model(model, path, shapes=SHAPES)
    return model, path, result


def test_valid_condition_matches_onnxruntime_and_the_invalid_one_fails(vad):
    model, path, _ = vad
    want = _ort(model, {"x": X, "sr": RATE_16K})
    with pytest.raises(Exception, match="b8_reshape"):  # onnxruntime fails the same run
        _ort(model, {"x": X, "sr": RATE_8K})
    for threads in (1, 2):
        with Session(path, threads=threads) as session:
            for _ in range(3):  # a failed run leaves the session usable
                (got,) = session.run(None, {"x": X, "sr": RATE_16K})
                np.testing.assert_allclose(got, want[0], rtol=1e-6)
                with pytest.raises(RunError) as failure:
                    session.run(None, {"x": X, "sr": RATE_8K})
                message = str(failure.value)
                assert message.startswith("node 'pick_rate' (If, opset 17): the condition selected else_branch")
                assert "node 'b8_reshape' (Reshape, opset 17)" in message and BAD_BRANCH in message


def test_the_manifest_lists_the_check_and_the_tooling_section_its_node(vad):
    _, _, result = vad
    manifest, tooling = result.manifest, result.tooling
    assert [c["message"] for c in manifest["checks"]] == [c.message for c in result.plan.checks]
    assert [c["node"] for c in tooling["checks"]] == ["pick_rate"]
    assert manifest["cpu"][0]["checks"] == "aot_model_checks"
    assert "root because read by a run-time check" in "\n".join(k["reason"] for k in tooling["kernels"])
    artifact = read_artifact(result.artifact)
    assert artifact.manifest == manifest and artifact.tooling == tooling


def test_interpreter_raises_the_runtime_message(vad):
    _, path, result = vad
    graph, _, _ = import_model(_vad(), SHAPES)
    np.testing.assert_allclose(interpret(graph, {"x": X, "sr": RATE_16K})[0], _ort(_vad(), {"x": X, "sr": RATE_16K})[0],
                               rtol=1e-6)
    with pytest.raises(RunError) as reference:
        interpret(graph, {"x": X, "sr": RATE_8K})
    with Session(path) as session, pytest.raises(RunError) as compiled:
        session.run(None, {"x": X, "sr": RATE_8K})
    assert str(reference.value) == str(compiled.value) == result.manifest["checks"][0]["message"]


def test_cli_run_reports_the_failed_check(vad, tmp_path):
    _, path, _ = vad
    np.save(tmp_path / "x.npy", X)
    for rate, ok in ((RATE_16K, True), (RATE_8K, False)):
        np.save(tmp_path / "sr.npy", rate)
        run = CliRunner().invoke(main, ["run", str(path), "--input", f"x={tmp_path / 'x.npy'}",
                                        "--input", f"sr={tmp_path / 'sr.npy'}"])
        if ok:
            assert run.exit_code == 0 and "y: float32[2]" in run.output, run.output
        else:
            assert run.exit_code == 1 and "error: node 'pick_rate' (If" in run.output and BAD_BRANCH in run.output


def test_invalid_then_branch_is_checked_against_a_true_condition(tmp_path):
    model = _model([helper.make_node("Equal", ["sr", "c16k"], ["is16k"], name="is_16k"),
                    helper.make_node("Not", ["is16k"], ["is8k"], name="is_8k"),
                    helper.make_node("If", ["is8k"], ["y"], name="pick_rate",
                                     then_branch=_branch("b8", [-1, 4], 3.0), else_branch=_branch("b16", [2, 5], 2.0))])
    result = compile_model(model, tmp_path / "m.aot", shapes=SHAPES)
    with Session(result.artifact) as session:
        np.testing.assert_allclose(session.run(None, {"x": X, "sr": RATE_16K})[0],
                                   _ort(model, {"x": X, "sr": RATE_16K})[0], rtol=1e-6)
        with pytest.raises(RunError, match="the condition selected then_branch, which cannot run"):
            session.run(None, {"x": X, "sr": RATE_8K})


def test_a_condition_straight_from_a_model_input(tmp_path):
    """The check reads the caller's input buffer: no kernel computes its operand."""
    model = _model([helper.make_node("If", ["wide"], ["y"], name="pick_view", then_branch=_branch("b16", [2, 5], 2.0),
                                     else_branch=_branch("b8", [-1, 4], 3.0))],
                   (helper.make_tensor_value_info("wide", TensorProto.BOOL, []),))
    result = compile_model(model, tmp_path / "m.aot", shapes=SHAPES)
    assert result.tooling["kernels"] and all("check" not in k["reason"] for k in result.tooling["kernels"])
    with Session(result.artifact, threads=2) as session:
        feeds = {"x": X, "sr": RATE_8K, "wide": np.array(True)}
        np.testing.assert_allclose(session.run(None, feeds)[0], _ort(model, feeds)[0], rtol=1e-6)
        with pytest.raises(RunError, match="node 'pick_view'"):
            session.run(None, {**feeds, "wide": np.array(False)})


def test_both_branches_invalid_fail_the_compile_with_both_reasons():
    model = _model(_rate_switch(_branch("b12", [-1, 3], 1.0), _branch("b8", [-1, 4], 3.0)))
    with pytest.raises(ModelError) as failure:
        compile_model(model, shapes=SHAPES)
    message = str(failure.value)
    assert message.startswith("node 'pick_rate' (If, opset 17): neither branch can run at the compiled shapes")
    assert "then_branch: node 'b12_reshape'" in message and "else_branch: node 'b8_reshape'" in message


def test_an_unsupported_op_in_a_branch_still_fails_the_compile():
    random = helper.make_graph([helper.make_node("RandomUniformLike", ["x"], ["noise"], name="noise")], "noise", [],
                               [helper.make_tensor_value_info("noise", TensorProto.FLOAT, [None])])
    with pytest.raises(UnsupportedError, match="RandomUniformLike"):
        compile_model(_model(_rate_switch(_branch("b16", [2, 5], 2.0), random)), shapes=SHAPES)


def test_a_bound_condition_compiles_one_branch_without_checks():
    model = _vad()
    result = compile_model(model, shapes=SHAPES, bind={"sr": RATE_16K})
    assert "checks" not in result.manifest
    with Session(result.artifact) as session:
        np.testing.assert_allclose(session.run(None, {"x": X})[0], _ort(model, {"x": X, "sr": RATE_16K})[0], rtol=1e-6)
    with pytest.raises(ModelError, match="b8_reshape"):  # binding the bad branch is a compile error, as before
        compile_model(model, shapes=SHAPES, bind={"sr": RATE_8K})


def test_a_check_inside_a_branch_holds_only_when_that_branch_is_taken(tmp_path):
    """An outer If picks the rate switch or a plain sum; the switch's check must not fire when
    the outer condition does not pick it."""
    inner = helper.make_graph(_rate_switch(_branch("b16", [2, 5], 2.0), _branch("b8", [-1, 4], 3.0)), "switch", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    inner.node[1].output[0] = "switched"
    inner.output[0].name = "switched"
    plain = _branch("plain", [2, 5], -1.0)
    model = _model([helper.make_node("If", ["use_switch"], ["y"], name="outer", then_branch=inner, else_branch=plain)],
                   (helper.make_tensor_value_info("use_switch", TensorProto.BOOL, []),))
    result = compile_model(model, tmp_path / "m.aot", shapes=SHAPES)
    assert [c["node"] for c in result.tooling["checks"]] == ["pick_rate"]
    with Session(result.artifact, threads=2) as session:
        for use_switch, rate in ((False, RATE_8K), (False, RATE_16K), (True, RATE_16K)):
            feeds = {"x": X, "sr": rate, "use_switch": np.array(use_switch)}
            np.testing.assert_allclose(session.run(None, feeds)[0], _ort(model, feeds)[0], rtol=1e-6)
        with pytest.raises(RunError, match="node 'pick_rate'.*selected else_branch"):
            session.run(None, {"x": X, "sr": RATE_8K, "use_switch": np.array(True)})


def test_a_plain_model_gets_no_checks_function():
    model = _model(_rate_switch(_branch("b16", [2, 5], 2.0), _branch("b8", [2, 5], 3.0)))
    result = compile_model(model, shapes=SHAPES)
    assert "checks" not in result.manifest and "checks" not in result.manifest["cpu"][0]
    assert "checks" not in result.tooling
    code = read_artifact(result.artifact).sections[result.manifest["cpu"][0]["section"]]
    assert b"aot_model_entry" in code and b"aot_model_checks" not in code
    with Session(result.artifact) as session:
        for rate in (RATE_16K, RATE_8K):
            np.testing.assert_allclose(session.run(None, {"x": X, "sr": rate})[0],
                                       _ort(model, {"x": X, "sr": rate})[0], rtol=1e-6)


# -- the op and the passes after import ----------------------------------------------------
CHECKED = """
graph @g(%x: f32[4], %t: f32[]) {
  %m = reduce(%x) {axes = [0], kind = "max"} : f32[]
  %ok = compare(%m, %t) {direction = "lt"} : i1[]
  %c = check(%ok) {message = "max of \\"x\\" must stay below t"} : i1[] loc("If_0")
  %e = exp(%x) : f32[4]
  %n = neg(%e) : f32[4]
  %l = log(%n) : f32[4]
  %y = add(%l, %x) : f32[4]
  return %y as "y"
}
"""


def test_check_prints_parses_and_verifies():
    graph = parse_graph(CHECKED)
    assert print_graph(parse_graph(print_graph(graph))) == print_graph(graph)
    with pytest.raises(IRError, match="check asserts a boolean scalar"):
        parse_graph(CHECKED.replace("check(%ok)", "check(%m)"))
    with pytest.raises(IRError, match="non-empty string attribute 'message'"):
        parse_graph(CHECKED.replace('message = "max of \\"x\\" must stay below t"', 'message = ""'))


def test_operand_is_materialized_and_lives_to_the_end_of_the_run():
    graph = parse_graph(CHECKED)
    kernels = fuse(graph)
    assert all(n.op != "check" for k in kernels for n in k.nodes)
    (ok_kernel,) = [k for k in kernels if k.root.name == "ok"]
    assert ok_kernel.reason.endswith("root because read by a run-time check")
    plan = assign_buffers(graph, kernels)
    assert [(c.ok.name, c.loc) for c in plan.checks] == [("ok", "If_0")]
    (entry,) = [b for b in plan.notes["memory_plan"] if "ok" in b["values"]]
    assert entry["end"] == len(plan.kernels)  # read after the last kernel: no later kernel may reuse it
    later = [b for b in plan.notes["memory_plan"] if b is not entry]
    assert all(b["offset"] >= entry["offset"] + entry["size"] or b["offset"] + b["size"] <= entry["offset"]
               for b in later if b["start"] >= entry["start"])


def test_const_fold_agrees_with_the_check():
    passing = parse_graph(CHECKED.replace("%ok = compare(%m, %t) {direction = \"lt\"} : i1[]",
                                          "%ok = constant() {value = dense<true>} : i1[]"))
    assert ConstFold().run(passing) and "check" not in [n.op for n in passing.nodes]
    failing = parse_graph(CHECKED.replace("%ok = compare(%m, %t) {direction = \"lt\"} : i1[]",
                                          "%ok = constant() {value = dense<false>} : i1[]"))
    with pytest.raises(RunError, match='^max of "x" must stay below t$'):
        ConstFold().run(failing)


def test_a_constant_operand_is_read_from_the_weights_when_nothing_folded_it():
    graph = parse_graph(CHECKED.replace("%ok = compare(%m, %t) {direction = \"lt\"} : i1[]",
                                        "%ok = constant() {value = dense<true>} : i1[]"))
    plan = assign_buffers(graph, fuse(graph))
    where = plan.slices["ok"]
    assert where.kind == "weights" and plan.weights[where.offset] == 1
