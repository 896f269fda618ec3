"""Layout pass, shared weights: a tied embedding table is packed once for the LM head's dot,
and the token lookup (a gather of whole rows) reads the packed constant; IR in, IR out,
interpreter results bit for bit; a tied ONNX model compiles to one copy of the table."""
from __future__ import annotations

import numpy as np
import pytest

from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType, Value
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.layout import Layout

V, H = 37, 5  # rows not a multiple of the lanes: the packed table has padding rows


def table(rows: int = V, cols: int = H) -> np.ndarray:
    return np.random.default_rng(7).standard_normal((rows, cols)).astype(np.float32)


def row_gather(b: Builder, e: Value, ids: Value, axis: int = 0) -> Value:
    """ONNX Gather as the importer lowers it: whole rows along `axis`, implicit index vector."""
    rank = ids.type.rank
    sizes = tuple(1 if d == axis else e.type.shape[d] for d in (0, 1))
    return b.op("gather", [e, ids], name="emb", offset_dims=(rank,), collapsed_slice_dims=(axis,),
                start_index_map=(axis,), index_vector_dim=rank, slice_sizes=sizes)


def lm_head(b: Builder, x: Value, w: Value, contract: int) -> Value:
    return b.op("dot", [x, w], name="logits", lhs_batch=(), rhs_batch=(), lhs_contract=(2,), rhs_contract=(contract,))


def tied_graph(e: np.ndarray, folded: bool, ids_dtype: DType = DType.I64, seq: int = 4) -> Graph:
    """emb = E[ids]; logits = emb @ E^T, with E^T either a dot contracting E's dim 1 or (folded)
    a second constant holding E.T, as import leaves ONNX's MatMul(x, Transpose(E))."""
    g = Graph()
    ids = g.add_input("ids", TensorType(ids_dtype, (1, seq)))
    b = Builder(g)
    ev = b.constant(e, name="E")
    emb = row_gather(b, ev, ids)
    w = b.constant(np.ascontiguousarray(e.T), name="Et") if folded else ev
    g.add_output(lm_head(b, emb, w, 0 if folded else 1), "logits")
    return g


def layout(graph: Graph, lanes: int = 16) -> bool:
    changed = Layout(lanes).run(graph)
    DeadCodeElim().run(graph)
    verify_graph(graph)
    return changed


def constants(graph: Graph) -> list[np.ndarray]:
    return [graph.constant_value(n.out) for n in graph.nodes if n.op == "constant" and graph.constant_value(n.out).size > 1]


def assert_same_results(before: Graph, after: Graph, feeds: dict[str, np.ndarray]) -> None:
    want, got = interpret(before, feeds), interpret(after, feeds)
    for w, a in zip(want, got):
        assert w.dtype == a.dtype and w.shape == a.shape
        np.testing.assert_array_equal(a.view(np.uint32), w.view(np.uint32))  # bit for bit


@pytest.mark.parametrize("folded", [False, True])
def test_tied_table_is_packed_once_and_the_lookup_reads_it(folded):
    g = tied_graph(table(), folded)
    assert layout(g)
    text = print_graph(g)
    assert "gather(%logits.packed_w, %emb.starts) {collapsed_slice_dims = [0, 2], index_vector_dim = 2, " \
           "offset_dims = [2], slice_sizes = [1, 5, 1], start_index_map = [0, 2]} : f32[1,4,5]" in text
    assert "concat(%emb.block, %emb.lane) {axis = 2} : i64[1,4,2]" in text
    assert "packed_dot(%emb.packed, %logits.packed_w)" in text
    (packed,) = constants(g)  # one copy of the table: the packed one
    assert packed.shape == (3, H, 16)


@pytest.mark.parametrize("folded", [False, True])
@pytest.mark.parametrize("lanes", [16, 8])
def test_tied_lookup_matches_the_table_for_every_index(folded, lanes):
    # every row, the padded block's last rows, and indices past both ends (the gather clamps them)
    # (negative ones read row 0 with no clamp of their own: div and rem give block and lane <= 0)
    big = np.iinfo(np.int64)
    ids = np.array([[0, 1, V - 1, 31], [32, 15, 16, 36], [-5, V, V + 20, big.max], [-1, -16, -17, big.min]], np.int64)
    for row in ids:
        before, after = tied_graph(table(), folded), tied_graph(table(), folded)
        layout(after, lanes)
        assert_same_results(before, after, {"ids": row[None]})


@pytest.mark.parametrize("dtype", [DType.I32, DType.U8, DType.U16])
def test_tied_lookup_keeps_the_index_dtype(dtype):
    # u8 cannot pass the last of 300 rows: no clamp at all
    rows = 300 if dtype is DType.U8 else V
    before, after = tied_graph(table(rows), True, dtype), tied_graph(table(rows), True, dtype)
    layout(after)
    assert ("min" in [n.op for n in after.nodes]) == (dtype is not DType.U8)
    info = np.iinfo(dtype.to_numpy())
    ids = np.array([[info.min, min(rows - 1, info.max), info.max, 17]], dtype.to_numpy())
    assert_same_results(before, after, {"ids": ids})


def test_lookup_of_columns_ties_with_a_dot_contracting_rows():
    # E stored [H, V]: the lookup gathers columns, the head contracts dim 0
    e = np.ascontiguousarray(table().T)
    g = Graph()
    ids = g.add_input("ids", TensorType(DType.I64, (1, 3)))
    b = Builder(g)
    ev = b.constant(e, name="E")
    emb = row_gather(b, ev, ids, axis=1)
    g.add_output(lm_head(b, emb, ev, 0), "logits")
    before = tied_graph(table(), False, seq=3)
    assert layout(g)
    assert len(constants(g)) == 1
    assert_same_results(before, g, {"ids": np.array([[3, 36, 20]])})


def explicit_vector_graph() -> Graph:
    g = Graph()
    ids = g.add_input("ids", TensorType(DType.I64, (2, 1, 3)))
    b = Builder(g)
    ev = b.constant(table(), name="E")
    emb = b.op("gather", [ev, ids], name="emb", offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,),
               index_vector_dim=1, slice_sizes=(1, H))  # f32[2, 3, H]
    g.add_output(lm_head(b, emb, ev, 1), "logits")
    return g


def test_explicit_index_vector_dim_keeps_its_place():
    g = explicit_vector_graph()
    assert layout(g)
    assert "concat(%emb.block, %emb.lane) {axis = 1} : i64[2,2,3]" in print_graph(g)
    assert_same_results(explicit_vector_graph(), g, {"ids": np.array([[[0, 5, 36]], [[17, 16, 2]]])})


def test_weight_read_by_two_dots_is_packed_once():
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, (1, 2, H)))
    b = Builder(g)
    w = b.constant(table(), name="W")
    for name in ("y", "z"):  # e.g. ALBERT's layers, one weight for all
        x = b.op("dot", [x, w], name=name, lhs_batch=(), rhs_batch=(), lhs_contract=(2,), rhs_contract=(1,))
        x = b.op("slice", [x], start=(0, 0, 0), limit=(1, 2, H), stride=(1, 1, 1))
    g.add_output(x, "out")
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 2, H)).astype(np.float32)}
    (want,) = interpret(g, feeds)
    assert layout(g)
    assert [c.shape for c in constants(g)] == [(3, H, 16)]
    assert [n.inputs[1].name for n in g.nodes if n.op == "packed_dot"] == ["y.packed_w", "y.packed_w"]
    np.testing.assert_array_equal(interpret(g, feeds)[0], want)


def test_converges_a_tied_graph_changes_once():
    g = tied_graph(table(), True)
    layout(g)
    text = print_graph(g)
    assert not Layout().run(g)
    assert print_graph(g) == text


def test_does_not_tie_a_table_that_differs_in_one_bit():
    # -0.0 == 0.0 as floats, yet the lookup must return the table's own bits
    e = table()
    e[3, 2] = 0.0
    et = np.ascontiguousarray(e.T)
    et[2, 3] = -0.0
    g = Graph()
    ids = g.add_input("ids", TensorType(DType.I64, (1, 4)))
    b = Builder(g)
    emb = row_gather(b, b.constant(e, name="E"), ids)
    g.add_output(lm_head(b, emb, b.constant(et, name="Et"), 0), "logits")
    assert layout(g)  # the head is packed all the same
    assert "gather(%E, %ids)" in print_graph(g)
    assert len(constants(g)) == 2


def test_does_not_tie_a_table_with_other_readers():
    # the table stays for its other reader: moving the lookup would save nothing
    g = tied_graph(table(), True)
    g.add_output(Builder(g).op("neg", [g.nodes[0].out]), "neg")
    layout(g)
    assert "gather(%E, %ids)" in print_graph(g)


def test_does_not_pack_a_weight_gathered_along_its_contracted_dim():
    # W [V, H] contracted on dim 0 by the dot, gathered along dim 0: the packed form holds columns, not these rows
    g = Graph()
    ids = g.add_input("ids", TensorType(DType.I64, (1, 2)))
    x = g.add_input("x", TensorType(DType.F32, (1, 2, V)))
    b = Builder(g)
    w = b.constant(table(), name="W")
    g.add_output(row_gather(b, w, ids), "emb")
    g.add_output(lm_head(b, x, w, 0), "y")
    before = print_graph(g)
    assert not layout(g)
    assert print_graph(g) == before


def test_does_not_pack_a_shared_weight_that_is_a_graph_output():
    g = tied_graph(table(), False)
    g.add_output(g.nodes[0].out, "E")
    before = print_graph(g)
    assert not layout(g)
    assert print_graph(g) == before


def tied_onnx(e: np.ndarray, seq: int):
    """ONNX as torch exports a tied LM head: Gather(E, ids), then MatMul(x, Transpose(E))."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Gather", ["E", "ids"], ["emb"]), helper.make_node("Tanh", ["emb"], ["h"]),
             helper.make_node("Transpose", ["E"], ["Et"], perm=[1, 0]), helper.make_node("MatMul", ["h", "Et"], ["logits"])]
    graph = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, seq, e.shape[0]])],
                              [numpy_helper.from_array(e, "E")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_tied_onnx_model_stores_the_table_once_and_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    import aot

    e = table(1000, 24)
    model = tied_onnx(e, 6)
    result = aot.compile(model)
    packed_bytes = -(-1000 // 16) * 16 * 24 * 4
    assert packed_bytes <= result.manifest["weights"]["bytes"] < e.nbytes * 1.1  # was twice the table
    ids = np.array([[0, 999, -1, 17, 512, -1000]])
    (got,) = aot.Session(result.artifact).run(None, {"ids": ids})
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"ids": ids})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
