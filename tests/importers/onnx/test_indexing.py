"""Run-time gathers and scatters: real gather/scatter kernels, O(output) work, indices checked.

A token embedding over a 30,522-row vocabulary must lower to one gather
(no reduction over the vocabulary), compile to native code that matches
onnxruntime, and turn an out-of-range index into a RunError naming the
node, from every gather and scatter op, never a wild read or write.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.driver import compile_model, import_model
from aot.errors import RunError
from aot.runtime.session import Session

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)
VOCAB, HIDDEN, SEQ = 30522, 64, 32


def _model(node: onnx.NodeProto, inputs: dict[str, np.ndarray], inits: dict[str, np.ndarray], opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node], "indexing",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], TensorProto.UNDEFINED, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def _compiled(tmp_path: Path, model: onnx.ModelProto) -> Session:
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    compile_model(path, tmp_path / "model.aot")
    return Session(tmp_path / "model.aot", threads=2)


def _embedding() -> tuple[onnx.ModelProto, np.ndarray]:
    table = RNG.standard_normal((VOCAB, HIDDEN)).astype(np.float32)
    ids = RNG.integers(-VOCAB, VOCAB, (1, SEQ)).astype(np.int64)
    node = helper.make_node("Gather", ["table", "ids"], ["y"], name="token_embedding")
    return _model(node, {"ids": ids}, {"table": table}), ids


def test_vocabulary_gather_is_one_gather_without_a_reduction(tmp_path: Path) -> None:
    model, _ = _embedding()
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    graph = import_model(path)[0]
    assert "gather" in [n.op for n in graph.nodes]
    # the only reduction is the index check's, over the 32 indices, never over the vocabulary
    for node in graph.nodes:
        if node.op == "reduce":
            assert node.inputs[0].type.size == SEQ


def test_vocabulary_gather_matches_onnxruntime(tmp_path: Path) -> None:
    model, ids = _embedding()
    session = _compiled(tmp_path, model)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"ids": ids})[0]
    np.testing.assert_array_equal(session.run(None, {"ids": ids})[0], expected)


@pytest.mark.parametrize("bad", [VOCAB, -VOCAB - 1, 2**40])
def test_out_of_range_token_is_an_error_naming_the_node(tmp_path: Path, bad: int) -> None:
    model, ids = _embedding()
    session = _compiled(tmp_path, model)
    ids = ids.copy()
    ids[0, 7] = bad
    with pytest.raises(RunError, match=r"node 'token_embedding' \(Gather\): an index is outside \[-30522, 30522\)"):
        session.run(None, {"ids": ids})
    ids[0, 7] = 3  # the session stays usable
    assert session.run(None, {"ids": ids})[0].shape == (1, SEQ, HIDDEN)


def _cases() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray], str]]:
    """(name, model, good feeds, the input whose entry [0, 0, ...] is made out of range)."""
    data = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    elements = RNG.integers(-4, 4, (3, 5, 6)).astype(np.int64)
    nd = RNG.integers(-4, 4, (2, 3, 2)).astype(np.int64)
    nd[..., 1] %= 5
    nd_updates = RNG.standard_normal((2, 3, 6)).astype(np.float32)
    elem_updates = RNG.standard_normal((3, 5, 6)).astype(np.float32)
    return [
        ("GatherElements", _model(helper.make_node("GatherElements", ["d", "i"], ["y"], name="pick", axis=0),
                                  {"d": data, "i": elements}, {}), {"d": data, "i": elements}, "i"),
        ("GatherND", _model(helper.make_node("GatherND", ["d", "i"], ["y"], name="pick"), {"d": data, "i": nd}, {}),
         {"d": data, "i": nd}, "i"),
        ("ScatterElements", _model(helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="pick", axis=0,
                                                    reduction="add"),
                                   {"d": data, "i": elements, "u": elem_updates}, {}),
         {"d": data, "i": elements, "u": elem_updates}, "i"),
        ("ScatterND", _model(helper.make_node("ScatterND", ["d", "i", "u"], ["y"], name="pick", reduction="add"),
                             {"d": data, "i": nd, "u": nd_updates}, {}),
         {"d": data, "i": nd, "u": nd_updates}, "i"),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_gathers_and_scatters_match_onnxruntime_and_check_indices(tmp_path: Path, case) -> None:
    op_type, model, feeds, index_name = case
    session = _compiled(tmp_path, model)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_allclose(session.run(None, feeds)[0], expected, rtol=1e-6, atol=1e-6)
    for bad in (4, -5):  # one past either end of the indexed dim of size 4
        broken = dict(feeds)
        broken[index_name] = feeds[index_name].copy()
        broken[index_name].reshape(-1)[0] = bad
        with pytest.raises(RunError, match=rf"node 'pick' \({op_type}\): an index"):
            session.run(None, broken)


def test_scatter_assign_applies_updates_in_order(tmp_path: Path) -> None:
    """ScatterND without reduction: a repeated index keeps the last update, as onnxruntime does."""
    data = np.zeros((4, 3), np.float32)
    indices = np.array([[1], [2], [1]], np.int64)
    updates = np.arange(9, dtype=np.float32).reshape(3, 3) + 1
    model = _model(helper.make_node("ScatterND", ["d", "i", "u"], ["y"]), {"d": data, "i": indices, "u": updates}, {})
    session = _compiled(tmp_path, model)
    out = session.run(None, {"d": data, "i": indices, "u": updates})[0]
    np.testing.assert_array_equal(out[1], updates[2])
    np.testing.assert_array_equal(out[2], updates[1])
