"""Layout pass: IR in, IR out; packed graphs compute what the originals did (interpreter)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.layout import Layout, pack_conv_weight, pack_dot_weight


def dot_graph(m: int, k: int, n: int, contract: int = 0, dtype: DType = DType.F32) -> Graph:
    rng = np.random.default_rng(3)
    g = Graph()
    x = g.add_input("x", TensorType(dtype, (m, k)))
    b = Builder(g)
    w = b.constant(rng.standard_normal((k, n) if contract == 0 else (n, k)).astype(dtype.to_numpy()), name="w")
    y = b.op("dot", [x, w], name="y", lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(contract,))
    g.add_output(y, "y")
    return g


def conv_graph(x_shape: tuple[int, ...], out_channels: int, kernel: tuple[int, int], groups: int = 1,
               strides: tuple[int, int] = (1, 1), padding=((0, 0), (0, 0)), dilation: tuple[int, int] = (1, 1)) -> Graph:
    rng = np.random.default_rng(4)
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, x_shape))
    b = Builder(g)
    w = b.constant(rng.standard_normal((out_channels, x_shape[1] // groups) + kernel).astype(np.float32), name="w")
    y = b.op("conv", [x, w], name="y", strides=strides, padding=padding, dilation=dilation, groups=groups)
    g.add_output(y, "y")
    return g


def packed(graph: Graph, lanes: int = 16, pad_stems: bool = True) -> tuple[bool, Graph]:
    changed = Layout(lanes, pad_stems).run(graph)
    DeadCodeElim().run(graph)
    verify_graph(graph)
    return changed, graph


def test_packs_dot_weight_into_a_packed_dot_of_the_same_type():
    changed, g = packed(dot_graph(3, 5, 20))
    assert changed
    text = print_graph(g)
    assert ("%y.packed = packed_dot(%x, %y.packed_w) {columns = 20, lanes = 16, lhs_contract = [1], "
            "reversed = false} : f32[3,20]") in text
    assert [n.op for n in g.nodes] == ["constant", "packed_dot"]
    assert g.constant_value(g.nodes[0].out).shape == (2, 5, 16)


def test_columns_that_fill_the_blocks_pack_without_padding():
    _, g = packed(dot_graph(2, 3, 16, contract=1), lanes=8)
    assert [n.op for n in g.nodes] == ["constant", "packed_dot"]
    assert g.nodes[0].out.type.shape == (2, 3, 8)


def test_converges_packed_weights_are_not_packed_again():
    _, g = packed(dot_graph(3, 5, 20))
    before = print_graph(g)
    assert not Layout().run(g)
    assert print_graph(g) == before


@pytest.mark.parametrize("m,k,n,contract", [(1, 1, 1, 0), (3, 5, 20, 0), (4, 7, 33, 1), (2, 16, 32, 0), (1, 13, 10, 1)])
def test_packed_dot_matches_reference(m, k, n, contract):
    feeds = {"x": np.random.default_rng(5).standard_normal((m, k))}
    expected = interpret(dot_graph(m, k, n, contract), feeds)
    _, g = packed(dot_graph(m, k, n, contract))
    np.testing.assert_array_equal(interpret(g, feeds)[0], expected[0])


@pytest.mark.parametrize("x_shape,o,kernel,groups,strides,padding,dilation", [
    ((1, 1, 7, 7), 18, (3, 3), 1, (1, 1), ((1, 1), (1, 1)), (1, 1)),
    ((2, 3, 9, 8), 20, (3, 2), 1, (2, 1), ((1, 2), (0, 1)), (1, 2)),
    ((1, 4, 5, 6), 32, (1, 1), 2, (1, 1), ((0, 0), (0, 0)), (1, 1)),
])
def test_packed_conv_matches_reference(x_shape, o, kernel, groups, strides, padding, dilation):
    feeds = {"x": np.random.default_rng(6).standard_normal(x_shape)}
    expected = interpret(conv_graph(x_shape, o, kernel, groups, strides, padding, dilation), feeds)
    changed, g = packed(conv_graph(x_shape, o, kernel, groups, strides, padding, dilation))
    assert changed
    assert [n.op for n in g.nodes if n.op != "constant"] == ["packed_conv"]
    np.testing.assert_allclose(interpret(g, feeds)[0], expected[0], rtol=1e-6, atol=1e-6)


def test_packed_conv_keeps_the_conv_attributes_and_reverses_its_lanes():
    _, g = packed(conv_graph((2, 3, 9, 8), 20, (3, 2), 1, (2, 1), ((1, 2), (0, 1)), (1, 2)))
    assert ("%y.packed = packed_conv(%x, %y.packed_w) {channels = 20, dilation = [1, 2], groups = 1, lanes = 16, "
            "padding = [[1, 2], [0, 1]], reversed = true, strides = [2, 1]} : f32[2,20,5,7]") in print_graph(g)
    assert g.nodes[0].out.type.shape == (2, 3, 3, 2, 16)


def test_pack_conv_weight_reverses_each_block_in_the_lanes():
    w = np.arange(20 * 2 * 1 * 1, dtype=np.float32).reshape(20, 2, 1, 1)
    p = pack_conv_weight(w, 16)
    assert p.shape == (2, 2, 1, 1, 16)
    assert p[0, 1, 0, 0, 15] == w[0, 1, 0, 0] and p[0, 1, 0, 0, 0] == w[15, 1, 0, 0]
    assert p[1, 0, 0, 0, 15] == w[16, 0, 0, 0] and not p[1, :, :, :, :12].any()  # channels 20..31 are padding


def test_pack_dot_weight_pads_columns_with_zeros():
    w = np.ones((3, 5), np.float32)
    p = pack_dot_weight(w, 0, 4)
    assert p.shape == (2, 3, 4) and p.sum() == 15 and not p[1, :, 1:].any()


def test_does_not_pack_depthwise_conv():
    changed, _ = packed(conv_graph((1, 8, 5, 5), 8, (3, 3), groups=8))
    assert not changed


def test_does_not_pack_conv_with_too_few_outputs_for_the_lanes():
    # 6 output channels would fill 6 of 16 lanes: codegen/cpu/depthwise.py vectorizes along pixels instead
    changed, _ = packed(conv_graph((1, 1, 7, 7), 6, (3, 3), padding=((1, 1), (1, 1))))
    assert not changed
    # too many taps per output for that kernel: packed after all
    changed, _ = packed(conv_graph((1, 8, 7, 7), 6, (3, 3), padding=((1, 1), (1, 1))))
    assert changed


def test_does_not_pack_pointwise_conv():
    # 1x1, stride 1, unpadded, one group: codegen/cpu/conv1x1.py reads the [O, C, 1, 1] weight as is
    g = conv_graph((1, 8, 5, 5), 24, (1, 1))
    before = print_graph(g)
    changed, g = packed(g)
    assert not changed
    assert print_graph(g) == before


@pytest.mark.parametrize("strides,padding,groups", [((2, 2), ((0, 0), (0, 0)), 1), ((1, 1), ((1, 1), (0, 0)), 1),
                                                    ((1, 1), ((0, 0), (0, 0)), 2)])
def test_packs_other_1x1_convs(strides, padding, groups):
    changed, g = packed(conv_graph((1, 32, 5, 5), 32, (1, 1), groups, strides, padding))
    assert changed
    assert [g.constant_value(n.out).ndim for n in g.nodes if n.op == "constant"] == [5]


def test_does_not_pack_non_f32_dot():
    changed, _ = packed(dot_graph(2, 3, 4, dtype=DType.F64))
    assert not changed


def test_does_not_pack_a_weight_with_other_users():
    g = dot_graph(2, 3, 4)
    w = g.nodes[0].out
    g.add_output(Builder(g).op("neg", [w]), "w_neg")
    changed, _ = packed(g)
    assert not changed


def test_does_not_pack_non_constant_rhs():
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, (2, 3)))
    w = g.add_input("w", TensorType(DType.F32, (3, 4)))
    g.add_output(Builder(g).op("dot", [x, w], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,)), "y")
    changed, _ = packed(g)
    assert not changed


@pytest.mark.parametrize("x_shape,o,kernel,groups,strides,padding", [
    ((1, 128, 99), 128, (3,), 1, (2,), ((0, 0),)),      # wav2vec2's feature extractor conv
    ((1, 32, 40), 32, (16,), 2, (1,), ((8, 8),)),      # a grouped positional conv (16 channels a group)
    ((2, 3, 21), 20, (5,), 1, (3,), ((2, 1),)),        # padded output channels (20 of 32)
])
def test_one_d_conv_packs_into_a_one_d_packed_conv(x_shape, o, kernel, groups, strides, padding):
    feeds = {"x": np.random.default_rng(7).standard_normal(x_shape)}
    graph = lambda: conv_graph(x_shape, o, kernel, groups, strides, padding, (1,))  # noqa: E731
    expected = interpret(graph(), feeds)
    changed, g = packed(graph())
    assert changed
    (conv,) = [n for n in g.nodes if n.op == "packed_conv"]
    assert conv.inputs[0] is g.inputs[0] and conv.out is g.outputs[0]
    assert conv.inputs[1].type.shape == (-(-o // 16), x_shape[1] // groups, kernel[0], 16)
    np.testing.assert_allclose(interpret(g, feeds)[0], expected[0], rtol=1e-5, atol=1e-5)


def test_grouped_conv_packs_into_narrower_blocks_that_divide_its_groups():
    # wav2vec2's positional conv: 8 outputs a group (16 groups), far too many taps for the
    # depthwise body: 8-lane blocks, never straddling a group
    x_shape = (1, 32, 20)
    graph = lambda: conv_graph(x_shape, 32, (9,), groups=4, strides=(1,), padding=((4, 4),), dilation=(1,))  # noqa: E731
    feeds = {"x": np.random.default_rng(8).standard_normal(x_shape)}
    expected = interpret(graph(), feeds)
    changed, g = packed(graph(), lanes=16)
    assert changed
    (conv,) = [n for n in g.nodes if n.op == "packed_conv"]
    assert conv.inputs[1].type.shape[-1] == 8 and conv.attrs["lanes"] == 8
    np.testing.assert_allclose(interpret(g, feeds)[0], expected[0], rtol=1e-5, atol=1e-5)


def test_grouped_conv_with_groups_too_narrow_for_any_block_stays_unpacked():
    _, g = packed(conv_graph((1, 6, 20), 6, (65,), groups=3, strides=(1,), padding=((32, 32),), dilation=(1,)))
    (conv,) = [n for n in g.nodes if n.op == "conv"]
    assert conv.inputs[1].type.rank == 3


def test_large_window_depthwise_conv_reads_an_explicitly_padded_input():
    # ConvNeXt's 7x7 depthwise conv: the padding becomes a pad op, the conv runs unpadded
    x_shape = (1, 8, 12, 12)
    graph = lambda: conv_graph(x_shape, 8, (7, 7), groups=8, padding=((3, 3), (3, 3)))  # noqa: E731
    feeds = {"x": np.random.default_rng(9).standard_normal(x_shape)}
    expected = interpret(graph(), feeds)
    changed, g = packed(graph())
    assert changed
    ops = [n.op for n in g.nodes if n.op != "constant"]
    assert ops == ["pad", "conv"]
    (conv,) = [n for n in g.nodes if n.op == "conv"]
    assert conv.attrs["padding"] == ((0, 0), (0, 0))
    np.testing.assert_allclose(interpret(g, feeds)[0], expected[0], rtol=1e-5, atol=1e-5)


def test_small_window_depthwise_conv_keeps_its_padding():
    # MobileNetV2's 3x3: the copy would cost more than the masked border loads
    _, g = packed(conv_graph((1, 8, 12, 12), 8, (3, 3), groups=8, padding=((1, 1), (1, 1))))
    assert [n.op for n in g.nodes if n.op != "constant"] == ["conv"]


@pytest.mark.parametrize("strides", [(2, 2), (1, 1)])
def test_a_stem_with_a_large_window_reads_an_explicitly_padded_input(strides):
    # resnet18's stem: 3 channels, 7x7, stride 2, padding 3: a pad op (a small copy), and the
    # packed conv unpadded (no border runs to generate)
    x_shape = (2, 3, 20, 18)
    graph = lambda: conv_graph(x_shape, 16, (7, 7), strides=strides, padding=((3, 3), (3, 2)))  # noqa: E731
    feeds = {"x": np.random.default_rng(10).standard_normal(x_shape)}
    expected = interpret(graph(), feeds)
    changed, g = packed(graph())
    assert changed
    assert [n.op for n in g.nodes if n.op != "constant"] == ["pad", "packed_conv"]
    (pad,) = [n for n in g.nodes if n.op == "pad"]
    assert pad.attrs["low"] == (0, 0, 3, 3) and pad.attrs["high"] == (0, 0, 3, 2)
    (conv,) = [n for n in g.nodes if n.op == "packed_conv"]
    assert conv.inputs[0] is pad.out and conv.attrs["padding"] == ((0, 0), (0, 0))
    np.testing.assert_allclose(interpret(g, feeds)[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels,kernel", [(3, (3, 3)), (8, (7, 7))])
def test_a_small_window_or_a_wide_input_keeps_the_packed_conv_padded(channels, kernel):
    # mobilenetv2's 3x3 stem, and a 7x7 conv over 8 channels (a copy of those costs more)
    _, g = packed(conv_graph((1, channels, 20, 20), 16, kernel, padding=((1, 1), (1, 1))))
    assert [n.op for n in g.nodes if n.op != "constant"] == ["packed_conv"]


def test_a_stem_for_the_gpu_keeps_its_padding():
    # the GPU's implicit-GEMM conv takes padding as it is: no copy, no kernel more
    _, g = packed(conv_graph((1, 3, 20, 20), 16, (7, 7), strides=(2, 2), padding=((3, 3), (3, 3))), pad_stems=False)
    assert [n.op for n in g.nodes if n.op != "constant"] == ["packed_conv"]
