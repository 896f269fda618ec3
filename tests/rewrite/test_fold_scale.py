import numpy as np

from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.fold_scale import FoldScale
from passes_util import ir

# conv -> bias -> BatchNorm as the importer lowers it: (conv + b) * s + t
CONV_BN = """
    graph @g(%x: f32[1,2,5,5]) {
      %w = constant() {value = dense<[[[[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0], [2.0, 1.0]]], [[[-1.0, 0.0], [1.0, 2.0]], [[3.0, 1.0], [-2.0, 0.5]]], [[[0.25, 0.5], [0.75, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]]>} : f32[3,2,2,2]
      %b = constant() {value = dense<[0.1, 0.2, 0.3]>} : f32[3]
      %s = constant() {value = dense<[2.0, 0.5, -1.0]>} : f32[3]
      %t = constant() {value = dense<[1.0, -1.0, 0.0]>} : f32[3]
      %c = conv(%x, %w) {dilation = [1, 1], groups = 1, padding = [[0, 0], [0, 0]], strides = [1, 1]} : f32[1,3,4,4]
      %bb = broadcast(%b) {dims = [1], shape = [1, 3, 4, 4]} : f32[1,3,4,4]
      %cb = add(%c, %bb) : f32[1,3,4,4]
      %sb = broadcast(%s) {dims = [1], shape = [1, 3, 4, 4]} : f32[1,3,4,4]
      %y = mul(%cb, %sb) : f32[1,3,4,4]
      %tb = broadcast(%t) {dims = [1], shape = [1, 3, 4, 4]} : f32[1,3,4,4]
      %z = add(%y, %tb) : f32[1,3,4,4]
      %r = max(%z, %z) : f32[1,3,4,4]
      return %r as "r"
    }"""


def fold_to_fixed_point(text: str) -> tuple[str, list[str]]:
    graph = parse_graph(ir(text))
    summaries = []
    p = FoldScale()
    while p.run(graph):
        summaries.append(p.summary)
        DeadCodeElim().run(graph)
    return graph, summaries


def test_batchnorm_folds_into_conv_weights_and_one_bias():
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    (want,) = interpret(parse_graph(ir(CONV_BN)), {"x": x})
    graph, summaries = fold_to_fixed_point(CONV_BN)
    ops = [n.op for n in graph.nodes if n.op != "constant"]
    assert ops == ["conv", "broadcast", "add", "max"]  # no mul left; one bias add
    assert summaries == ["1 rewrite (scale moved before bias: 1)", "2 rewrites (biases merged: 1, mul into weights: 1)"]
    (got,) = interpret(graph, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_scale_folds_into_dot_weights_along_the_output_dim():
    text = """
        graph @g(%x: f32[2,3]) {
          %w = constant() {value = dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]>} : f32[3,2]
          %s = constant() {value = dense<[10.0, -1.0]>} : f32[2]
          %d = dot(%x, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[2,2]
          %sb = broadcast(%s) {dims = [1], shape = [2, 2]} : f32[2,2]
          %y = mul(%d, %sb) : f32[2,2]
          return %y as "y"
        }"""
    graph, _ = fold_to_fixed_point(text)
    (dot,) = [n for n in graph.nodes if n.op == "dot"]
    np.testing.assert_array_equal(graph.constant_value(dot.inputs[1]), [[10.0, -2.0], [30.0, -4.0], [50.0, -6.0]])
    assert graph.outputs[0] is dot.out


def test_does_not_fold_when_conv_result_has_another_reader():
    text = """
        graph @g(%x: f32[1,1,3,3]) {
          %w = constant() {value = dense<[[[[1.0, 2.0], [3.0, 4.0]]], [[[1.0, 0.0], [0.0, 1.0]]]]>} : f32[2,1,2,2]
          %s = constant() {value = dense<[2.0, 3.0]>} : f32[2]
          %c = conv(%x, %w) {dilation = [1, 1], groups = 1, padding = [[0, 0], [0, 0]], strides = [1, 1]} : f32[1,2,2,2]
          %sb = broadcast(%s) {dims = [1], shape = [1, 2, 2, 2]} : f32[1,2,2,2]
          %y = mul(%c, %sb) : f32[1,2,2,2]
          return %y as "y", %c as "c"
        }"""
    graph = parse_graph(ir(text))
    assert not FoldScale().run(graph)


def test_does_not_fold_when_scale_varies_along_a_spatial_dim():
    text = """
        graph @g(%x: f32[1,1,3,3]) {
          %w = constant() {value = dense<[[[[1.0, 2.0], [3.0, 4.0]]], [[[1.0, 0.0], [0.0, 1.0]]]]>} : f32[2,1,2,2]
          %s = constant() {value = dense<[2.0, 3.0]>} : f32[2]
          %c = conv(%x, %w) {dilation = [1, 1], groups = 1, padding = [[0, 0], [0, 0]], strides = [1, 1]} : f32[1,2,2,2]
          %sb = broadcast(%s) {dims = [3], shape = [1, 2, 2, 2]} : f32[1,2,2,2]
          %y = mul(%c, %sb) : f32[1,2,2,2]
          return %y as "y"
        }"""
    graph = parse_graph(ir(text))
    assert not FoldScale().run(graph)
