import re

import numpy as np
import pytest

from aot.ir.parser import parse_graph
from aot.planning.fusion import explain, fuse
from passes_util import LAYER_NORM, ir


def kernels_of(text: str) -> list[tuple[str, list[str], list[str]]]:
    """(root, fused non-constant node names, param names) per kernel."""
    graph = parse_graph(ir(text))
    return [
        (k.root.name, [n.out.name for n in k.nodes if n.op != "constant"], [p.name for p in k.params])
        for k in fuse(graph)
    ]


DENSE_RELU = """
    graph @g(%x: f32[2,8]) {
      %w = constant() {value = dense<1.5>} : f32[8,4]
      %b = constant() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : f32[4]
      %z = constant() {value = dense<0.0>} : f32[]
      %d = dot(%x, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[2,4]
      %bb = broadcast(%b) {dims = [1], shape = [2, 4]} : f32[2,4]
      %a = add(%d, %bb) : f32[2,4]
      %zb = broadcast(%z) {dims = [], shape = [2, 4]} : f32[2,4]
      %r = max(%a, %zb) : f32[2,4]
      return %r as "y"
    }"""


def test_epilogue_fuses_bias_and_relu_into_dot():
    assert kernels_of(DENSE_RELU) == [("r", ["d", "bb", "a", "zb", "r"], ["x", "w", "b"])]


def test_explain_gives_a_reason_for_every_fused_node():
    (kernel,) = fuse(parse_graph(ir(DENSE_RELU)))
    assert set(kernel.fused_reasons) == {"d", "bb", "a", "zb"}
    lines = explain([kernel]).splitlines()
    assert lines[0] == "k0_max: dot+broadcast+add+broadcast+max: root because graph output"
    assert "    %d (dot): fused, each element read once by add" in lines
    assert len(lines) == 5


def test_scalar_constants_are_inlined_not_params():
    graph = parse_graph(ir(DENSE_RELU))
    (kernel,) = fuse(graph)
    assert "z" in [n.out.name for n in kernel.nodes]
    assert "z" not in [p.name for p in kernel.params]


def test_softmax_chain():
    text = """
        graph @g(%x: f32[2,4]) {
          %m = reduce(%x) {axes = [1], kind = "max"} : f32[2]
          %mb = broadcast(%m) {dims = [0], shape = [2, 4]} : f32[2,4]
          %s = sub(%x, %mb) : f32[2,4]
          %e = exp(%s) : f32[2,4]
          %sum = reduce(%e) {axes = [1], kind = "sum"} : f32[2]
          %sb = broadcast(%sum) {dims = [0], shape = [2, 4]} : f32[2,4]
          %y = div(%e, %sb) : f32[2,4]
          return %y as "y"
        }"""
    # max and sum reduce the innermost dim and are re-expanded by broadcasts: row-invariant, one kernel
    assert kernels_of(text) == [("y", ["m", "mb", "s", "e", "sum", "sb", "y"], ["x"])]


def test_elementwise_feeding_reduce_fuses():
    text = """
        graph @g(%x: f32[2,4]) {
          %e = exp(%x) : f32[2,4]
          %s = reduce(%e) {axes = [1], kind = "sum"} : f32[2]
          return %s as "y"
        }"""
    assert kernels_of(text) == [("s", ["e", "s"], ["x"])]


def test_does_not_fuse_when_producer_has_two_consumer_kernels():
    text = """
        graph @g(%x: f32[4]) {
          %e = exp(%x) : f32[4]
          %a = neg(%e) : f32[4]
          %b = abs(%e) : f32[4]
          return %a as "a", %b as "b"
        }"""
    kernels = kernels_of(text)
    assert kernels == [("e", ["e"], ["x"]), ("a", ["a"], ["e"]), ("b", ["b"], ["e"])]
    assert "read by 2 kernels" in explain(fuse(parse_graph(ir(text))))


def test_does_not_fuse_arithmetic_into_rereading_dot():
    text = """
        graph @g(%x: f32[2,8], %w: f32[8,4]) {
          %e = exp(%x) : f32[2,8]
          %t = transpose(%e) {perm = [1, 0]} : f32[8,2]
          %d = dot(%t, %w) {lhs_batch = [], lhs_contract = [0], rhs_batch = [], rhs_contract = [0]} : f32[2,4]
          return %d as "y"
        }"""
    # the free transpose fuses into the dot; the exp behind it would be recomputed 4 times per element
    assert kernels_of(text) == [("e", ["e"], ["x"]), ("d", ["t", "d"], ["e", "w"])]


def test_free_broadcast_is_duplicated_into_each_consumer():
    text = """
        graph @g(%x: f32[4], %v: f32[]) {
          %vb = broadcast(%v) {dims = [], shape = [4]} : f32[4]
          %a = add(%x, %vb) : f32[4]
          %m = mul(%x, %vb) : f32[4]
          return %a as "a", %m as "m"
        }"""
    assert kernels_of(text) == [("a", ["vb", "a"], ["v", "x"]), ("m", ["vb", "m"], ["v", "x"])]


def test_does_not_fuse_graph_outputs():
    text = """
        graph @g(%x: f32[4]) {
          %e = exp(%x) : f32[4]
          %n = neg(%e) : f32[4]
          return %e as "e", %n as "n"
        }"""
    assert kernels_of(text) == [("e", ["e"], ["x"]), ("n", ["n"], ["e"])]


def test_layer_norm_is_one_kernel_and_dot_stays_a_root():
    # h is read inside the mean loop, the variance loop and the output loop: the dot would be
    # computed three times, and its fast body takes no reduce, so it stays a kernel of its own
    kernels = kernels_of(LAYER_NORM)
    assert kernels == [
        ("h", ["h"], ["x", "w"]),
        ("y", ["nb", "s", "mean", "mb", "c", "sq", "v", "r", "rb", "y"], ["h"]),
    ]
    assert "the dot epilogue ends before reduce %s" in explain(fuse(parse_graph(ir(LAYER_NORM))))


def test_does_not_fuse_reduce_when_broadcast_expands_an_outer_dim():
    text = """
        graph @g(%x: f32[2,4]) {
          %m = reduce(%x) {axes = [0], kind = "max"} : f32[4]
          %mb = broadcast(%m) {dims = [1], shape = [2, 4]} : f32[2,4]
          %y = sub(%x, %mb) : f32[2,4]
          return %y as "y"
        }"""
    # m varies along the inner loop: fusing would recompute the column max for every element
    assert kernels_of(text) == [("m", ["m"], ["x"]), ("y", ["mb", "y"], ["m", "x"])]


def test_does_not_fuse_reduce_when_broadcast_skips_a_middle_dim():
    text = """
        graph @g(%x: f32[2,3,4]) {
          %m = reduce(%x) {axes = [1, 2], kind = "sum"} : f32[2]
          %mb = broadcast(%m) {dims = [0], shape = [2, 3, 4]} : f32[2,3,4]
          %y = sub(%x, %mb) : f32[2,3,4]
          return %y as "y"
        }"""
    # rows are (i0, i1): the sum would be recomputed for each of the 3 rows sharing i0
    assert kernels_of(text) == [("m", ["m"], ["x"]), ("y", ["mb", "y"], ["m", "x"])]


def test_does_not_fuse_row_reduce_read_by_a_dot():
    text = """
        graph @g(%x: f32[2,4], %w: f32[4,4]) {
          %m = reduce(%x) {axes = [1], kind = "max"} : f32[2]
          %mb = broadcast(%m) {dims = [0], shape = [2, 4]} : f32[2,4]
          %s = sub(%x, %mb) : f32[2,4]
          %d = dot(%s, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[2,4]
          return %d as "y"
        }"""
    assert kernels_of(text) == [("s", ["m", "mb", "s"], ["x"]), ("d", ["d"], ["s", "w"])]


# -- reduction fusion, compiled: one kernel, each reduction once per row -------------------------
def _onnx_model(kind: str, shape: tuple[int, ...]):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = []
    if kind == "softmax":
        nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    else:
        width = shape[-1]
        inits = [
            helper.make_tensor("g", TensorProto.FLOAT, [width], np.linspace(0.5, 1.5, width).tolist()),
            helper.make_tensor("b", TensorProto.FLOAT, [width], np.linspace(-1, 1, width).tolist()),
        ]
        nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, kind, [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _successors(llvm_ir: str, function: str) -> dict[str, list[str]]:
    """Block -> successor blocks of one function in textual LLVM IR."""
    body = llvm_ir[llvm_ir.index(f'@"{function}"') if f'@"{function}"' in llvm_ir else llvm_ir.index(f"@{function}"):]
    body = body[:body.index("\n}")]
    graph: dict[str, list[str]] = {}
    block = "entry"
    for line in body.splitlines():
        label = re.match(r'^"?([^\s":]+)"?:', line)
        if label:
            block = label.group(1)
            graph.setdefault(block, [])
        for target in re.findall(r'label %"?([^\s",]+)"?', line):
            graph.setdefault(block, []).append(target)
    return graph


def _reachable(graph: dict[str, list[str]], start: str, avoid: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        block = todo.pop()
        if block in seen or block == avoid:
            continue
        seen.add(block)
        todo.extend(graph.get(block, []))
    return seen


@pytest.mark.parametrize("kind", ["softmax", "layernorm"])
def test_fused_reductions_run_once_per_row_and_match_interpreter(kind, tmp_path):
    import aot
    from aot.codegen.cpu import CpuTarget, build_module
    from aot.driver import import_model
    from aot.interpreter import interpret

    model = _onnx_model(kind, (3, 5, 13))
    result = aot.compile(model, tmp_path / f"{kind}.aot")
    (kernel,) = result.plan.kernels
    assert kernel.ops.count("reduce") == 2
    module, _ = build_module(result.plan, CpuTarget.host())
    cfg = _successors(str(module), "aot_kernel_0")
    root = kernel.root.name
    inner_loop = _reachable(cfg, f"{root}.j.header", avoid="item.header")
    reduce_headers = [b for b in cfg if b.endswith(".k0.header")]
    assert len(reduce_headers) == 2
    # each reduction loop is emitted once, in the row preamble, never inside the inner loop
    assert not inner_loop & set(reduce_headers)
    assert all(f"{root}.j.header" in _reachable(cfg, h, avoid="item.header") for h in reduce_headers)

    x = np.random.default_rng(1).standard_normal((3, 5, 13)).astype(np.float32) * 4
    (got,) = aot.Session(tmp_path / f"{kind}.aot").run(None, {"x": x})
    graph, _, _ = import_model(model)
    (want,) = interpret(graph, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_does_not_fuse_dot_into_reduce_when_data_movement_is_between():
    # a global-average-pool-like reduce behind a reshape: the dot keeps its own (fast) kernel body
    text = """
        graph @g(%x: f32[2,8], %w: f32[8,4]) {
          %d = dot(%x, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[2,4]
          %r = reshape(%d) {shape = [2, 2, 2]} : f32[2,2,2]
          %s = reduce(%r) {axes = [2], kind = "sum"} : f32[2,2]
          return %s as "y"
        }"""
    kernels = kernels_of(text)
    assert kernels == [("d", ["d"], ["x", "w"]), ("s", ["r", "s"], ["d"])]
    assert "the dot epilogue ends before reshape %r" in explain(fuse(parse_graph(ir(text))))


def test_dot_epilogue_ends_before_the_transpose_that_splits_attention_heads():
    # x @ W + b, then the head split (reshape, transpose) and a scale: the dot keeps its bias
    # and its fast body; the transpose runs in the next kernel (it made BERT's projections 20x slower)
    text = """
        graph @g(%x: f32[8,16], %w: f32[16,16], %b: f32[16]) {
          %d = dot(%x, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[8,16]
          %bb = broadcast(%b) {dims = [1], shape = [8, 16]} : f32[8,16]
          %a = add(%d, %bb) : f32[8,16]
          %h = reshape(%a) {shape = [8, 2, 8]} : f32[8,2,8]
          %t = transpose(%h) {perm = [1, 0, 2]} : f32[2,8,8]
          %c = constant() {value = dense<0.5>} : f32[2,8,8]
          %s = mul(%t, %c) : f32[2,8,8]
          return %s as "y"
        }"""
    assert kernels_of(text) == [("a", ["d", "bb", "a"], ["x", "w", "b"]), ("s", ["h", "t", "s"], ["a", "c"])]
    assert "the dot epilogue ends before reshape %h" in explain(fuse(parse_graph(ir(text))))


def test_packed_dot_epilogue_ends_before_a_transpose():
    # after the layout pass: packed_dot (12 columns in a block of 16) -> relu, then a transpose
    text = """
        graph @g(%x: f32[4,8]) {
          %w = constant() {value = dense<1.0>} : f32[1,8,16]
          %d = packed_dot(%x, %w) {columns = 12, lanes = 16, lhs_contract = [1], reversed = false} : f32[4,12]
          %z = constant() {value = dense<0.0>} : f32[4,12]
          %a = max(%d, %z) : f32[4,12]
          %t = transpose(%a) {perm = [1, 0]} : f32[12,4]
          return %t as "y"
        }"""
    assert kernels_of(text) == [("a", ["d", "a"], ["x", "w", "z"]), ("t", ["t"], ["a"])]


def test_does_not_fuse_a_second_conv_into_a_kernel_that_has_one():
    # unpacked convs (no layout pass): the second one would run on the slow elemental path, so it
    # keeps a kernel of its own (packed convs that meet in a sum share one: test_contraction_sum.py)
    text = """
        graph @g(%x: f32[1,2,4,4], %w: f32[2,2,3,3], %d: f32[2,2,1,1]) {
          %a = conv(%x, %w) {dilation = [1, 1], groups = 1, padding = [[1, 1], [1, 1]], strides = [1, 1]} : f32[1,2,4,4]
          %b = conv(%x, %d) {dilation = [1, 1], groups = 1, padding = [[0, 0], [0, 0]], strides = [1, 1]} : f32[1,2,4,4]
          %s = add(%a, %b) : f32[1,2,4,4]
          return %s as "y"
        }"""
    assert kernels_of(text) == [("a", ["a"], ["x", "w"]), ("s", ["b", "s"], ["x", "d", "a"])]
    assert "already has a dot/conv" in explain(fuse(parse_graph(ir(text))))


def test_transpose_feeding_a_conv_input_is_materialized():
    # ConvNeXt: a permute back to NCHW before the 7x7 depthwise conv; fused, it kept the conv
    # off the depthwise body (which reads its input from a buffer): 12x slower
    text = """
        graph @g(%x: f32[1,6,6,8]) {
          %t = transpose(%x) {perm = [0, 3, 1, 2]} : f32[1,8,6,6]
          %w = constant() {value = dense<0.5>} : f32[8,1,3,3]
          %c = conv(%t, %w) {dilation = [1, 1], groups = 8, padding = [[1, 1], [1, 1]], strides = [1, 1]} : f32[1,8,6,6]
          return %c as "y"
        }"""
    assert kernels_of(text) == [("t", ["t"], ["x"]), ("c", ["c"], ["t", "w"])]
    assert "conv's input (after transpose) is materialized" in explain(fuse(parse_graph(ir(text))))


def test_epilogue_with_gelu_ends_before_a_transpose():
    # Whisper's conv stem: conv + bias + GELU (which reads its input twice), then a transpose;
    # the epilogue keeps the whole GELU and ends before the transpose (fused, the conv fell
    # onto the elemental path: 1.3 s of a 1.36 s run)
    text = """
        graph @g(%x: f32[4,8], %w: f32[8,16], %b: f32[16]) {
          %d = dot(%x, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[4,16]
          %bb = broadcast(%b) {dims = [1], shape = [4, 16]} : f32[4,16]
          %a = add(%d, %bb) : f32[4,16]
          %e = erf(%a) : f32[4,16]
          %y = mul(%a, %e) : f32[4,16]
          %t = transpose(%y) {perm = [1, 0]} : f32[16,4]
          return %t as "t"
        }"""
    assert kernels_of(text) == [("y", ["d", "bb", "a", "e", "y"], ["x", "w", "b"]), ("t", ["t"], ["y"])]


def test_packed_dot_lhs_reached_through_a_transpose_is_materialized():
    # an im2col (transpose, then a reshape) read by the gemm body: the transpose is materialized
    # (a row-contiguous copy), so the body loads its lhs through a free reshape of a buffer
    # instead of dividing out six dims per element
    text = """
        graph @g(%x: f32[2,3,4]) {
          %t = transpose(%x) {perm = [0, 2, 1]} : f32[2,4,3]
          %r = reshape(%t) {shape = [8, 3]} : f32[8,3]
          %w = constant() {value = dense<0.5>} : f32[1,3,16]
          %d = packed_dot(%r, %w) {columns = 16, lanes = 16, lhs_contract = [1], reversed = false} : f32[8,16]
          return %d as "y"
        }"""
    assert kernels_of(text) == [("t", ["t"], ["x"]), ("d", ["r", "d"], ["t", "w"])]
    assert "packed_dot's lhs (after transpose) is materialized" in explain(fuse(parse_graph(ir(text))))
