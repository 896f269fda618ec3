"""ONNX importer, recurrent / sampling / control-flow ops: lowered to IR, interpreted, compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.errors import UnsupportedError
from test_onnx_importer import check_node, compare, import_onnx, make_model, node_model, vinfo

RNG = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def check_against_reference(model, feeds, rtol=1e-4, atol=1e-5):
    """Compare with onnx's reference evaluator, where onnxruntime departs from the specification."""
    from onnx.reference import ReferenceEvaluator

    from aot.interpreter import interpret

    ours = interpret(import_onnx(model), feeds)
    theirs = ReferenceEvaluator(model).run(None, feeds)
    assert len(ours) == len(theirs)
    for mine, ref in zip(ours, theirs):
        assert mine.shape == ref.shape and mine.dtype == ref.dtype, (mine.shape, mine.dtype, ref.shape, ref.dtype)
        np.testing.assert_allclose(mine, ref, rtol=rtol, atol=atol)


# -- RNN / GRU / LSTM ---------------------------------------------------------------
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _rnn_feeds(op, seq=3, batch=2, inp=3, hidden=4, dirs=1, layout=0, bias=True, init=False, peep=False):
    g = GATES[op]
    feeds = {
        "X": randn(*((batch, seq, inp) if layout else (seq, batch, inp))),
        "W": randn(dirs, g * hidden, inp) * 0.5,
        "R": randn(dirs, g * hidden, hidden) * 0.5,
    }
    names = ["X", "W", "R"]
    if bias or init or peep:
        names.append("B")
        feeds["B"] = randn(dirs, 2 * g * hidden) * 0.5
    if init or peep:
        names.append("")  # sequence_lens
        names.append("H0")
        feeds["H0"] = randn(*((batch, dirs, hidden) if layout else (dirs, batch, hidden)))
        if op == "LSTM":
            names.append("C0")
            feeds["C0"] = randn(*((batch, dirs, hidden) if layout else (dirs, batch, hidden)))
    if peep:
        names.append("P")
        feeds["P"] = randn(dirs, 3 * hidden)
    return names, feeds


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_directions(op, direction):
    dirs = 2 if direction == "bidirectional" else 1
    names, feeds = _rnn_feeds(op, dirs=dirs, init=True)
    n_out = 3 if op == "LSTM" else 2
    check_node(op, names, feeds, attrs={"hidden_size": 4, "direction": direction}, n_out=n_out, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_layout_1_matches_layout_0(op):
    """onnxruntime rejects layout=1, so the batch-major model is checked against the
    time-major one (checked against onnxruntime above) on transposed operands."""
    from aot.interpreter import interpret

    names, feeds = _rnn_feeds(op, layout=1, dirs=2, init=True)
    n_out = 3 if op == "LSTM" else 2
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    batch_major = interpret(import_onnx(node_model(op, names, feeds, attrs={**attrs, "layout": 1}, n_out=n_out)), feeds)
    time_major_feeds = {k: (v.transpose(1, 0, 2) if k in ("X", "H0", "C0") else v) for k, v in feeds.items()}
    expected = compare(node_model(op, names, time_major_feeds, attrs=attrs, n_out=n_out), time_major_feeds, 1e-4, 1e-5)
    expected = interpret(expected, time_major_feeds)
    np.testing.assert_allclose(batch_major[0], expected[0].transpose(2, 0, 1, 3), rtol=1e-6)
    for mine, ref in zip(batch_major[1:], expected[1:]):
        np.testing.assert_allclose(mine, ref.transpose(1, 0, 2), rtol=1e-6)


def test_gru_linear_before_reset_and_clip():
    names, feeds = _rnn_feeds("GRU", init=True)
    attrs = {"hidden_size": 4, "linear_before_reset": 1, "clip": 0.7}
    check_node("GRU", names, feeds, attrs=attrs, n_out=2, rtol=1e-4, atol=1e-5)


def test_lstm_peepholes_and_constant_full_sequence_lens():
    names, feeds = _rnn_feeds("LSTM", peep=True)
    names[3 + 1] = "lens"
    inits = {"lens": np.array([3, 3], np.int32)}
    check_node("LSTM", names, feeds, inits=inits, attrs={"hidden_size": 4}, n_out=3, rtol=1e-4, atol=1e-5)


def test_rnn_activation_list_with_alpha_beta():
    names, feeds = _rnn_feeds("GRU", dirs=2)
    attrs = {"hidden_size": 4, "direction": "bidirectional",
             "activations": ["HardSigmoid", "LeakyRelu", "Sigmoid", "ScaledTanh"],
             "activation_alpha": [0.3, 0.05, 0.9], "activation_beta": [0.4, 1.1]}
    check_node("GRU", names, feeds, attrs=attrs, n_out=2, rtol=1e-4, atol=1e-5)


def test_rnn_rejects_short_sequence_lens_by_name():
    names, feeds = _rnn_feeds("RNN", init=True)
    names[4] = "lens"
    model = node_model("RNN", names, feeds, inits={"lens": np.array([3, 2], np.int32)}, attrs={"hidden_size": 4}, n_out=2)
    with pytest.raises(UnsupportedError, match=r"RNN.*sequence_lens \[3, 2\]"):
        import_onnx(model)


def test_rnn_rejects_runtime_sequence_lens():
    names, feeds = _rnn_feeds("RNN", init=True)
    names[4] = "lens"
    feeds["lens"] = np.array([3, 3], np.int32)
    model = node_model("RNN", names, feeds, attrs={"hidden_size": 4}, n_out=2)
    with pytest.raises(UnsupportedError, match="sequence_lens must be known at compile time"):
        import_onnx(model)


def test_rnn_rejects_misshapen_bias_by_name():
    names, feeds = _rnn_feeds("RNN")
    feeds["B"] = randn(1, 5)
    with pytest.raises(Exception, match=r"RNN.*B"):
        import_onnx(node_model("RNN", names, feeds, attrs={"hidden_size": 4}, n_out=2))


# -- GridSample -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, padding, align):
    x = randn(2, 3, 5, 4)
    grid = (RNG.uniform(-1.6, 1.6, (2, 3, 7, 2))).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [3.7, -4.2]]  # corners and a far reflection
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    if mode == "cubic" and padding == "border":
        # onnxruntime clamps cubic taps differently from the specification (off by up to 0.45 here)
        feeds = {"X": x, "G": grid}
        check_against_reference(node_model("GridSample", ["X", "G"], feeds, attrs=attrs, opset=20), feeds)
        return
    check_node("GridSample", ["X", "G"], {"X": x, "G": grid}, attrs=attrs, opset=20, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d(mode):
    x = randn(1, 2, 3, 4, 5)
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
    check_node("GridSample", ["X", "G"], {"X": x, "G": grid}, attrs={"mode": mode, "padding_mode": "border"},
               opset=20, rtol=1e-4, atol=1e-5)


def test_grid_sample_opset16_mode_names():
    x = randn(1, 1, 4, 4)
    grid = RNG.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    check_node("GridSample", ["X", "G"], {"X": x, "G": grid}, attrs={"mode": "bicubic"}, opset=16, rtol=1e-4, atol=1e-5)


def test_grid_sample_rejects_unknown_mode_by_name():
    feeds = {"X": randn(1, 1, 4, 4), "G": RNG.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)}
    model = node_model("GridSample", ["X", "G"], feeds, attrs={"mode": "area"}, opset=20)
    with pytest.raises(UnsupportedError, match=r"GridSample.*mode 'area'"):
        import_onnx(model)


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


# -- AffineGrid, ReverseSequence, MaxUnpool, Col2Im, Det -----------------------------------
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 2, 3, 4, 2]])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(size, align):
    rank = len(size) - 2
    theta = randn(size[0], rank, rank + 1)
    check_node("AffineGrid", ["theta", "size"], {"theta": theta}, inits={"size": np.array(size, np.int64)},
               attrs={"align_corners": align}, opset=20, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_axis,time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_constant_lens(batch_axis, time_axis):
    x = randn(4, 5, 2) if batch_axis == 0 else randn(5, 4, 2)
    check_node("ReverseSequence", ["x", "lens"], {"x": x}, inits={"lens": np.array([5, 0, 1, 3], np.int64)},
               attrs={"batch_axis": batch_axis, "time_axis": time_axis})


def test_max_unpool_of_max_pool_indices():
    """Indices as MaxPool numbers them (flat over N, C, H, W) of each 2x2 window's maximum."""
    x = randn(2, 3, 4, 6)
    windows = x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 3, 4)
    arg = windows.argmax(-1)
    n, c, h, w = np.indices(arg.shape)
    rows, cols = h * 2 + arg // 2, w * 2 + arg % 2
    feeds = {"v": windows.max(-1), "i": (((n * 3 + c) * 4 + rows) * 6 + cols).astype(np.int64)}
    check_node("MaxUnpool", ["v", "i"], feeds, attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)


def test_max_unpool_output_shape_pads_after_the_unpooled_shape():
    feeds = {"x": randn(1, 1, 2, 2), "i": np.array([[[[5, 7], [13, 15]]]], np.int64)}
    model = node_model("MaxUnpool", ["x", "i", "shape"], feeds, inits={"shape": np.array([1, 1, 5, 5], np.int64)},
                       attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    check_against_reference(model, feeds)


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}])
def test_col2im(attrs):
    image, block = np.array([5, 6], np.int64), np.array([2, 3], np.int64)
    strides, pads, dil = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), attrs.get("dilations", [1, 1])
    counts = [(image[d] + pads[d] + pads[d + 2] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(2)]
    x = randn(2, 3 * 6, int(np.prod(counts)))
    check_node("Col2Im", ["x", "image", "block"], {"x": x}, inits={"image": image, "block": block}, attrs=attrs,
               opset=18, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (2, 4, 4), (1,)])
def test_det(shape):
    if len(shape) == 1:
        model = node_model("Det", ["x"], {"x": randn(3, 5)}, opset=11)
        with pytest.raises(Exception, match=r"Det.*\[\.\.\., n, n\]"):
            import_onnx(model)
        return
    check_node("Det", ["x"], {"x": randn(*shape)}, opset=11, rtol=1e-4, atol=1e-5)


def test_det_rejects_large_order_by_name():
    with pytest.raises(UnsupportedError, match=r"Det.*order 5"):
        import_onnx(node_model("Det", ["x"], {"x": randn(5, 5)}, opset=11))
