"""Helpers for ONNX importer tests: build one-node or small models, import them, run the IR with
the reference interpreter and compare with onnxruntime (or onnx's reference evaluator)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.importers.onnx import import_onnx
from aot.interpreter import interpret
from aot.ir.verifier import verify_graph

ort = pytest.importorskip("onnxruntime")


def _ir_version(opset: int) -> int:
    return 8 if opset <= 17 else 10


def make_model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = _ir_version(opset)
    # the checker wants typed, shaped graph outputs: let ONNX shape inference fill them in
    return onnx.shape_inference.infer_shapes(model)


def vinfo(name, array_or_dtype, shape=None):
    if isinstance(array_or_dtype, np.ndarray):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array_or_dtype.dtype), array_or_dtype.shape)
    return helper.make_tensor_value_info(name, array_or_dtype, shape)


def node_model(op_type, node_inputs, feeds, inits=None, attrs=None, opset=17, n_out=1, domain=""):
    """One node; `node_inputs` names (or "" for omitted) refer to `feeds` (graph inputs) or `inits`."""
    inits = inits or {}
    outputs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, node_inputs, outputs, domain=domain or None, **(attrs or {}))
    ins = [vinfo(k, v) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
    init_protos = [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()]
    return make_model([node], ins, outs, init_protos, opset)


def compare(model, feeds, rtol=1e-5, atol=1e-6):
    graph = import_onnx(model)
    verify_graph(graph)
    ours = interpret(graph, feeds)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, feeds)
    assert len(ours) == len(theirs)
    for mine, ref in zip(ours, theirs):
        assert mine.shape == ref.shape, (mine.shape, ref.shape)
        assert mine.dtype == ref.dtype, (mine.dtype, ref.dtype)
        if ref.dtype.kind in "fc":
            np.testing.assert_allclose(mine, ref, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(mine, ref)
    return graph


def check_node(op_type, node_inputs, feeds, inits=None, attrs=None, opset=17, n_out=1, rtol=1e-5, atol=1e-6):
    model = node_model(op_type, node_inputs, feeds, inits, attrs, opset, n_out)
    return compare(model, feeds, rtol, atol)


def check_against_reference(model, feeds, rtol=1e-4, atol=1e-5):
    """Compare with onnx's reference evaluator, where onnxruntime departs from the specification."""
    from onnx.reference import ReferenceEvaluator

    ours = interpret(import_onnx(model), feeds)
    theirs = ReferenceEvaluator(model).run(None, feeds)
    assert len(ours) == len(theirs)
    for mine, ref in zip(ours, theirs):
        assert mine.shape == ref.shape and mine.dtype == ref.dtype, (mine.shape, mine.dtype, ref.shape, ref.dtype)
        np.testing.assert_allclose(mine, ref, rtol=rtol, atol=atol)
