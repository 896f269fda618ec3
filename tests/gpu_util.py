"""Shared by the GPU packaging tests: a small model whose GPU launches read model inputs, packed
weights and the arena and write an output, and the marker for tests that need ptxas."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx.ptxas import ptxas_path
from onnx_util import make_model, vinfo

needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA toolkit) is not on PATH")


def dense_softmax_model():
    """y = softmax(relu(x @ w + b)) * x2: a dot kernel (weights, arena out) and a row kernel."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["h"]), helper.make_node("Softmax", ["h"], ["s"], axis=-1),
             helper.make_node("Mul", ["s", "x2"], ["y"])]
    f = TensorProto.FLOAT
    return make_model(nodes, [vinfo("x", f, (4, 8)), vinfo("x2", f, (4, 16))], [vinfo("y", f, (4, 16))], [w, b])


def feeds(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((4, 8)).astype(np.float32), "x2": rng.standard_normal((4, 16)).astype(np.float32)}
