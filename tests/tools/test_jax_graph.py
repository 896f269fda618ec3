"""benchmarks/jax_graph.py: an imported aot graph lowered to JAX (CPU here) gives onnxruntime's
outputs, on an MLP, a conv net with pooling and padding, causal attention, a gather with its
run-time check, and a graph of the data-movement ops; an op without a lowering is named before
anything runs. Skipped where JAX is not installed (it is no dependency of aot)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.importers.onnx import import_onnx
from aot.ir.types import DType, TensorType
from gpu_util import dense_softmax_model, gather_check_model
from onnx_util import make_model, vinfo

jax = pytest.importorskip("jax")
jax.config.update("jax_default_matmul_precision", "highest")

import jax_graph  # noqa: E402  (needs jax)

F = TensorProto.FLOAT


def _init(rng, name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def conv_net(rng):
    """Conv (padded, strided), a grouped conv, BatchNorm, MaxPool with padding, AveragePool, Gemm."""
    inits = [_init(rng, "w1", (8, 3, 3, 3)), _init(rng, "b1", (8,)), _init(rng, "w2", (8, 2, 3, 3)),
             _init(rng, "g", (8,)), _init(rng, "beta", (8,)), _init(rng, "mean", (8,)),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "var"),
             _init(rng, "fc", (10, 32)), _init(rng, "fcb", (10,))]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=4, dilations=[1, 1]),
             helper.make_node("BatchNormalization", ["c2", "g", "beta", "mean", "var"], ["bn"]),
             helper.make_node("MaxPool", ["bn"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["p1"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p2"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    return make_model(nodes, [vinfo("x", F, (2, 3, 16, 16))], [vinfo("y", F, (2, 10))], inits), (2, 3, 16, 16)


def attention(rng):
    """One head of causal attention with LayerNorm: MatMul, Transpose, Softmax, Where over a Trilu mask."""
    inits = [_init(rng, "wq", (16, 16)), _init(rng, "wk", (16, 16)), _init(rng, "wv", (16, 16)),
             numpy_helper.from_array(np.tril(np.ones((6, 6), bool)), "mask"),
             numpy_helper.from_array(np.array(-1e9, np.float32), "neg"),
             numpy_helper.from_array(np.array(0.25, np.float32), "scale"),
             _init(rng, "ln_g", (16,)), _init(rng, "ln_b", (16,))]
    nodes = [helper.make_node("LayerNormalization", ["x", "ln_g", "ln_b"], ["n"], axis=-1),
             helper.make_node("MatMul", ["n", "wq"], ["q"]), helper.make_node("MatMul", ["n", "wk"], ["k"]),
             helper.make_node("MatMul", ["n", "wv"], ["v"]), helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"]), helper.make_node("Mul", ["s0", "scale"], ["s1"]),
             helper.make_node("Where", ["mask", "s1", "neg"], ["s2"]),
             helper.make_node("Softmax", ["s2"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["a"]),
             helper.make_node("Tanh", ["a"], ["y"])]
    return make_model(nodes, [vinfo("x", F, (2, 6, 16))], [vinfo("y", F, (2, 6, 16))], inits), (2, 6, 16)


def data_movement(rng):
    """Pad, Concat, Slice (strided), Reshape, ReduceMax, Erf, Sqrt of Abs, Cast round trip."""
    starts, ends, axes, steps = (numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                                 (("st", [1, 0]), ("en", [9, 5]), ("ax", [1, 2]), ("sp", [2, 1])))
    inits = [numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 2], np.int64), "pads"), starts, ends, axes, steps,
             numpy_helper.from_array(np.array([2, -1], np.int64), "shape")]
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"]), helper.make_node("Concat", ["p", "p"], ["c"], axis=1),
             helper.make_node("Slice", ["c", "st", "en", "ax", "sp"], ["s"]),
             helper.make_node("Abs", ["s"], ["sa"]), helper.make_node("Sqrt", ["sa"], ["sq"]),
             helper.make_node("Erf", ["sq"], ["e"]), helper.make_node("Cast", ["e"], ["h"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("ReduceMax", ["f"], ["m"], axes=[1], keepdims=0),
             helper.make_node("Reshape", ["m", "shape"], ["y"])]
    return make_model(nodes, [vinfo("x", F, (2, 5, 4))], [vinfo("y", F, None)], inits), (2, 5, 4)


def _compare(model, feeds, rtol=1e-5, atol=1e-5):
    graph = import_onnx(model)
    lowered = jax_graph.lower_graph(graph)
    ours = jax.jit(lowered.fn)(lowered.device_params(), *[feeds[n] for n in graph.input_names])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, feeds)
    assert len(ours) == len(theirs)
    for mine, ref in zip(ours, theirs):
        mine = np.asarray(mine)
        assert mine.shape == ref.shape
        np.testing.assert_allclose(mine.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol)
    return lowered


def test_mlp_matches_onnxruntime(rng):
    feeds = {"x": rng.standard_normal((4, 8)).astype(np.float32), "x2": rng.standard_normal((4, 16)).astype(np.float32)}
    lowered = _compare(dense_softmax_model(), feeds)
    # the 8x16 weight is a parameter, not a literal of the function
    assert any(v.shape == (8, 16) for v in lowered.params.values())


@pytest.mark.parametrize("build", [conv_net, attention, data_movement])
def test_model_matches_onnxruntime(build, rng):
    model, shape = build(rng)
    _compare(model, {"x": rng.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-5)


def test_gather_with_its_check_matches_onnxruntime():
    # the checks pass on these indices; negative ones count from the end, as ONNX says
    _compare(gather_check_model(), {"i": np.array([1, -10, 9]), "j": np.array([0, 3, -1])})


def test_an_op_without_lowering_is_named_before_anything_runs():
    graph = import_onnx(dense_softmax_model())
    x = graph.inputs[0]
    graph.make_node("packed_dot_of_the_future", [x], {}, TensorType(DType.F32, x.type.shape))
    with pytest.raises(jax_graph.UnknownOp, match="packed_dot_of_the_future") as err:
        jax_graph.lower_graph(graph)
    assert err.value.op == "packed_dot_of_the_future"
