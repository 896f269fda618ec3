"""ONNX importer, If / Loop / Scan (importers/onnx/ops_control.py): subgraphs inlined into the graph,
interpreted, compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.errors import UnsupportedError
from aot.importers.onnx import import_onnx
from onnx_util import compare, make_model, vinfo

RNG = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- If / Loop / Scan ---------------------------------------------------------------------
def _graph(nodes, inputs, outputs, inits=()):
    return helper.make_graph(nodes, "body", inputs, outputs, initializer=list(inits))


def _if_model(cond_init=None):
    """y = If(cond) then x * 2 (reads outer x) else x - w (w an else-branch initializer)."""
    f = TensorProto.FLOAT
    then_g = _graph([helper.make_node("Mul", ["x", "two"], ["t"])], [], [vinfo("t", f, [2, 3])],
                    [numpy_helper.from_array(np.float32(2.0), "two")])
    else_g = _graph([helper.make_node("Sub", ["x", "w"], ["e"])], [], [vinfo("e", f, [2, 3])],
                    [numpy_helper.from_array(np.full((2, 3), 0.5, np.float32), "w")])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    inputs = [vinfo("x", f, [2, 3])]
    inits = []
    if cond_init is None:
        inputs.append(vinfo("cond", TensorProto.BOOL, []))
    else:
        inits.append(numpy_helper.from_array(np.array(cond_init), "cond"))
    return make_model([node], inputs, [vinfo("y", f, [2, 3])], inits)


@pytest.mark.parametrize("cond", [True, False])
def test_if_constant_condition_inlines_one_branch(cond):
    x = randn(2, 3)
    graph = compare(_if_model(cond), {"x": x})
    assert not any(n.op == "select" for n in graph.nodes)


@pytest.mark.parametrize("cond", [True, False])
def test_if_runtime_condition_selects(cond):
    compare(_if_model(), {"x": randn(2, 3), "cond": np.array(cond)})


def test_if_rejects_runtime_condition_with_differing_branch_types():
    f = TensorProto.FLOAT
    then_g = _graph([helper.make_node("Identity", ["x"], ["t"])], [], [vinfo("t", f, [2, 3])])
    else_g = _graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], [], [vinfo("e", f, [])])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)
    model = make_model([node], [vinfo("x", f, [2, 3]), vinfo("cond", TensorProto.BOOL, [])], [vinfo("y", f, None)])
    with pytest.raises(UnsupportedError, match=r"If.*condition must be known at compile time"):
        import_onnx(model)


def _loop_model(trip, stop_after=None):
    """Loop carrying s (s += x[i] over rows i), scanning out s * i; optionally cond_out = i + 1 < stop_after."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    nodes = [
        helper.make_node("Unsqueeze", ["i", "zero"], ["i1"]),
        helper.make_node("Add", ["i1", "one"], ["i2"]),
        helper.make_node("Slice", ["x", "i1", "i2"], ["row"]),
        helper.make_node("Add", ["s_in", "row"], ["s_out"]),
        helper.make_node("Cast", ["i"], ["fi"], to=f),
        helper.make_node("Mul", ["s_out", "fi"], ["scan"]),
    ]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "zero"), numpy_helper.from_array(np.array([1], np.int64), "one")]
    if stop_after is None:
        nodes.append(helper.make_node("Identity", ["c_in"], ["c_out"]))
    else:
        inits.append(numpy_helper.from_array(np.array(stop_after, np.int64), "stop"))
        inits.append(numpy_helper.from_array(np.array(1, np.int64), "one_s"))
        nodes += [helper.make_node("Add", ["i", "one_s"], ["next"]), helper.make_node("Less", ["next", "stop"], ["c_out"])]
    body = _graph(nodes, [vinfo("i", i64, []), vinfo("c_in", TensorProto.BOOL, []), vinfo("s_in", f, [1, 3])],
                  [vinfo("c_out", TensorProto.BOOL, []), vinfo("s_out", f, [1, 3]), vinfo("scan", f, [1, 3])], inits)
    node = helper.make_node("Loop", ["M", "cond", "s0"], ["s", "scans"], body=body)
    outer_inits = [numpy_helper.from_array(np.array(trip, np.int64), "M"), numpy_helper.from_array(np.array(True), "cond")]
    return make_model([node], [vinfo("x", f, [5, 3]), vinfo("s0", f, [1, 3])],
                      [vinfo("s", f, None), vinfo("scans", f, None)], outer_inits)


def test_loop_constant_trip_count():
    compare(_loop_model(4), {"x": randn(5, 3), "s0": randn(1, 3)})


def test_loop_condition_folding_to_false_stops_early():
    compare(_loop_model(5, stop_after=2), {"x": randn(5, 3), "s0": randn(1, 3)})


def test_loop_rejects_runtime_trip_count():
    model = _loop_model(4)
    model.graph.initializer.pop(0)  # M becomes a graph input
    model.graph.input.append(vinfo("M", TensorProto.INT64, []))
    with pytest.raises(UnsupportedError, match=r"Loop.*trip count M must be known at compile time"):
        import_onnx(model)


def _scan_body():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Add", ["acc_in", "row"], ["acc_out"]), helper.make_node("Mul", ["acc_out", "scale"], ["out"])]
    return _graph(nodes, [vinfo("acc_in", f, [3]), vinfo("row", f, [3])], [vinfo("acc_out", f, [3]), vinfo("out", f, [3])])


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [(0, 0, 0, 0), (1, 1, 1, 0), (1, 0, 0, 1)])
def test_scan_axes_and_directions(in_axis, in_dir, out_axis, out_dir):
    f = TensorProto.FLOAT
    node = helper.make_node("Scan", ["acc0", "xs"], ["acc", "ys"], body=_scan_body(), num_scan_inputs=1,
                            scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                            scan_output_axes=[out_axis], scan_output_directions=[out_dir])
    xs = randn(4, 3) if in_axis == 0 else randn(3, 4)
    scale = numpy_helper.from_array(np.float32(0.5), "scale")  # read by the body from the outer scope
    model = make_model([node], [vinfo("acc0", f, [3]), vinfo("xs", f, list(xs.shape))],
                       [vinfo("acc", f, None), vinfo("ys", f, None)], [scale])
    compare(model, {"acc0": randn(3), "xs": xs})


def test_scan_opset8_batch_axis():
    f = TensorProto.FLOAT
    node = helper.make_node("Scan", ["", "acc0", "xs"], ["acc", "ys"], body=_scan_body(), num_scan_inputs=1,
                            directions=[1])
    scale = numpy_helper.from_array(np.float32(2.0), "scale")
    model = make_model([node], [vinfo("acc0", f, [2, 3]), vinfo("xs", f, [2, 4, 3])],
                       [vinfo("acc", f, None), vinfo("ys", f, None)], [scale], opset=8)
    compare(model, {"acc0": randn(2, 3), "xs": randn(2, 4, 3)})
