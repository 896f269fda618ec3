"""PatchConv: a conv whose stride equals its kernel (a patch embedding) becomes a dot."""
from __future__ import annotations

import numpy as np
import pytest

from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.ir.verifier import verify_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.patch_conv import PatchConv


def patch_graph(x_shape: tuple[int, ...], o: int, kernel: tuple[int, int], strides=None, padding=((0, 0), (0, 0)),
                groups: int = 1, constant_weight: bool = True) -> Graph:
    rng = np.random.default_rng(11)
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, x_shape))
    b = Builder(g)
    shape = (o, x_shape[1] // groups) + kernel
    if constant_weight:
        w = b.constant(rng.standard_normal(shape).astype(np.float32), name="w")
    else:
        w = g.add_input("w", TensorType(DType.F32, shape))
    y = b.op("conv", [x, w], name="y", strides=strides or kernel, padding=padding, dilation=(1, 1), groups=groups)
    g.add_output(y, "y")
    return g


@pytest.mark.parametrize("x_shape,o,kernel", [
    ((1, 3, 32, 32), 192, (16, 16)),  # ViT's patch embedding (2 x 2 patches)
    ((2, 3, 18, 13), 128, (4, 4)),    # rows and columns past the last patch are dropped
    ((1, 5, 6, 9), 130, (2, 3)),      # non-square patches
])
def test_patch_conv_is_a_dot_with_the_same_result(x_shape, o, kernel):
    feeds = {"x": np.random.default_rng(3).standard_normal(x_shape).astype(np.float32)}
    expected = interpret(patch_graph(x_shape, o, kernel), feeds)
    g = patch_graph(x_shape, o, kernel)
    assert PatchConv().run(g)
    DeadCodeElim().run(g)
    verify_graph(g)
    ops = [n.op for n in g.nodes]
    assert "conv" not in ops and "dot" in ops
    np.testing.assert_allclose(interpret(g, feeds)[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: patch_graph((1, 3, 8, 8), 128, (3, 3), strides=(1, 1)),                     # overlapping windows
    lambda: patch_graph((1, 3, 8, 8), 128, (2, 2), padding=((1, 1), (1, 1))),           # padded
    lambda: patch_graph((1, 4, 8, 8), 128, (2, 2), groups=2),                           # grouped
    lambda: patch_graph((1, 3, 8, 8), 128, (1, 1)),                                     # pointwise: its own body
    lambda: patch_graph((1, 3, 8, 8), 128, (2, 2), constant_weight=False),              # run-time weight
    lambda: patch_graph((1, 3, 8, 8), 48, (4, 4)),                                      # few outputs: the copy outweighs
])
def test_other_convs_stay_convs(make):
    g = make()
    assert not PatchConv().run(g)
    assert [n.op for n in g.nodes if n.op != "constant"] == ["conv"]
