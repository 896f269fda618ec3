import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import aot
from aot.importers.onnx import import_onnx
from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.ir.verifier import verify_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.grouped_dot import GroupedDot
from onnx_util import make_model, ort
from passes_util import ir, run_pass


def _repeat(name: str, b: int, kvh: int, g: int, s: int, d: int) -> tuple[list, list]:
    """torch's repeat_kv: Unsqueeze(2), Expand to [B, KVH, G, S, D], Reshape to [B, KVH*G, S, D]."""
    nodes = [helper.make_node("Unsqueeze", [name, "ax2"], [f"{name}_u"]),
             helper.make_node("Expand", [f"{name}_u", f"{name}_e"], [f"{name}_x"]),
             helper.make_node("Reshape", [f"{name}_x", f"{name}_r"], [f"{name}_rep"])]
    inits = [numpy_helper.from_array(np.array([b, kvh, g, s, d]), f"{name}_e"),
             numpy_helper.from_array(np.array([b, kvh * g, s, d]), f"{name}_r")]
    return nodes, inits


def _attention_model(b: int, kvh: int, g: int, t: int, s: int, d: int):
    """Both sides as torch's SDPA export writes them: Q * sqrt(scale) against the repeated K
    reshaped to [B*H, S, D], transposed, reshaped to [B, H, D, S] and scaled; softmax; P
    against the repeated V."""
    h = kvh * g
    k_nodes, k_inits = _repeat("k", b, kvh, g, s, d)
    v_nodes, v_inits = _repeat("v", b, kvh, g, s, d)
    nodes = k_nodes + v_nodes + [
        helper.make_node("Reshape", ["k_rep", "flat"], ["kf"]),
        helper.make_node("Transpose", ["kf"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["kt", "unflat"], ["kt4"]),
        helper.make_node("Mul", ["q", "root"], ["qs"]),
        helper.make_node("Mul", ["kt4", "root"], ["ks"]),
        helper.make_node("MatMul", ["qs", "ks"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v_rep"], ["y"]),
    ]
    inits = k_inits + v_inits + [
        numpy_helper.from_array(np.array([2]), "ax2"),
        numpy_helper.from_array(np.array([b * h, s, d]), "flat"),
        numpy_helper.from_array(np.array([b, h, d, s]), "unflat"),
        numpy_helper.from_array(np.array([d ** -0.25], np.float32), "root"),
    ]
    inputs = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [b, h, t, d]),
              helper.make_tensor_value_info("k", TensorProto.FLOAT, [b, kvh, s, d]),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, [b, kvh, s, d])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [b, h, t, d]),
               helper.make_tensor_value_info("scores", TensorProto.FLOAT, [b, h, t, s])]
    return make_model(nodes, inputs, outputs, inits, opset=20)


def _feeds(rng, b, kvh, g, t, s, d):
    return {"q": rng.standard_normal((b, kvh * g, t, d)).astype(np.float32),
            "k": rng.standard_normal((b, kvh, s, d)).astype(np.float32),
            "v": rng.standard_normal((b, kvh, s, d)).astype(np.float32)}


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


SHAPES = [  # (B, KVH, G, T, S, D): GQA prefill and decode, batch > 1, MQA, G = 1 (plain MHA)
    (1, 2, 4, 8, 16, 8), (1, 2, 4, 1, 16, 8), (2, 3, 2, 5, 12, 4), (3, 1, 4, 1, 7, 6), (2, 4, 1, 3, 9, 8),
]


@pytest.mark.parametrize("shape", SHAPES)
def test_both_dots_read_each_kv_head_once_and_match_onnxruntime(shape):
    b, kvh, g, t, s, d = shape
    model = _attention_model(*shape)
    graph = import_onnx(model)
    rewrite = GroupedDot()
    changed = rewrite.run(graph)
    verify_graph(graph)
    DeadCodeElim().run(graph)
    assert changed == (g > 1)
    assert not any(n.op == "broadcast" and n.out.type.rank == 5 for n in graph.nodes)
    if g > 1:
        assert rewrite.summary.startswith("2 rewrites")
        dots = [n for n in graph.nodes if n.op == "dot"]
        assert [n.inputs[1].type.shape[1] for n in dots] == [kvh, kvh]
    feeds = _feeds(np.random.default_rng(sum(shape)), *shape)
    for mine, ref in zip(interpret(graph, feeds), _ort(model, feeds)):
        np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("seed", range(4))
def test_random_shapes_compiled_match_onnxruntime(tmp_path, seed):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.choice([2, 4])), int(rng.choice([1, 3, 6])),
             int(rng.integers(2, 20)), int(rng.choice([4, 8, 16])))
    model = _attention_model(*shape)
    path = tmp_path / "gqa.onnx"
    path.write_bytes(model.SerializeToString())
    aot.compile(str(path), str(tmp_path / "gqa.aot"))
    feeds = _feeds(rng, *shape)
    got = aot.Session(str(tmp_path / "gqa.aot")).run(None, feeds)
    for mine, ref in zip(got, _ort(model, feeds)):
        np.testing.assert_allclose(mine, ref, rtol=1e-4, atol=1e-4)


PV = """
    graph @g(%p: f32[1,4,3,5], %v: f32[1,2,5,8]) {
      %0 = reshape(%v) {shape = [1, 2, 1, 5, 8]} : f32[1,2,1,5,8]
      %1 = broadcast(%0) {dims = [0, 1, 2, 3, 4], shape = [1, 2, 2, 5, 8]} : f32[1,2,2,5,8]
      %2 = reshape(%1) {shape = [1, 4, 5, 8]} : f32[1,4,5,8]
      %y = dot(%p, %2) {lhs_batch = [0, 1], lhs_contract = [3], rhs_batch = [0, 1], rhs_contract = [2]} : f32[1,4,3,8]
      return %y as "y"
    }"""


def test_the_query_heads_of_a_group_become_rows_of_one_dot():
    changed, out = run_pass(GroupedDot(), PV)
    assert changed
    graph = parse_graph(out)
    DeadCodeElim().run(graph)
    assert str(graph) == ir("""
        graph @g(%p: f32[1,4,3,5], %v: f32[1,2,5,8]) {
          %3 = reshape(%p) {shape = [1, 2, 6, 5]} : f32[1,2,6,5]
          %4 = dot(%3, %v) {lhs_batch = [0, 1], lhs_contract = [3], rhs_batch = [0, 1], rhs_contract = [2]} : f32[1,2,6,8]
          %y = reshape(%4) {shape = [1, 4, 3, 8]} : f32[1,4,3,8]
          return %y as "y"
        }""")


def _unchanged(text: str) -> None:
    changed, out = run_pass(GroupedDot(), text)
    assert not changed and out == ir(text)


def test_heads_repeated_group_major_are_left_alone():
    # the repeat in front of the kv heads: head h reads kv head h % KVH, not h // G
    _unchanged("""
        graph @g(%p: f32[1,4,3,5], %v: f32[1,2,5,8]) {
          %0 = reshape(%v) {shape = [1, 1, 2, 5, 8]} : f32[1,1,2,5,8]
          %1 = broadcast(%0) {dims = [0, 1, 2, 3, 4], shape = [1, 2, 2, 5, 8]} : f32[1,2,2,5,8]
          %2 = reshape(%1) {shape = [1, 4, 5, 8]} : f32[1,4,5,8]
          %y = dot(%p, %2) {lhs_batch = [0, 1], lhs_contract = [3], rhs_batch = [0, 1], rhs_contract = [2]} : f32[1,4,3,8]
          return %y as "y"
        }""")


def test_a_repeat_along_another_dim_or_a_non_constant_scale_is_left_alone():
    # the repeated dim lands in the contracted dim (rows of V repeated), not the heads
    _unchanged("""
        graph @g(%p: f32[1,2,3,10], %v: f32[1,2,5,8]) {
          %0 = reshape(%v) {shape = [1, 2, 5, 1, 8]} : f32[1,2,5,1,8]
          %1 = broadcast(%0) {dims = [0, 1, 2, 3, 4], shape = [1, 2, 5, 2, 8]} : f32[1,2,5,2,8]
          %2 = reshape(%1) {shape = [1, 2, 10, 8]} : f32[1,2,10,8]
          %y = dot(%p, %2) {lhs_batch = [0, 1], lhs_contract = [3], rhs_batch = [0, 1], rhs_contract = [2]} : f32[1,2,3,8]
          return %y as "y"
        }""")
    _unchanged("""
        graph @g(%p: f32[1,4,3,5], %v: f32[1,2,5,8], %w: f32[1,4,5,8]) {
          %0 = reshape(%v) {shape = [1, 2, 1, 5, 8]} : f32[1,2,1,5,8]
          %1 = broadcast(%0) {dims = [0, 1, 2, 3, 4], shape = [1, 2, 2, 5, 8]} : f32[1,2,2,5,8]
          %2 = reshape(%1) {shape = [1, 4, 5, 8]} : f32[1,4,5,8]
          %3 = mul(%2, %w) : f32[1,4,5,8]
          %y = dot(%p, %3) {lhs_batch = [0, 1], lhs_contract = [3], rhs_batch = [0, 1], rhs_contract = [2]} : f32[1,4,3,8]
          return %y as "y"
        }""")


def test_a_scale_before_the_dot_moves_to_the_kv_heads_in_either_operand_order():
    text = """
        graph @g(%p: f32[2,6,1,5], %v: f32[2,3,5,4]) {
          %0 = reshape(%v) {shape = [2, 3, 1, 5, 4]} : f32[2,3,1,5,4]
          %1 = broadcast(%0) {dims = [0, 1, 2, 3, 4], shape = [2, 3, 2, 5, 4]} : f32[2,3,2,5,4]
          %2 = reshape(%1) {shape = [2, 6, 5, 4]} : f32[2,6,5,4]
          %c = constant() {value = dense<[0.5]>} : f32[1]
          %cb = broadcast(%c) {dims = [3], shape = [2, 6, 5, 4]} : f32[2,6,5,4]
          %3 = sub(%cb, %2) : f32[2,6,5,4]
          %4 = div(%3, %cb) : f32[2,6,5,4]
          %y = dot(%p, %4) {lhs_batch = [0, 1], lhs_contract = [3], rhs_batch = [0, 1], rhs_contract = [2]} : f32[2,6,1,4]
          return %y as "y"
        }"""
    changed, out = run_pass(GroupedDot(), text)
    assert changed
    graph = parse_graph(out)
    DeadCodeElim().run(graph)
    assert not any(n.op == "broadcast" and n.out.type.rank == 5 for n in graph.nodes)
    rng = np.random.default_rng(1)
    feeds = {"p": rng.standard_normal((2, 6, 1, 5)).astype(np.float32), "v": rng.standard_normal((2, 3, 5, 4)).astype(np.float32)}
    want = interpret(parse_graph(ir(text)), feeds)
    np.testing.assert_allclose(interpret(graph, feeds)[0], want[0], rtol=1e-6, atol=1e-6)
