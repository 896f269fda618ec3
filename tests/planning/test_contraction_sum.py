"""accumulation_join: when two packed convs may share one accumulator."""
import pytest

from aot.ir.parser import parse_graph
from aot.planning.contraction_sum import accumulation_join, additive_tail
from aot.planning.fusion import explain, fuse
from aot.rewrite.layout import Layout
from passes_util import ir

CONV3 = '{dilation = [1, 1], groups = 1, padding = [[1, 1], [1, 1]], strides = [1, 1]}'
DOWN = '{dilation = [1, 1], groups = 1, padding = [[0, 0], [0, 0]], strides = [2, 2]}'


def block(join: str, down_o: int = 8) -> str:
    """conv3x3(h) + bias and a 1x1 stride-2 conv of x + bias, joined by `join` (IR lines using %m and %d)."""
    return f"""
        graph @g(%x: f32[1,4,8,8], %h: f32[1,8,4,4]) {{
          %w = constant() {{value = dense<0.5>}} : f32[8,8,3,3]
          %wd = constant() {{value = dense<0.25>}} : f32[{down_o},4,1,1]
          %b = constant() {{value = dense<1.0>}} : f32[1,8,4,4]
          %c = conv(%h, %w) {CONV3} : f32[1,8,4,4]
          %m = add(%c, %b) : f32[1,8,4,4]
          %e = conv(%x, %wd) {DOWN} : f32[1,{down_o},4,4]
          %d = add(%e, %b) : f32[1,8,4,4]
          {join}
        }}"""


def packed(text: str, lanes: int = 8):
    graph = parse_graph(ir(text))
    assert Layout(lanes).run(graph)
    convs = [n for n in graph.nodes if n.op == "packed_conv"]
    users = graph.users()
    return graph, convs, lambda v: users.get(id(v), [])


SUM_RELU = """%s = add(%m, %d) : f32[1,8,4,4]
          %z = constant() {value = dense<0.0>} : f32[1,8,4,4]
          %y = max(%s, %z) : f32[1,8,4,4]
          return %y as "y\""""


def test_residual_sum_joins_at_the_add():
    graph, (main, down), users_of = packed(block(SUM_RELU))
    join = accumulation_join(main, down, users_of)
    assert join is not None and join.out.name == "s"
    assert accumulation_join(down, main, users_of) is join
    # the tail: bias add, join add
    assert [n.out.name for n in additive_tail(main, users_of)] == ["m", "s"]


def test_fusion_puts_both_convs_in_one_kernel():
    graph, _, _ = packed(block(SUM_RELU))
    (kernel,) = fuse(graph)
    assert sum(1 for n in kernel.nodes if n.op == "packed_conv") == 2
    assert "(packed_conv): fused, conv accumulates into its consumer's conv" in explain([kernel])


def test_no_join_when_an_activation_comes_before_the_sum():
    join = """%z = constant() {value = dense<0.0>} : f32[1,8,4,4]
          %r = max(%d, %z) : f32[1,8,4,4]
          %s = add(%m, %r) : f32[1,8,4,4]
          return %s as "y\""""
    graph, (main, down), users_of = packed(block(join))
    assert accumulation_join(main, down, users_of) is None
    assert len(fuse(graph)) == 2


def test_no_join_when_the_sum_is_a_product():
    graph, (main, down), users_of = packed(block('%s = mul(%m, %d) : f32[1,8,4,4]\n          return %s as "y"'))
    assert accumulation_join(main, down, users_of) is None


def test_no_join_when_a_conv_result_has_a_second_use():
    join = """%s = add(%m, %d) : f32[1,8,4,4]
          return %s as "y", %d as "down\""""
    graph, (main, down), users_of = packed(block(join))
    outputs = graph.output_ids()
    assert accumulation_join(main, down, users_of, lambda v: id(v) in outputs) is None
    assert len(fuse(graph)) == 2


def test_joins_with_channels_padded_to_the_lanes():
    # 12 output channels in 8 lanes: both packed weights hold 4 channels of padding
    text = """
        graph @g(%x: f32[1,4,8,8], %h: f32[1,8,4,4]) {
          %w = constant() {value = dense<0.5>} : f32[12,8,3,3]
          %wd = constant() {value = dense<0.25>} : f32[12,4,3,3]
          %c = conv(%h, %w) {dilation = [1, 1], groups = 1, padding = [[1, 1], [1, 1]], strides = [1, 1]} : f32[1,12,4,4]
          %e = conv(%x, %wd) {dilation = [1, 1], groups = 1, padding = [[1, 1], [1, 1]], strides = [2, 2]} : f32[1,12,4,4]
          %s = add(%c, %e) : f32[1,12,4,4]
          return %s as "y"
        }"""
    graph, (main, down), users_of = packed(text)
    assert [n.out.name for n in additive_tail(main, users_of)] == ["s"]
    assert accumulation_join(main, down, users_of).out.name == "s"


def test_no_join_of_convs_packed_in_different_lanes():
    graph, (main, down), users_of = packed(block(SUM_RELU))
    down.attrs = {**down.attrs, "reversed": False}  # the same result type, another lane order
    assert accumulation_join(main, down, users_of) is None


def test_no_join_of_unpacked_convs():
    graph = parse_graph(ir(block(SUM_RELU)))
    main, down = [n for n in graph.nodes if n.op == "conv"]
    users = graph.users()
    assert accumulation_join(main, down, lambda v: users.get(id(v), [])) is None


@pytest.mark.parametrize("op", ["sub", "max"])
def test_no_join_through_other_elementwise_ops(op):
    graph, (main, down), users_of = packed(block(f'%s = {op}(%m, %d) : f32[1,8,4,4]\n          return %s as "y"'))
    assert accumulation_join(main, down, users_of) is None
