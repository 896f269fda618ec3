from aot.ir.parser import parse_graph
from aot.passes.fusion import explain, fuse
from passes_util import ir


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
    assert kernels_of(text) == [
        ("m", ["m"], ["x"]),
        ("e", ["mb", "s", "e"], ["m", "x"]),
        ("sum", ["sum"], ["e"]),
        ("y", ["sb", "y"], ["sum", "e"]),
    ]


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
