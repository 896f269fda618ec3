"""aot verify (aot/verify.py, `aot verify`): compile, run beside onnxruntime, compare every
output; on a mismatch name the first kernel or pass that diverges."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import aot.driver
import aot.pipeline
from aot import cli
from aot.codegen.math import MathLib
from aot.feeds import seeded_inputs
from aot.ir.graph import Graph
from aot.rewrite.base import Pass
from aot.verify import compare_arrays, format_report, verify

pytest.importorskip("onnxruntime")


def _conv_tanh_model(path):
    """Conv -> Relu -> Tanh(x) * 0.5 -> MatMul: the tanh fuses into a kernel with other nodes."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    m = (rng.standard_normal((36, 5)) * 0.2).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="stem_conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="stem_relu"),
        helper.make_node("Tanh", ["r"], ["t"], name="squash"),
        helper.make_node("Mul", ["t", "half"], ["h"], name="halve"),
        helper.make_node("Reshape", ["h", "flat"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "m"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes, "conv_tanh", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(m, "m"),
         numpy_helper.from_array(np.float32(0.5), "half"), numpy_helper.from_array(np.array([4, 36], np.int64), "flat")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    return path


def test_a_right_model_passes(tmp_path):
    report = verify(_conv_tanh_model(tmp_path / "m.onnx"))
    assert report.ok and report.reference == "onnxruntime" and report.divergence is None
    assert [o.name for o in report.outputs] == ["y"]
    assert "PASS" in format_report(report)


def test_a_broken_kernel_is_named_with_its_source_node(tmp_path, monkeypatch):
    # the fixture: tanh miscompiled as x / 2 -- the kernel holding it must be named, with node 'squash'
    monkeypatch.setattr(MathLib, "tanh", lambda self, b, x: b.fmul(x, x.type(0.5)))
    report = verify(_conv_tanh_model(tmp_path / "m.onnx"))
    assert not report.ok
    d = report.divergence
    assert d is not None and d.stage == "kernel"
    assert "squash" in d.source_nodes and "tanh" in d.ops
    assert "head" not in d.source_nodes  # the matmul after it is right on what it reads
    assert any("root because" in why for why in d.fusion)
    text = format_report(report)
    assert "FAIL: output 'y'" in text and "squash" in text and f"kernel {d.name}" in text


class _SubBecomesAdd(Pass):
    """A deliberately wrong rewrite: x - y -> x + y."""
    name = "broken-rewrite"

    def run(self, graph: Graph) -> bool:
        changed = False
        for node in graph.nodes:
            if node.op == "sub":
                node.op = "add"
                changed = True
        return changed


def test_a_broken_pass_is_named(tmp_path, monkeypatch):
    nodes = [helper.make_node("Sub", ["x", "b"], ["d"], name="offset"), helper.make_node("Exp", ["d"], ["y"])]
    graph = helper.make_graph(nodes, "sub", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(np.ones((2, 3), np.float32), "b")])
    path = tmp_path / "sub.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    original = aot.pipeline.default_passes

    def with_broken_pass(lanes: int = 16, pad_stems: bool = False):
        return [_SubBecomesAdd(), *original(lanes, pad_stems)]

    monkeypatch.setattr(aot.pipeline, "default_passes", with_broken_pass)
    monkeypatch.setattr(aot.driver, "default_passes", with_broken_pass)
    report = verify(path)
    assert not report.ok
    assert report.divergence is not None and (report.divergence.stage, report.divergence.name) == ("pass", "broken-rewrite")


def test_token_ids_stay_inside_the_vocabulary(tmp_path):
    # a 3-row table: [0, 4) would index past it, onnxruntime would refuse the run
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    nodes = [helper.make_node("Cast", ["ids"], ["i"], to=TensorProto.INT64), helper.make_node("Gather", ["emb", "i"], ["y"]),
             helper.make_node("ReduceSum", ["mask"], ["n"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "embed", [helper.make_tensor_value_info("ids", TensorProto.INT32, [1, 16]),
                         helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 2]), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [numpy_helper.from_array(table, "emb")])
    path = tmp_path / "embed.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    report = verify(path)
    assert report.ok, format_report(report)
    assert "3 rows" in report.inputs["ids"] and report.inputs["mask"] == "ones (a mask)"


def test_seeded_inputs_are_reproducible():
    specs = [("x", (2, 3), np.dtype(np.float32)), ("b", (4,), np.dtype(bool))]
    first, _ = seeded_inputs(specs, 7)
    second, _ = seeded_inputs(specs, 7)
    assert all(np.array_equal(first[k], second[k]) for k in first)


def test_compare_arrays_tolerances_nan_and_ints():
    want = np.array([1.0, 100.0, np.nan, np.inf], np.float32)
    assert compare_arrays(want.copy(), want, 1e-4, 1e-3)[2] == ""
    off = want.copy()
    off[1] = 100.05  # inside rtol 1e-3 of 100
    assert compare_arrays(off, want, 1e-4, 1e-3)[2] == ""
    off[1] = 100.2
    assert "first at (1,)" in compare_arrays(off, want, 1e-4, 1e-3)[2]
    off = want.copy()
    off[3] = -np.inf
    assert compare_arrays(off, want, 1e-4, 1e-3)[2]
    assert compare_arrays(np.array([1, 2]), np.array([1, 3]), 1e-4, 1e-3)[2].startswith("1 element(s) differ")


def test_cli_exit_status_and_json(tmp_path, monkeypatch):
    path = _conv_tanh_model(tmp_path / "m.onnx")
    runner = CliRunner()
    ok = runner.invoke(cli.main, ["verify", str(path), "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["ok"] is True
    artifact = tmp_path / "m.aot"
    assert runner.invoke(cli.main, ["compile", str(path), "-o", str(artifact)]).exit_code == 0
    given = runner.invoke(cli.main, ["verify", str(path), "--artifact", str(artifact)])
    assert given.exit_code == 0 and "PASS" in given.output
    monkeypatch.setattr(MathLib, "tanh", lambda self, b, x: b.fmul(x, x.type(0.5)))
    bad = runner.invoke(cli.main, ["verify", str(path)])
    assert bad.exit_code == 1 and "squash" in bad.output
    missing = runner.invoke(cli.main, ["verify", str(tmp_path / "nope.onnx")])
    assert missing.exit_code == 1 and "error:" in missing.output
    no_artifact = runner.invoke(cli.main, ["verify", str(path), "--artifact", str(tmp_path / "nope.aot")])
    assert no_artifact.exit_code == 1 and "cannot read artifact" in no_artifact.output
