"""packed_dot and packed_conv (aot/ir/ops/packed.py): the Packing layout, shape rules, reference
semantics (the dot or conv of the unpacked weight), and the IR text form."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import IRError
from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.ir.printer import print_graph
from aot.ir.types import DType, TensorType
from aot.ir.ops import Packing, evaluate, infer_type
from passes_util import ir

F32 = DType.F32


def t(*shape: int) -> TensorType:
    return TensorType(F32, shape)


@pytest.mark.parametrize("packing", [Packing(4), Packing(4, reversed=True), Packing(16), Packing(1)])
@pytest.mark.parametrize("shape", [(7, 3), (8, 2, 2, 3), (1, 5), (16, 1)])
def test_unpack_inverts_pack(packing, shape):
    w = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    wp = packing.pack(w)
    assert wp.shape == (-(-shape[0] // packing.lanes),) + shape[1:] + (packing.lanes,)
    np.testing.assert_array_equal(packing.unpack(wp, shape[0]), w)


def test_pack_places_each_feature_in_its_block_and_lane():
    w = np.arange(10, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)  # row f holds f
    plain, reverse = Packing(4).pack(w), Packing(4, reversed=True).pack(w)
    assert plain[1, 0].tolist() == [4, 5, 6, 7] and reverse[1, 0].tolist() == [7, 6, 5, 4]
    assert plain[2, 0].tolist() == [8, 9, 0, 0] and reverse[2, 0].tolist() == [0, 0, 9, 8]  # zeros past 10


def dot_attrs(columns: int, lanes: int = 4, contract: int = 1, reverse: bool = False) -> dict:
    return {"lhs_contract": (contract,), "columns": columns, "lanes": lanes, "reversed": reverse}


def conv_attrs(channels: int, lanes: int = 4, groups: int = 1, reverse: bool = True, spatial: int = 2) -> dict:
    return {"strides": (1,) * spatial, "padding": ((1, 1),) * spatial, "dilation": (1,) * spatial,
            "groups": groups, "channels": channels, "lanes": lanes, "reversed": reverse}


def test_packed_dot_has_the_type_of_the_dot_it_packs():
    assert infer_type("packed_dot", [t(2, 3, 5), t(3, 5, 4)], dot_attrs(10, contract=2)) == t(2, 3, 10)
    assert infer_type("packed_dot", [t(5, 6), t(3, 5, 4)], dot_attrs(9, contract=0)) == t(6, 9)


@pytest.mark.parametrize("wp,attrs,message", [
    ((3, 5, 4), dot_attrs(13), "does not hold 13 features"),  # 13 columns need 4 blocks
    ((3, 5, 4), dot_attrs(8), "does not hold 8 features"),  # 8 columns fill only 2
    ((3, 5, 8), dot_attrs(10), "in blocks of 4 lanes"),
    ((3, 5, 4), {**dot_attrs(10), "lanes": 0}, "lanes >= 1"),
    ((3, 5, 4), {**dot_attrs(10), "reversed": 1}, "reversed = true/false"),
    ((3, 5, 4), {**dot_attrs(10), "lhs_contract": (0, 1)}, "contracts one dim"),
    ((3, 4, 4), dot_attrs(10), "do not match"),  # K = 5 in x, 4 in the weight
])
def test_packed_dot_rejects_a_weight_that_does_not_fit(wp, attrs, message):
    with pytest.raises(IRError, match=message):
        infer_type("packed_dot", [t(2, 5), t(*wp)], attrs)


def test_packed_conv_has_the_type_of_the_conv_it_packs():
    assert infer_type("packed_conv", [t(1, 3, 8, 9), t(2, 3, 3, 3, 4)], conv_attrs(6)) == t(1, 6, 8, 9)
    assert infer_type("packed_conv", [t(2, 4, 20), t(2, 2, 5, 4)], conv_attrs(8, groups=2, spatial=1)) == t(2, 8, 18)


def test_packed_conv_blocks_never_straddle_groups():
    # 12 channels in 3 groups: 4 a group, so 8-lane blocks would mix groups
    with pytest.raises(IRError, match="straddle"):
        infer_type("packed_conv", [t(1, 3, 8, 8), t(2, 1, 3, 3, 8)], conv_attrs(12, lanes=8, groups=3))
    fits = infer_type("packed_conv", [t(1, 3, 8, 8), t(3, 1, 3, 3, 4)], conv_attrs(12, lanes=4, groups=3))
    assert fits == t(1, 12, 8, 8)


@pytest.mark.parametrize("contract,reverse", [(1, False), (0, False), (1, True)])
def test_packed_dot_computes_the_dot_of_the_unpacked_weight(contract, reverse):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 7) if contract == 1 else (7, 6)).astype(np.float32)
    w = rng.standard_normal((7, 11)).astype(np.float32)  # [K, N]
    packing = Packing(4, reverse)
    got = evaluate("packed_dot", [x, packing.pack(w.T)], dot_attrs(11, contract=contract, reverse=reverse), t(6, 11))
    want = (x if contract == 1 else x.T).astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("spatial,groups", [(2, 1), (1, 2), (2, 2)])
def test_packed_conv_computes_the_conv_of_the_unpacked_weight(spatial, groups):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4) + (6,) * spatial).astype(np.float32)
    w = rng.standard_normal((8, 4 // groups) + (3,) * spatial).astype(np.float32)
    attrs = conv_attrs(8, groups=groups, spatial=spatial)
    out = infer_type("packed_conv", [t(*x.shape), t(*Packing(4, True).pack(w).shape)], attrs)
    conv = {k: attrs[k] for k in ("strides", "padding", "dilation", "groups")}
    want = evaluate("conv", [x, w], conv, out)
    np.testing.assert_array_equal(evaluate("packed_conv", [x, Packing(4, True).pack(w)], attrs, out), want)


def test_packed_ops_print_parse_and_interpret():
    text = ir("""
        graph @g(%x: f32[2,5], %y: f32[1,2,5]) {
          %w = constant() {value = dense<0.5>} : f32[2,5,4]
          %d = packed_dot(%x, %w) {columns = 7, lanes = 4, lhs_contract = [1], reversed = false} : f32[2,7]
          %k = constant() {value = dense<0.25>} : f32[1,2,3,4]
          %c = packed_conv(%y, %k) {channels = 3, dilation = [1], groups = 1, lanes = 4, padding = [[1, 1]],
                                    reversed = true, strides = [1]} : f32[1,3,5]
          return %d as "d", %c as "c"
        }""")
    graph = parse_graph(text)
    blobs: dict[str, np.ndarray] = {}
    printed = print_graph(graph, blobs)
    assert "packed_dot(%x, %w) {columns = 7, lanes = 4, lhs_contract = [1], reversed = false} : f32[2,7]" in printed
    assert print_graph(parse_graph(printed, blobs)) == printed
    d, c = interpret(graph, {"x": np.ones((2, 5), np.float32), "y": np.ones((1, 2, 5), np.float32)})
    np.testing.assert_array_equal(d, np.full((2, 7), 2.5, np.float32))
    np.testing.assert_array_equal(c[0, :, 2], [1.5, 1.5, 1.5])  # 2 channels x 3 taps x 0.25
    np.testing.assert_array_equal(c[0, :, 0], [1.0, 1.0, 1.0])  # one tap in the padding


def test_verifier_rejects_a_packed_dot_whose_type_is_not_the_logical_one():
    text = ir("""
        graph @g(%x: f32[2,5]) {
          %w = constant() {value = dense<0.5>} : f32[2,5,4]
          %d = packed_dot(%x, %w) {columns = 7, lanes = 4, lhs_contract = [1], reversed = false} : f32[2,2,4]
          return %d as "d"
        }""")
    with pytest.raises(IRError, match="shape rule gives f32\\[2,7\\]"):
        parse_graph(text)
