"""ONNX importer, RNN / GRU / LSTM (importers/onnx/ops_rnn.py): lowered to IR, interpreted, compared with
onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import UnsupportedError
from aot.importers.onnx import import_onnx
from aot.interpreter import interpret
from onnx_util import check_node, compare, node_model

RNG = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


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
