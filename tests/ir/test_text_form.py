"""IR text form: print -> parse -> print is the identity; errors carry line and column."""
import numpy as np
import pytest

from aot.errors import IRError
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.parser import parse_graph
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph

SAMPLE = '''graph @sample(%x: f32[2,3] as "input:0", %flag: i1[2,3]) {
  %c = constant() {value = dense<[1.5, -2.0, inf]>} : f32[3]
  %b = broadcast(%c) {dims = [1], shape = [2, 3]} : f32[2,3] loc("Add_1")
  %1 = add(%x, %b) : f32[2,3] loc("Add_1")
  %n = constant() {value = dense<nan>} : f32[]
  %nb = broadcast(%n) {dims = [], shape = [2, 3]} : f32[2,3]
  %2 = select(%flag, %1, %nb) : f32[2,3]
  %3 = reduce(%2) {axes = [1], kind = "max"} : f32[2]
  %4 = convert(%3) {dtype = i64} : i64[2]
  %5 = transpose(%2) {perm = [1, 0]} : f32[3,2]
  %6 = pad(%5) {high = [0, 1], low = [1, 0], value = 0.5} : f32[4,3]
  return %4 as "out", %6 as "padded"
}
'''


def test_round_trip_is_identity():
    assert print_graph(parse_graph(SAMPLE)) == SAMPLE


def test_round_trip_with_blobs():
    g = Graph("big")
    x = g.add_input("x", TensorType(DType.F32, (4, 100)))
    b = Builder(g)
    w = b.constant(np.random.default_rng(0).standard_normal((100, 5)).astype(np.float32), name="w")
    y = b.op("dot", [x, w], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    g.add_output(y, "y")
    blobs: dict[str, np.ndarray] = {}
    text = print_graph(g, blobs)
    assert 'blob<"w">' in text and "w" in blobs
    again = parse_graph(text, blobs)
    assert print_graph(again) == text
    np.testing.assert_array_equal(again.constant_value(again.nodes[0].out), blobs["w"])


def test_input_names_survive_sanitizing():
    g = parse_graph(SAMPLE)
    assert g.input_names == ["input:0", "flag"]
    assert [v.name for v in g.inputs] == ["x", "flag"]


def test_add_input_keeps_the_exact_name_and_gives_its_value_a_fresh_identifier():
    g = Graph("names")
    first = g.add_input("gpu_0/data_0", TensorType(DType.F32, (2,)))
    second = g.add_input("gpu_0:data_0", TensorType(DType.F32, (2,)))  # sanitizes to the same identifier
    assert g.input_names == ["gpu_0/data_0", "gpu_0:data_0"]
    assert first.name == "gpu_0_data_0" and second.name not in ("gpu_0_data_0", "")
    g.add_output(Builder(g).op("add", [first, second]), "out/sum")
    verify_graph(g)
    assert parse_graph(print_graph(g)).input_names == g.input_names


def test_verifier_refuses_two_inputs_with_one_name():
    g = Graph("twice")
    x = g.add_input("x", TensorType(DType.F32, (2,)))
    g.add_input("x", TensorType(DType.F32, (2,)))
    g.add_output(x, "y")
    with pytest.raises(IRError, match="input names are not unique"):
        verify_graph(g)


def test_float_constants_round_trip_exactly():
    values = np.array([0.1, 1 / 3, 1e-30, -0.0, 3.4e38, np.finfo(np.float32).tiny], np.float32)
    g = Graph("c")
    Builder(g).constant(values, name="c")
    g.add_output(g.nodes[0].out, "c")
    again = parse_graph(print_graph(g))
    np.testing.assert_array_equal(again.constant_value(again.nodes[0].out).view(np.uint32), values.view(np.uint32))


@pytest.mark.parametrize(
    "text, where, what",
    [
        ("graph @g(%x: f32[2]) {\n  %1 = add(%x, %y) : f32[2]\n  return %1\n}", "line 2, column 16", "undefined value %y"),
        ("graph @g(%x: f32[2]) {\n  %1 = add(%x, %x) : q32[2]\n  return %1\n}", "line 2, column 22", "unknown dtype"),
        ("graph @g(%x: f32[2]) {\n  %1 = add(%x, %x) : f32[2]\n", "line 3", "expected 'return'"),
        ("graph @g(%x: f32[2]) {\n  %1 = add(%x %x) : f32[2]\n  return %1\n}", "line 2, column 15", "expected ','"),
        ("graph @g(%x: f32[2]) {\n  %1 = add(%x, %x) : f32[2] $\n}", "line 2, column 29", "unexpected character"),
    ],
)
def test_parse_errors_name_line_and_column(text, where, what):
    with pytest.raises(IRError) as info:
        parse_graph(text)
    assert where in str(info.value) and what in str(info.value)


def test_verifier_rejects_wrong_type():
    text = "graph @g(%x: f32[2]) {\n  %1 = add(%x, %x) : f32[3]\n  return %1\n}"
    with pytest.raises(IRError, match="shape rule gives f32\\[2\\]"):
        parse_graph(text)


def test_verifier_rejects_operand_mismatch():
    with pytest.raises(IRError, match="same type"):
        parse_graph("graph @g(%x: f32[2], %y: f32[3]) {\n  %1 = add(%x, %y) : f32[2]\n  return %1\n}")


def test_verifier_rejects_use_before_definition():
    g = parse_graph("graph @g(%x: f32[2]) {\n  %1 = exp(%x) : f32[2]\n  %2 = neg(%1) : f32[2]\n  return %2\n}")
    g.nodes.reverse()
    with pytest.raises(IRError, match="not defined before use"):
        verify_graph(g)


def test_interpreter_runs_sample():
    g = parse_graph(SAMPLE)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    flag = np.array([[True, False, True], [True, True, True]])
    out, padded = interpret(g, {"x": x, "flag": flag})
    summed = np.where(flag, x + np.array([1.5, -2.0, np.inf], np.float32), np.nan)
    # row 0 holds a NaN (masked by select): converts to 0; row 1 holds inf: saturates
    np.testing.assert_array_equal(out, [0, np.iinfo(np.int64).max])
    assert out.dtype == np.int64 and padded.shape == (4, 3)
    np.testing.assert_array_equal(padded[1:, :2], summed.T)
    assert np.all(padded[0] == 0.5) and np.all(padded[:, 2] == 0.5)
