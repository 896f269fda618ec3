"""ONNX importer: each op lowered to IR, run by the reference interpreter, compared with onnxruntime."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.errors import ModelError, UnsupportedError
from aot.importers.onnx import import_onnx
from aot.interpreter import interpret
from onnx_util import check_node, compare, make_model, node_model, ort, vinfo

RNG = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- elementwise ------------------------------------------------------------------
UNARY = ["Neg", "Abs", "Exp", "Tanh", "Sigmoid", "Floor", "Ceil", "Sign", "Erf", "Reciprocal", "Sin", "Cos",
         "Relu", "Softsign", "Identity"]


@pytest.mark.parametrize("op_type", UNARY)
def test_unary(op_type):
    check_node(op_type, ["x"], {"x": randn(2, 3, 5)})


@pytest.mark.parametrize("op_type", ["Log", "Sqrt"])
def test_unary_positive(op_type):
    check_node(op_type, ["x"], {"x": np.abs(randn(3, 7)) + 0.1})


def test_round_half_to_even():
    check_node("Round", ["x"], {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.2, -0.7], np.float32)})


def test_scalar_shape():
    check_node("Exp", ["x"], {"x": np.array(0.5, np.float32)})


@pytest.mark.parametrize("op_type, attrs", [
    ("LeakyRelu", {"alpha": 0.1}), ("LeakyRelu", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Softplus", {}),
])
def test_activation(op_type, attrs):
    check_node(op_type, ["x"], {"x": 3 * randn(4, 9)}, attrs=attrs)


def test_softplus_large_inputs_do_not_overflow():
    check_node("Softplus", ["x"], {"x": np.array([-100, -20, 0, 20, 100], np.float32)})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate):
    check_node("Gelu", ["x"], {"x": 2 * randn(3, 8)}, attrs={"approximate": approximate}, opset=20)


def test_prelu_broadcasts_slope():
    check_node("PRelu", ["x", "s"], {"x": randn(2, 3, 4, 4)}, inits={"s": randn(3, 1, 1)})


BROADCAST_SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((5, 1), (1,))]


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_binary_broadcasting(op_type, shapes):
    a, b = randn(*shapes[0]), randn(*shapes[1])
    if op_type == "Div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    check_node(op_type, ["a", "b"], {"a": a, "b": b})


def test_int_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0, 9], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4], np.int32)
    check_node("Div", ["a", "b"], {"a": a, "b": b})


def test_binary_with_constant_operand():
    check_node("Add", ["a", "b"], {"a": randn(2, 5)}, inits={"b": randn(5)})


def test_pow_mixed_dtypes():
    check_node("Pow", ["a", "b"], {"a": np.abs(randn(3, 4)) + 0.5, "b": np.array([2, 3, 1, 0], np.int64)})
    check_node("Pow", ["a", "b"], {"a": np.abs(randn(3, 4)) + 0.5, "b": randn(4)})


@pytest.mark.parametrize("op_type", ["Max", "Min", "Sum", "Mean"])
def test_variadic(op_type):
    check_node(op_type, ["a", "b", "c"], {"a": randn(2, 3, 4), "b": randn(3, 1), "c": randn(4)})


def test_variadic_single_operand():
    check_node("Mean", ["a"], {"a": randn(2, 3)})


@pytest.mark.parametrize("op_type", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(op_type):
    a = RNG.integers(-3, 3, (3, 4)).astype(np.float32)
    b = RNG.integers(-3, 3, (4,)).astype(np.float32)
    check_node(op_type, ["a", "b"], {"a": a, "b": b})


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logic(op_type):
    check_node(op_type, ["a", "b"], {"a": RNG.random((3, 4)) > 0.5, "b": RNG.random((4,)) > 0.5})


def test_not_and_isnan():
    check_node("Not", ["a"], {"a": RNG.random((3, 4)) > 0.5})
    check_node("IsNaN", ["a"], {"a": np.array([1.0, np.nan, -np.inf, 0.0], np.float32)})


def test_where_broadcasts_three_ways():
    check_node("Where", ["c", "x", "y"], {"c": RNG.random((3, 1)) > 0.5, "x": randn(1, 4), "y": randn(4)})


@pytest.mark.parametrize("src, to", [
    (np.float32, TensorProto.INT32), (np.int64, TensorProto.FLOAT), (np.float32, TensorProto.BOOL),
    (np.float32, TensorProto.FLOAT16), (np.int32, TensorProto.INT64), (np.float32, TensorProto.DOUBLE),
])
def test_cast(src, to):
    x = (RNG.standard_normal((3, 5)) * 4).astype(src)
    check_node("Cast", ["x"], {"x": x}, attrs={"to": to})


def test_clip_attributes_before_opset11():
    check_node("Clip", ["x"], {"x": randn(4, 5)}, attrs={"min": -0.5, "max": 0.3}, opset=6)


@pytest.mark.parametrize("inputs", [["x", "lo", "hi"], ["x", "lo"], ["x", "", "hi"], ["x"]])
def test_clip_inputs_opset13(inputs):
    inits = {"lo": np.array(-0.5, np.float32), "hi": np.array(0.3, np.float32)}
    check_node("Clip", inputs, {"x": randn(4, 5)}, inits={k: v for k, v in inits.items() if k in inputs})


def test_clip_non_constant_bounds():
    check_node("Clip", ["x", "lo", "hi"], {"x": randn(4, 5), "lo": np.array(-0.5, np.float32), "hi": np.array(0.2, np.float32)})


# -- linear algebra ---------------------------------------------------------------
@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_transposes(trans_a, trans_b):
    a = randn(*((5, 3) if trans_a else (3, 5)))
    b = randn(*((4, 5) if trans_b else (5, 4)))
    check_node("Gemm", ["a", "b", "c"], {"a": a}, inits={"b": b, "c": randn(4)},
               attrs={"transA": trans_a, "transB": trans_b})


@pytest.mark.parametrize("c_shape", [(), (1,), (4,), (1, 4), (3, 1), (3, 4), None])
def test_gemm_alpha_beta_and_c_broadcast(c_shape):
    inputs = ["a", "b"] if c_shape is None else ["a", "b", "c"]
    inits = {"b": randn(5, 4)}
    if c_shape is not None:
        inits["c"] = randn(*c_shape)
    check_node("Gemm", inputs, {"a": randn(3, 5)}, inits=inits, attrs={"alpha": 0.5, "beta": 2.0})


def test_gemm_beta_zero_ignores_c():
    check_node("Gemm", ["a", "b", "c"], {"a": randn(3, 5)}, inits={"b": randn(5, 4), "c": randn(4)}, attrs={"beta": 0.0})


@pytest.mark.parametrize("shapes", [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (4,)), ((4,), (2, 4, 5)),
])
def test_matmul_numpy_semantics(shapes):
    check_node("MatMul", ["a", "b"], {"a": randn(*shapes[0]), "b": randn(*shapes[1])})


# -- convolution ------------------------------------------------------------------
@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 2, 9), (3, 2, 3), {}),
    ((1, 2, 9), (4, 1, 3), {"group": 2, "pads": [1, 2], "strides": [2]}),
    ((2, 3, 8, 7), (4, 3, 3, 3), {"pads": [1, 0, 2, 1]}),
    ((1, 4, 9, 9), (6, 2, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((1, 2, 5, 6, 4), (3, 2, 3, 2, 2), {"pads": [1, 0, 1, 1, 1, 0]}),
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x_shape, w_shape, attrs, bias):
    inits = {"w": randn(*w_shape)}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = randn(w_shape[0])
        inputs.append("b")
    check_node("Conv", inputs, {"x": randn(*x_shape)}, inits=inits, attrs=attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv_auto_pad(auto_pad, stride):
    attrs = {"auto_pad": auto_pad, "strides": [stride, stride], "kernel_shape": [4, 3]}
    check_node("Conv", ["x", "w"], {"x": randn(1, 2, 9, 8)}, inits={"w": randn(3, 2, 4, 3)}, attrs=attrs,
               rtol=1e-4, atol=1e-5)


def test_conv_weights_as_input():
    check_node("Conv", ["x", "w"], {"x": randn(1, 2, 6, 6), "w": randn(3, 2, 3, 3)}, rtol=1e-4, atol=1e-5)


# -- pooling ----------------------------------------------------------------------
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 0], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [2, 3], "strides": [1, 2], "auto_pad": "VALID"},
    {"kernel_shape": [3, 3]},
])
def test_max_pool(attrs):
    check_node("MaxPool", ["x"], {"x": randn(2, 3, 8, 7)}, attrs=attrs)


def test_max_pool_1d():
    check_node("MaxPool", ["x"], {"x": randn(1, 2, 11)}, attrs={"kernel_shape": [3], "strides": [2], "ceil_mode": 1})


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "dilations": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "dilations": [2, 3], "pads": [1, 0, 2, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 2], "ceil_mode": 1},
])
def test_dilated_pool(op_type, attrs):
    if op_type == "LpPool":
        attrs = {**attrs, "p": 3}
    check_node(op_type, ["x"], {"x": randn(1, 2, 9, 8)}, attrs=attrs, opset=19)


@pytest.mark.parametrize("attrs", [
    {},
    {"strides": [2, 3], "pads": [1, 0, 2, 1]},
    {"strides": [2, 2], "output_padding": [1, 0], "dilations": [1, 2]},
    {"strides": [3, 2], "output_shape": [11, 8]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 1], "auto_pad": "SAME_LOWER", "group": 2},
    {"pads": [3, 1, 2, 1]},  # more padding than the kernel: the result is cropped
])
def test_conv_transpose(attrs):
    groups = attrs.get("group", 1)
    feeds = {"x": randn(2, 4, 5, 4)}
    check_node("ConvTranspose", ["x", "w", "b"], feeds, inits={"w": randn(4, 3, 3, 3), "b": randn(3 * groups)},
               attrs=attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 3], "strides": [1, 1], "auto_pad": "SAME_LOWER"},
])
def test_average_pool(attrs, count_include_pad):
    check_node("AveragePool", ["x"], {"x": randn(2, 3, 8, 7)}, attrs={**attrs, "count_include_pad": count_include_pad})


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pool(op_type, shape):
    check_node(op_type, ["x"], {"x": randn(*shape)})


# -- normalisation ----------------------------------------------------------------
def test_batch_norm_constant_params_fold_to_scale_shift():
    c = 4
    inits = {"g": randn(c), "b": randn(c), "m": randn(c), "v": np.abs(randn(c)) + 0.5}
    graph = check_node("BatchNormalization", ["x", "g", "b", "m", "v"], {"x": randn(2, c, 5, 5)}, inits=inits,
                       attrs={"epsilon": 1e-3})
    assert sorted(n.op for n in graph.nodes if n.op != "constant") == ["add", "broadcast", "broadcast", "mul"]


def test_batch_norm_runtime_params():
    c = 3
    feeds = {"x": randn(2, c, 4), "g": randn(c), "b": randn(c), "m": randn(c), "v": np.abs(randn(c)) + 0.5}
    check_node("BatchNormalization", ["x", "g", "b", "m", "v"], feeds)


@pytest.mark.parametrize("axis", [-1, 1, 2])
def test_layer_norm(axis):
    x = randn(2, 3, 6)
    shape = x.shape[axis:]
    check_node("LayerNormalization", ["x", "s", "b"], {"x": x}, inits={"s": randn(*shape), "b": randn(*shape)},
               attrs={"axis": axis}, rtol=1e-4, atol=1e-5)


def test_instance_norm():
    check_node("InstanceNormalization", ["x", "s", "b"], {"x": randn(2, 3, 4, 5)}, inits={"s": randn(3), "b": randn(3)},
               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis", [(11, None), (11, 1), (11, -1), (11, 0), (13, None), (13, 1), (13, 0)])
def test_softmax_opset_semantics(op_type, opset, axis):
    attrs = {} if axis is None else {"axis": axis}
    check_node(op_type, ["x"], {"x": 3 * randn(2, 3, 4)}, attrs=attrs, opset=opset)


# -- shapes -----------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten(axis):
    check_node("Flatten", ["x"], {"x": randn(2, 3, 4)}, attrs={"axis": axis})


@pytest.mark.parametrize("shape", [[0, -1], [-1], [2, 0, 2, -1], [6, 4], [0, 0, 4], [-1, 3, 0]])
def test_reshape_zero_and_minus_one(shape):
    check_node("Reshape", ["x", "s"], {"x": randn(2, 3, 4)}, inits={"s": np.array(shape, np.int64)})


def test_reshape_allowzero():
    check_node("Reshape", ["x", "s"], {"x": randn(0, 3)}, inits={"s": np.array([3, 0], np.int64)},
               attrs={"allowzero": 1}, opset=14)


def test_reshape_shape_attribute_opset1():
    node = helper.make_node("Reshape", ["x"], ["y"], shape=[3, 4])
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [2, 6])], [vinfo("y", TensorProto.FLOAT, [3, 4])], opset=1)
    model.ir_version = 3
    graph = import_onnx(model)
    assert graph.outputs[0].type.shape == (3, 4)


def test_reshape_of_runtime_shape_is_unsupported():
    model = node_model("Reshape", ["x", "s"], {"x": randn(2, 6), "s": np.array([3, 4], np.int64)})
    with pytest.raises(UnsupportedError, match="shape must be known at compile time"):
        import_onnx(model)


def test_shape_subgraph_folds():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape resolves at import; no shape ops remain."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    model = make_model(nodes, [vinfo("x", TensorProto.FLOAT, [2, 3, 4])], [vinfo("y", TensorProto.FLOAT, [])], inits)
    graph = compare(model, {"x": randn(2, 3, 4)})
    # what folded stays behind as dead constants until the pipeline's DCE
    assert [n.op for n in graph.nodes if n.op != "constant"] == ["reshape"]


def test_shape_start_end_and_size():
    check_node("Shape", ["x"], {"x": randn(2, 3, 4, 5)}, attrs={"start": 1, "end": -1}, opset=15)
    check_node("Size", ["x"], {"x": randn(2, 3, 4)})


@pytest.mark.parametrize("perm", [None, [1, 0, 2], [2, 0, 1]])
def test_transpose(perm):
    check_node("Transpose", ["x"], {"x": randn(2, 3, 4)}, attrs={} if perm is None else {"perm": perm})


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_concat(axis):
    shapes = {0: [(1, 3, 2), (2, 3, 2)], 1: [(2, 1, 2), (2, 4, 2)], -1: [(2, 3, 1), (2, 3, 3)], -3: [(1, 3, 2), (3, 3, 2)]}[axis]
    check_node("Concat", ["a", "b", "c"], {"a": randn(*shapes[0]), "b": randn(*shapes[1])}, inits={"c": randn(*shapes[0])},
               attrs={"axis": axis})


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_attr_vs_input(opset):
    x = randn(1, 3, 1, 4)
    if opset >= 13:
        check_node("Squeeze", ["x", "a"], {"x": x}, inits={"a": np.array([0, -2], np.int64)}, opset=opset)
        check_node("Unsqueeze", ["x", "a"], {"x": randn(3, 4)}, inits={"a": np.array([0, -1], np.int64)}, opset=opset)
    else:
        check_node("Squeeze", ["x"], {"x": x}, attrs={"axes": [0, -2]}, opset=opset)
        check_node("Unsqueeze", ["x"], {"x": randn(3, 4)}, attrs={"axes": [0, -1]}, opset=opset)
    check_node("Squeeze", ["x"], {"x": x}, opset=opset)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1], [3], [0], None),
    ([0, 1], [-1, 1000], [1, 2], None),
    ([-3], [-1], [2], [1]),
    ([0, 0], [100, 100], None, [2, 3]),
    ([-100], [2], [-1], [1]),
    ([3], [1], [0], None),  # empty
])
def test_slice(starts, ends, axes, steps):
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64)}
    inputs = ["x", "s", "e"]
    if axes is not None or steps is not None:
        inits["a"] = np.array(axes if axes is not None else list(range(len(starts))), np.int64)
        inputs.append("a")
    if steps is not None:
        inits["st"] = np.array(steps, np.int64)
        inputs.append("st")
    check_node("Slice", inputs, {"x": randn(4, 5, 6)}, inits=inits)


def test_slice_attributes_opset9():
    check_node("Slice", ["x"], {"x": randn(4, 5)}, attrs={"starts": [1, -3], "ends": [3, 100], "axes": [0, 1]}, opset=9)


def test_slice_zero_step_is_an_error():
    model = node_model("Slice", ["x", "s", "e", "a", "st"], {"x": randn(4)},
                       inits={"s": np.array([3], np.int64), "e": np.array([0], np.int64),
                              "a": np.array([0], np.int64), "st": np.array([0], np.int64)})
    with pytest.raises(ModelError, match="step 0"):
        import_onnx(model)


@pytest.mark.parametrize("opset, split, n_out", [(11, None, 3), (11, [1, 2, 3], 3), (13, [2, 4], 2), (13, None, 2), (18, None, 4)])
def test_split(opset, split, n_out):
    x = randn(2, 6, 3)
    attrs = {"axis": 1}
    inits = {}
    inputs = ["x"]
    if split is not None and opset < 13:
        attrs["split"] = split
    elif split is not None:
        inits["sp"] = np.array(split, np.int64)
        inputs.append("sp")
    if opset >= 18 and split is None:
        attrs["num_outputs"] = n_out
    check_node("Split", inputs, {"x": x}, inits=inits, attrs=attrs, opset=opset, n_out=n_out)


@pytest.mark.parametrize("pads", [[1, 0, 2, 3], [0, 2, 1, 0], [-1, 1, 0, -2]])
def test_pad_constant(pads):
    check_node("Pad", ["x", "p", "v"], {"x": randn(4, 5)}, inits={"p": np.array(pads, np.int64), "v": np.array(1.5, np.float32)})


def test_pad_attributes_opset10():
    check_node("Pad", ["x"], {"x": randn(3, 4)}, attrs={"pads": [1, 2, 0, 1], "value": -1.0}, opset=10)


def test_pad_axes_opset18():
    check_node("Pad", ["x", "p", "", "a"], {"x": randn(3, 4, 2)},
               inits={"p": np.array([1, 2], np.int64), "a": np.array([-2], np.int64)}, opset=18)


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_pad_from_data_modes(mode):
    check_node("Pad", ["x", "p"], {"x": randn(4, 5)}, inits={"p": np.array([2, 1, 1, 3], np.int64)},
               attrs={"mode": mode}, opset=19)


def test_pad_unknown_mode_is_rejected_by_name():
    model = node_model("Pad", ["x", "p"], {"x": randn(4, 5)}, inits={"p": np.array([1, 1, 1, 1], np.int64)},
                       attrs={"mode": "reflect"})
    model.graph.node[0].attribute[0].s = b"mirror"
    with pytest.raises(UnsupportedError, match="mode 'mirror'"):
        import_onnx(model)


@pytest.mark.parametrize("indices, axis", [
    (np.array(1, np.int64), 0), (np.array(-1, np.int64), 1), (np.array([2, 0, 1], np.int64), 1),
    (np.array([[0, 1], [3, 2]], np.int64), 0), (np.array([1, 2, 3], np.int32), 2),
])
def test_gather_constant_indices(indices, axis):
    check_node("Gather", ["x", "i"], {"x": randn(4, 3, 5)}, inits={"i": indices}, attrs={"axis": axis})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_runtime_indices(axis):
    check_node("Gather", ["x", "i"], {"x": randn(4, 3, 5), "i": np.array([[1, -1], [0, 2]], np.int64)}, attrs={"axis": axis})


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements_with_smaller_indices(axis):
    indices = np.array([[1, 0], [-1, 2]], np.int64)
    check_node("GatherElements", ["x", "i"], {"x": randn(3, 4), "i": indices}, attrs={"axis": axis})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(batch_dims):
    indices = np.array([[[1], [0]], [[0], [1]]], np.int64) if batch_dims else np.array([[1, 0], [0, 2]], np.int64)
    check_node("GatherND", ["x", "i"], {"x": randn(2, 3, 4), "i": indices}, attrs={"batch_dims": batch_dims})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_and_nd(reduction):
    data, updates = randn(3, 4), randn(2, 4)
    check_node("ScatterElements", ["d", "i", "u"], {"d": data, "i": np.array([[2, 0, 1, 0], [0, 1, 2, 2]], np.int64),
               "u": updates}, attrs={"axis": 0, "reduction": reduction}, opset=18)
    check_node("ScatterND", ["d", "i", "u"], {"d": data, "i": np.array([[2], [0]], np.int64), "u": updates},
               attrs={"reduction": reduction}, opset=18)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(exclusive, reverse):
    check_node("CumSum", ["x", "a"], {"x": randn(3, 5)}, inits={"a": np.array(1, np.int64)},
               attrs={"exclusive": exclusive, "reverse": reverse}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("upper, k", [(1, 0), (0, 0), (1, -1), (0, 2)])
def test_trilu(upper, k):
    check_node("Trilu", ["x", "k"], {"x": randn(2, 4, 5)}, inits={"k": np.array(k, np.int64)}, attrs={"upper": upper})


@pytest.mark.parametrize("fmod, dtype", [(0, np.int32), (1, np.int64), (1, np.float32)])
def test_mod_signs(fmod, dtype):
    x = np.array([-7, -3, 5, 8, 9, -4], dtype)
    y = np.array([3, -2, -3, 5, 2, 3], dtype)
    check_node("Mod", ["x", "y"], {"x": x, "y": y}, attrs={"fmod": fmod}, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, ctm", [("nearest", "asymmetric"), ("linear", "half_pixel"),
                                       ("linear", "align_corners"), ("cubic", "pytorch_half_pixel")])
def test_resize_modes(mode, ctm):
    check_node("Resize", ["x", "", "s"], {"x": randn(1, 2, 4, 5)}, inits={"s": np.array([1, 1, 2, 3], np.float32)},
               attrs={"mode": mode, "coordinate_transformation_mode": ctm}, opset=19, rtol=1e-4, atol=1e-5)


def test_resize_sizes_downsample():
    check_node("Resize", ["x", "", "", "z"], {"x": randn(1, 1, 8, 6)}, inits={"z": np.array([1, 1, 3, 4], np.int64)},
               attrs={"mode": "linear"}, opset=19, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_gqa_with_past_and_mask(causal):
    feeds = {"q": randn(2, 4, 3, 8), "k": randn(2, 2, 3, 8), "v": randn(2, 2, 3, 8),
             "m": RNG.random((3, 5)) > 0.3, "pk": randn(2, 2, 2, 8), "pv": randn(2, 2, 2, 8)}
    check_node("Attention", ["q", "k", "v", "m", "pk", "pv"], feeds, attrs={"is_causal": causal}, opset=23, n_out=3,
               rtol=1e-4, atol=1e-5)


def test_attention_3d_inputs():
    feeds = {"q": randn(1, 5, 16), "k": randn(1, 5, 16), "v": randn(1, 5, 16)}
    check_node("Attention", ["q", "k", "v"], feeds, attrs={"q_num_heads": 4, "kv_num_heads": 4}, opset=23,
               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_nll_and_softmax_cross_entropy(reduction):
    scores = randn(3, 5, 2)
    target = np.array([[0, 4], [2, -1], [1, 3]], np.int64)
    attrs = {"reduction": reduction, "ignore_index": -1}
    check_node("NegativeLogLikelihoodLoss", ["x", "t"], {"x": scores, "t": target}, attrs=attrs, rtol=1e-5, atol=1e-6)
    check_node("SoftmaxCrossEntropyLoss", ["x", "t"], {"x": scores, "t": target}, attrs=attrs, rtol=1e-5, atol=1e-6)


def test_layer_norm_statistics_outputs():
    check_node("LayerNormalization", ["x", "s", "b"], {"x": randn(2, 3, 4)},
               inits={"s": randn(4), "b": randn(4)}, n_out=3, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op_type, attrs", [
    ("Mish", {}), ("Celu", {"alpha": 2.0}), ("ThresholdedRelu", {"alpha": 0.5}),
    ("Shrink", {"lambd": 0.7, "bias": 0.2}), ("Sinh", {}), ("Cosh", {}), ("Tan", {}), ("Asinh", {}),
])
def test_opset22_activations_and_hyperbolic_functions(op_type, attrs):
    check_node(op_type, ["x"], {"x": randn(3, 7)}, attrs=attrs, opset=22, rtol=1e-5, atol=1e-5)


def test_symbolic_dim_without_shape_names_input_dim_and_flag_2d():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    with pytest.raises(UnsupportedError, match=r"input 'x' dim 0 \('batch'\) is dynamic; fix it with shapes=\{'x': \(1, 3\)\}") as info:
        import_onnx(model)
    assert info.value.cli_message.endswith("fix it with --shape x=1x3")  # the CLI's spelling of the same fix


def test_dynamic_axes_shape_subgraph_folds_once_shape_is_given():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as dynamic-axes exports write it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, opset=17)
    graph = import_onnx(model, shapes={"x": (2, 3, 4)})
    assert [n.op for n in graph.nodes if n.op != "constant"] == ["reshape"]
    assert graph.outputs[0].type.shape == (2, 12)


def test_expand_tile_constant_of_shape_range():
    check_node("Expand", ["x", "s"], {"x": randn(3, 1)}, inits={"s": np.array([2, 1, 4], np.int64)})
    check_node("Tile", ["x", "r"], {"x": randn(2, 3)}, inits={"r": np.array([2, 3], np.int64)})
    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [2.5])
    check_node("ConstantOfShape", ["s"], {}, inits={"s": np.array([2, 3], np.int64)}, attrs={"value": value})
    check_node("ConstantOfShape", ["s"], {}, inits={"s": np.array([4], np.int64)})
    check_node("Range", ["a", "b", "c"], {}, inits={"a": np.array(1, np.int64), "b": np.array(10, np.int64), "c": np.array(3, np.int64)})
    check_node("Range", ["a", "b", "c"], {}, inits={"a": np.array(0.5, np.float32), "b": np.array(-1.0, np.float32),
                                                  "c": np.array(-0.4, np.float32)})


@pytest.mark.parametrize(("start", "offset", "delta"), [(np.int64(5), 4, 1), (np.int64(250), 6, 2),
                                                      (np.float32(0.5), -1.0, -0.4), (np.int64(3), 0, 1)])
def test_range_from_a_run_time_start_plus_a_constant(start, offset, delta):
    """Range(p, p + c, d) with a run-time p (a decoder's positions): c / d elements whatever p is."""
    dtype = helper.np_dtype_to_tensor_dtype(np.asarray(start).dtype)
    nodes = [helper.make_node("Add", ["p", "c"], ["end"]), helper.make_node("Range", ["p", "end", "d"], ["y"])]
    inits = [numpy_helper.from_array(np.asarray(offset, start.dtype), "c"),
             numpy_helper.from_array(np.asarray(delta, start.dtype), "d")]
    model = make_model(nodes, [vinfo("p", dtype, [])], [vinfo("y", dtype, None)], inits)
    for p in (start, start + 7):
        compare(model, {"p": np.asarray(p, start.dtype)})


def test_range_of_a_run_time_limit_is_refused():
    nodes = [helper.make_node("Range", ["a", "n", "d"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "a"), numpy_helper.from_array(np.array(1, np.int64), "d")]
    model = make_model(nodes, [vinfo("n", TensorProto.INT64, [])], [vinfo("y", TensorProto.INT64, None)], inits)
    with pytest.raises(UnsupportedError, match="must be known at compile time"):
        import_onnx(model)


@pytest.mark.parametrize("attrs", [
    {"value": helper.make_tensor("v", TensorProto.FLOAT, [2, 2], [1, 2, 3, 4])},
    {"value_float": 1.5}, {"value_floats": [1.0, 2.0]}, {"value_int": 3}, {"value_ints": [4, 5, 6]},
])
def test_constant_forms(attrs):
    check_node("Constant", [], {}, attrs=attrs)


def test_dropout_is_identity():
    check_node("Dropout", ["x"], {"x": randn(3, 4)}, attrs={"ratio": 0.3}, opset=11)
    check_node("Dropout", ["x"], {"x": randn(3, 4)})


@pytest.mark.parametrize("op_type", ["DepthToSpace", "SpaceToDepth"])
def test_depth_space(op_type):
    x = randn(1, 8, 4, 6)
    check_node(op_type, ["x"], {"x": x}, attrs={"blocksize": 2})
    if op_type == "DepthToSpace":
        check_node(op_type, ["x"], {"x": x}, attrs={"blocksize": 2, "mode": "CRD"})


# -- reductions -------------------------------------------------------------------
REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSumExp"]


@pytest.mark.parametrize("op_type", REDUCE_OPS)
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0)])
def test_reduce(op_type, opset, axes, keepdims):
    x = randn(2, 3, 4)
    attrs = {"keepdims": keepdims}
    inputs, inits = ["x"], {}
    axes_as_input = opset >= (13 if op_type == "ReduceSum" else 18)
    if axes is not None and axes_as_input:
        inputs.append("a")
        inits["a"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = axes
    check_node(op_type, inputs, {"x": x}, inits=inits, attrs=attrs, opset=opset, rtol=1e-5, atol=1e-5)


def test_reduce_log_sum_positive():
    check_node("ReduceLogSum", ["x"], {"x": np.abs(randn(3, 4)) + 0.1}, attrs={"axes": [1]}, opset=13)


def test_reduce_noop_with_empty_axes():
    check_node("ReduceSum", ["x"], {"x": randn(2, 3)}, attrs={"noop_with_empty_axes": 1}, opset=13)


# -- whole-model behaviour ----------------------------------------------------------
def test_initializer_listed_as_input_is_a_constant():
    w = randn(4, 3)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [2, 4]), vinfo("w", TensorProto.FLOAT, [4, 3])],
                       [vinfo("y", TensorProto.FLOAT, [])], [numpy_helper.from_array(w, "w")], opset=11)
    graph = compare(model, {"x": randn(2, 4)})
    assert [v.name for v in graph.inputs] == ["x"]


def test_loc_and_output_names():
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu/1"), helper.make_node("Neg", ["h"], ["out:0"])]
    model = make_model(nodes, [vinfo("x", TensorProto.FLOAT, [3])], [vinfo("out:0", TensorProto.FLOAT, [3])])
    graph = import_onnx(model)
    assert graph.output_names == ["out:0"]
    locs = {n.op: n.loc for n in graph.nodes}
    assert locs["max"] == "relu/1"
    assert locs["neg"] == "Neg_1"


def test_graph_output_that_is_an_input_or_initializer():
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    model = make_model(nodes, [vinfo("x", TensorProto.FLOAT, [3])],
                       [vinfo("y", TensorProto.FLOAT, [3]), vinfo("c", TensorProto.FLOAT, [2])],
                       [numpy_helper.from_array(randn(2), "c")])
    compare(model, {"x": randn(3)})


def _symbolic_model():
    node = helper.make_node("Relu", ["x"], ["y"])
    return make_model([node], [vinfo("x", TensorProto.FLOAT, ["batch", 3, 224, 224])], [vinfo("y", TensorProto.FLOAT, [])])


def test_symbolic_dim_without_shape_names_input_dim_and_flag():
    with pytest.raises(UnsupportedError) as info:
        import_onnx(_symbolic_model())
    message = str(info.value)
    assert "input 'x' dim 0 ('batch') is dynamic" in message
    assert "shapes={'x': (1, 3, 224, 224)}" in message
    assert "--shape x=1x3x224x224" in info.value.cli_message


def test_shapes_fix_symbolic_dims():
    graph = import_onnx(_symbolic_model(), shapes={"x": (2, 3, 224, 224)})
    assert graph.inputs[0].type.shape == (2, 3, 224, 224)
    assert graph.outputs[0].type.shape == (2, 3, 224, 224)


def test_shape_for_unknown_input_lists_real_inputs():
    with pytest.raises(ModelError, match=r"'z'.*inputs are: 'x'"):
        import_onnx(_symbolic_model(), shapes={"z": (1,)})


def test_shape_contradicting_static_dim():
    with pytest.raises(ModelError, match="dim 1, which is fixed to 3"):
        import_onnx(_symbolic_model(), shapes={"x": (1, 4, 224, 224)})
    with pytest.raises(ModelError, match="rank"):
        import_onnx(_symbolic_model(), shapes={"x": (1, 3)})


# -- dims as exporters write them: dim_param, dim_value -1 (older Paddle), neither field, 0 --
def _relu_model(x_dims, name="x"):
    node = helper.make_node("Relu", [name], ["y"])
    return make_model([node], [vinfo(name, TensorProto.FLOAT, x_dims)], [vinfo("y", TensorProto.FLOAT, None)])


@pytest.mark.parametrize("dynamic", [-1, None], ids=["dim_value_minus_1", "no_dim_field"])
def test_exporter_dynamic_dims_are_fixed_by_shapes(dynamic):
    model = _relu_model([dynamic, 3, dynamic, 5])
    graph = import_onnx(model, shapes={"x": (2, 3, 7, 5)})
    assert graph.inputs[0].type.shape == (2, 3, 7, 5)
    x = randn(2, 3, 7, 5)
    (ours,) = interpret(graph, {"x": x})
    (theirs,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(ours, theirs)


def test_exporter_dynamic_dims_without_shape_say_which_and_how():
    with pytest.raises(UnsupportedError) as info:
        import_onnx(_relu_model([-1, 3, None, 5]))
    assert str(info.value) == "input 'x' dims 0 (dim_value -1), 2 (no size) are dynamic; fix them with shapes={'x': (1, 3, 1, 5)}"
    assert info.value.cli_message == "input 'x' dims 0 (dim_value -1), 2 (no size) are dynamic; fix them with --shape x=1x3x1x5"


def test_every_dynamic_input_is_listed_in_one_error_with_shell_ready_flags():
    nodes = [helper.make_node("Add", ["in put", "b"], ["y"])]
    model = make_model(nodes, [vinfo("in put", TensorProto.FLOAT, ["N", 3]), vinfo("b", TensorProto.FLOAT, [-1, 3])],
                       [vinfo("y", TensorProto.FLOAT, None)])
    with pytest.raises(UnsupportedError) as info:
        import_onnx(model)
    what = "input 'in put' dim 0 ('N') is dynamic; input 'b' dim 0 (dim_value -1) is dynamic"
    assert str(info.value) == f"{what}; fix them with shapes={{'in put': (1, 3), 'b': (1, 3)}}"
    assert info.value.cli_message == f"{what}; fix them with --shape 'in put=1x3' --shape b=1x3"


def test_zero_dim_value_is_an_empty_dim_not_a_dynamic_one():
    model = _relu_model([0, 3])
    graph = compare(model, {"x": np.zeros((0, 3), np.float32)})  # no shapes needed
    assert graph.inputs[0].type.shape == (0, 3)
    with pytest.raises(ModelError, match="dim 0, which is fixed to 0"):
        import_onnx(model, shapes={"x": (2, 3)})


def test_input_and_output_names_are_kept_exactly():
    """Only the IR values behind them are sanitized; feeds, manifest and runtime use the model's names."""
    names = ["gpu_0/data_0", "x:0 é"]
    nodes = [helper.make_node("Add", names, ["out/put:0 ✓"])]
    model = make_model(nodes, [vinfo(n, TensorProto.FLOAT, [2]) for n in names], [vinfo("out/put:0 ✓", TensorProto.FLOAT, [2])])
    graph = import_onnx(model)
    assert graph.input_names == names and graph.output_names == ["out/put:0 ✓"]
    assert [v.name for v in graph.inputs] == ["gpu_0_data_0", "x_0__"]


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match=r"cannot read model '.*nope\.onnx': no such file"):
        import_onnx(tmp_path / "nope.onnx")


def test_not_onnx_file(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(bytes(RNG.integers(0, 256, 256, dtype=np.uint8)))
    with pytest.raises(ModelError, match="garbage.onnx"):
        import_onnx(path)
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    with pytest.raises(ModelError, match="notes.onnx"):
        import_onnx(str(text))


def test_a_model_file_is_read_once(tmp_path, monkeypatch):
    # the compiler hashes the file's bytes and imports the same bytes: a file changed between
    # two reads could not give an artifact whose source hash is not the model compiled
    from aot import driver
    from aot.importers.onnx import loader

    node = helper.make_node("Relu", ["x"], ["y"])
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [3])], [vinfo("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "relu.onnx"
    onnx.save_model(model, path)
    reads = []
    real_open = open

    def counting_open(file, mode="r", *args, **kwargs):
        if os.fspath(file) == str(path):
            reads.append(mode)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", counting_open)
    monkeypatch.setattr("io.open", counting_open)  # pathlib's read_bytes opens through io
    graph, sha, _ = driver.import_model(path)
    assert len(reads) == 1
    monkeypatch.undo()
    assert sha == hashlib.sha256(path.read_bytes()).hexdigest()
    assert graph.nodes[-1].op == "max"  # relu
    assert loader.load_model(path).graph.node[0].op_type == "Relu"  # alone, it reads the file itself


def test_checker_failure_is_model_error():
    node = helper.make_node("Relu", ["x", "extra", "more"], ["y"])  # Relu takes one input
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [3])], [vinfo("y", TensorProto.FLOAT, [])])
    with pytest.raises(ModelError, match="ONNX checker"):
        import_onnx(model)


def test_checker_failure_from_a_file_is_model_error(tmp_path):
    # a file's own bytes go to the checker (no external data): it must still reject
    node = helper.make_node("Relu", ["x", "extra", "more"], ["y"])
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [3])], [vinfo("y", TensorProto.FLOAT, [])])
    onnx.save_model(model, tmp_path / "bad.onnx")
    with pytest.raises(ModelError, match="bad.onnx' fails the ONNX checker"):
        import_onnx(tmp_path / "bad.onnx")


def test_reads_path_with_an_unshaped_output(tmp_path):
    # the checker sees a copy with a placeholder output shape, not the file's bytes
    node = helper.make_node("Relu", ["x"], ["y"])
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [3])], [output])
    onnx.save_model(model, tmp_path / "m.onnx")
    x = randn(3)
    np.testing.assert_allclose(interpret(import_onnx(tmp_path / "m.onnx"), {"x": x})[0], np.maximum(x, 0))


def test_reads_path_with_external_data(tmp_path):
    w = randn(64, 64)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [2, 64])], [vinfo("y", TensorProto.FLOAT, [])],
                       [numpy_helper.from_array(w, "w")])
    sub = tmp_path / "m"
    sub.mkdir()
    onnx.save_model(model, sub / "model.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0)
    assert (sub / "weights.bin").exists()
    graph = import_onnx(sub / "model.onnx")
    x = randn(2, 64)
    np.testing.assert_allclose(interpret(graph, {"x": x})[0], x @ w, rtol=1e-5, atol=1e-5)


def test_all_unsupported_ops_listed_in_one_error():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("NonZero", ["a"], ["b"], name="nz"),
        helper.make_node("Unique", ["x"], ["c"], name="unique_1"),
        helper.make_node("MyOp", ["x"], ["e"], name="custom", domain="com.example"),
    ]
    model = make_model(nodes, [vinfo("x", TensorProto.FLOAT, [4])], [vinfo("b", TensorProto.INT64, [1, 2]),
                       vinfo("c", TensorProto.FLOAT, [2]), vinfo("e", TensorProto.FLOAT, [4])],
                       [numpy_helper.from_array(np.array([2], np.int64), "k")], extra_opsets=[("com.example", 1)])
    with pytest.raises(UnsupportedError) as info:
        import_onnx(model)
    assert str(info.value) == (
        "model uses 3 unsupported op(s):\n"
        "  node 'nz' (NonZero, opset 17)\n"
        "  node 'unique_1' (Unique, opset 17)\n"
        "  node 'custom' (MyOp, domain 'com.example' opset 1)"
    )


@pytest.mark.parametrize("elem_type, name", [(TensorProto.INT4, "int4"), (TensorProto.STRING, "string"),
                                             (TensorProto.COMPLEX64, "complex64")])
def test_unsupported_input_dtype(elem_type, name):
    node = helper.make_node("Identity", ["x"], ["y"])
    model = make_model([node], [vinfo("x", elem_type, [3])], [vinfo("y", elem_type, [3])])
    with pytest.raises(UnsupportedError, match=f"input 'x' has dtype {name}"):
        import_onnx(model)


def test_unsupported_initializer_dtype():
    model = node_model("Add", ["x", "c"], {"x": np.zeros(3, np.complex64)}, inits={"c": np.ones(3, np.complex64)})
    with pytest.raises(UnsupportedError, match="dtype complex64"):
        import_onnx(model)


def test_unused_dropout_mask_is_fine_but_used_mask_is_not():
    node = helper.make_node("Dropout", ["x"], ["y", "mask"])
    model = make_model([node], [vinfo("x", TensorProto.FLOAT, [3])], [vinfo("y", TensorProto.FLOAT, [])])
    compare(model, {"x": randn(3)})
    model.graph.output.append(vinfo("mask", TensorProto.BOOL, [3]))
    with pytest.raises(UnsupportedError, match="output 1"):
        import_onnx(model)


def test_small_attention_block():
    """MatMul-based attention: Q K^T / sqrt(d) -> Softmax -> V, with a LayerNorm in front."""
    d = 8
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["h"], axis=-1),
        helper.make_node("MatMul", ["h", "wq"], ["q"]),
        helper.make_node("MatMul", ["h", "wk"], ["k"]),
        helper.make_node("MatMul", ["h", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Div", ["s", "scale"], ["s2"]),
        helper.make_node("Softmax", ["s2"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["y"]),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("ln_s", randn(d)), ("ln_b", randn(d)), ("wq", randn(d, d)), ("wk", randn(d, d)), ("wv", randn(d, d)),
        ("scale", np.array(np.sqrt(d), np.float32))]]
    model = make_model(nodes, [vinfo("x", TensorProto.FLOAT, [2, 5, d])], [vinfo("y", TensorProto.FLOAT, [])], inits)
    compare(model, {"x": randn(2, 5, d)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime only takes odd sizes
def test_lrn(size):
    check_node("LRN", ["x"], {"x": randn(2, 6, 4, 3)}, attrs={"size": size, "alpha": 0.01, "beta": 0.6, "bias": 1.5})


def test_split_uneven_num_outputs_opset18():
    check_node("Split", ["x"], {"x": randn(7, 2)}, attrs={"num_outputs": 3}, opset=18, n_out=3)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.int8, np.uint8])
def test_dtypes_flow_through(dtype):
    a = (RNG.standard_normal((3, 4)) * 5).astype(dtype)
    b = (RNG.standard_normal((4,)) * 5).astype(dtype)
    rtol = 1e-3 if dtype == np.float16 else 1e-5
    check_node("Add", ["a", "b"], {"a": a, "b": b}, rtol=rtol)
    check_node("Mul", ["a", "b"], {"a": a, "b": b}, rtol=rtol)
    if dtype not in (np.int8, np.uint8):
        check_node("MatMul", ["a", "b"], {"a": a, "b": b}, rtol=rtol, atol=1e-2 if dtype == np.float16 else 1e-6)
    if dtype not in (np.uint8, np.int64):  # onnxruntime has no Relu kernel for these
        check_node("Relu", ["a"], {"a": a})
    check_node("ReduceMax", ["a"], {"a": a}, attrs={"axes": [1], "keepdims": 0}, opset=13)


def test_inconsistent_operands_name_the_node():
    model = node_model("Conv", ["x", "w"], {"x": randn(1, 3, 5, 5)}, inits={"w": randn(2, 4, 3, 3)})
    model.graph.node[0].name = "conv_7"
    with pytest.raises(ModelError, match=r"node 'conv_7' \(Conv, opset 17\): conv: input channels"):
        import_onnx(model)


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": 1, "keepdims": 0}, {"axis": -1, "select_last_index": 1}])
def test_arg_reduce_with_ties(op_type, attrs):
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # many ties
    check_node(op_type, ["x"], {"x": x}, attrs=attrs)


# -- einsum, top-k, negative-step slice, compress, center crop/pad, float mod ----------
@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ij->ji", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("ij->", [(3, 4)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("...j,j...->...", [(2, 3, 4), (4, 2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ii", [(4, 4)]),
])
def test_einsum(equation, shapes):
    feeds = {f"x{i}": randn(*shape) for i, shape in enumerate(shapes)}
    check_node("Einsum", list(feeds), feeds, attrs={"equation": equation}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [{}, {"largest": 0}, {"axis": 0}, {"axis": -2, "largest": 0}])
def test_top_k_with_ties(attrs):
    x = RNG.integers(0, 3, size=(5, 6)).astype(np.float32)  # many ties: lower index first
    check_node("TopK", ["x", "k"], {"x": x}, inits={"k": np.array([3], np.int64)}, attrs=attrs, n_out=2)


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([-1], [-100], [0], [-1]),
    ([20, 10], [0, -100], [0, 1], [-2, -3]),
    ([2, 1], [-5, 4], [1, 0], [-1, 1]),
])
def test_slice_negative_steps(starts, ends, axes, steps):
    inits = {n: np.array(v, np.int64) for n, v in zip(("s", "e", "a", "p"), (starts, ends, axes, steps))}
    check_node("Slice", ["x", "s", "e", "a", "p"], {"x": randn(6, 7)}, inits=inits)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress_constant_condition(axis):
    attrs = {} if axis is None else {"axis": axis}
    check_node("Compress", ["x", "c"], {"x": randn(4, 5)}, inits={"c": np.array([0, 1, 1, 0], bool)}, attrs=attrs)


def test_compress_run_time_condition_is_rejected_by_name():
    model = node_model("Compress", ["x", "c"], {"x": randn(4, 5), "c": np.array([0, 1], bool)}, attrs={"axis": 0})
    with pytest.raises(UnsupportedError, match=r"Compress.*condition must be known at compile time"):
        import_onnx(model)


@pytest.mark.parametrize("shape,axes", [([3, 8], None), ([2], [-1]), ([9], [0]), ([4, 3], [1, 0])])
def test_center_crop_pad(shape, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_node("CenterCropPad", ["x", "s"], {"x": randn(6, 5)}, inits={"s": np.array(shape, np.int64)}, attrs=attrs, opset=18)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mod_python_style(dtype):
    x = np.array([-4.5, -3.0, -0.5, 0.0, 2.5, 7.25, 5.0, -5.0, 3.0], dtype)
    y = np.array([2.0, -2.0, 3.0, 1.5, -1.0, 2.0, np.inf, np.inf, -np.inf], dtype)
    check_node("Mod", ["x", "y"], {"x": x, "y": y}, attrs={"fmod": 1})
    # onnxruntime refuses fmod=0 on floats before opset 28: numpy's floored mod is the reference
    graph = import_onnx(node_model("Mod", ["x", "y"], {"x": x, "y": y}, attrs={"fmod": 0}))
    np.testing.assert_allclose(interpret(graph, {"x": x, "y": y})[0], np.mod(x, y))


# -- linear quantization ------------------------------------------------------------
@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_dequantize_linear(zp_dtype, per_axis):
    x = randn(2, 3, 4) * 40
    scale = np.array([0.5, 0.25, 1.0], np.float32) if per_axis else np.array(0.3, np.float32)
    zp = (np.array([3, 0, 7]) if per_axis else np.array(5)).astype(zp_dtype)
    check_node("QuantizeLinear", ["x", "s", "z"], {"x": x}, inits={"s": scale, "z": zp}, opset=19)
    q = RNG.integers(0, 120, size=(2, 3, 4)).astype(zp_dtype)
    check_node("DequantizeLinear", ["q", "s", "z"], {"q": q}, inits={"s": scale, "z": zp}, opset=19)


def test_quantize_linear_blocked():
    x = randn(3, 8) * 10
    scale = np.abs(randn(3, 3)) + 0.1  # blocks of 3 along axis 1, the last one partial
    zp = RNG.integers(-5, 5, size=(3, 3)).astype(np.int8)
    check_node("QuantizeLinear", ["x", "s", "z"], {"x": x}, inits={"s": scale, "z": zp}, attrs={"axis": 1, "block_size": 3}, opset=21)


def test_dynamic_quantize_linear():
    check_node("DynamicQuantizeLinear", ["x"], {"x": randn(3, 5) * 4}, n_out=3)


def test_qlinear_matmul_and_matmul_integer():
    a = RNG.integers(0, 255, size=(2, 3, 4)).astype(np.uint8)
    b = RNG.integers(0, 255, size=(4, 5)).astype(np.uint8)
    inits = {"as": np.array(0.02, np.float32), "az": np.array(113, np.uint8), "bs": np.array(0.01, np.float32),
             "bz": np.array(114, np.uint8), "ys": np.array(0.05, np.float32), "yz": np.array(118, np.uint8)}
    check_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], {"a": a, "b": b}, inits=inits)
    check_node("MatMulInteger", ["a", "b", "az", "bz"], {"a": a, "b": b}, inits={"az": inits["az"], "bz": inits["bz"]})
