import numpy as np
import pytest

from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.stacked_updates import StackedUpdates
from passes_util import ir, run_pass

SCATTER = ('{index_vector_dim = 1, inserted_window_dims = [1], kind = "assign", scatter_dims_to_operand_dims = [1], '
           'update_window_dims = [1, 2]}')
# a 2-layer cache [L, H, S, D]: each layer's slice updated at T rows and stacked back (torch's
# export of a stacked static cache); layer 0's update is also read, as its attention does
STACKED = """
    graph @g(%past: f32[2,2,16,8], %rows: i64[2,1], %u0: f32[2,2,8], %u1: f32[2,2,8]) {
      %l0 = slice(%past) {limit = [1, 2, 16, 8], start = [0, 0, 0, 0], stride = [1, 1, 1, 1]} : f32[1,2,16,8]
      %y0 = reshape(%l0) {shape = [2, 16, 8]} : f32[2,16,8]
      %s0 = scatter(%y0, %rows, %u0) SCATTER : f32[2,16,8]
      %r0 = reduce(%s0) {axes = [0, 1, 2], kind = "sum"} : f32[]
      %l1 = slice(%past) {limit = [2, 2, 16, 8], start = [1, 0, 0, 0], stride = [1, 1, 1, 1]} : f32[1,2,16,8]
      %y1 = reshape(%l1) {shape = [2, 16, 8]} : f32[2,16,8]
      %s1 = scatter(%y1, %rows, %u1) SCATTER : f32[2,16,8]
      %v0 = reshape(%s0) {shape = [1, 2, 16, 8]} : f32[1,2,16,8]
      %v1 = reshape(%s1) {shape = [1, 2, 16, 8]} : f32[1,2,16,8]
      %present = concat(%v0, %v1) {axis = 0} : f32[2,2,16,8]
      return %present as "present", %r0 as "r0"
    }""".replace("SCATTER", SCATTER)


def _results(text: str, rows: list[int]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {"past": rng.standard_normal((2, 2, 16, 8)).astype(np.float32),
             "rows": np.array(rows, np.int64).reshape(2, 1),
             "u0": rng.standard_normal((2, 2, 8)).astype(np.float32),
             "u1": rng.standard_normal((2, 2, 8)).astype(np.float32)}
    return interpret(parse_graph(ir(text)), feeds)


def test_the_layers_updates_become_a_chain_on_the_cache():
    changed, out = run_pass(StackedUpdates(), STACKED)
    assert changed
    graph = parse_graph(out)
    DeadCodeElim().run(graph)
    scatters = [n for n in graph.nodes if n.op == "scatter"]
    assert [n.inputs[0].name for n in scatters] == ["past", scatters[0].out.name]
    assert graph.outputs[0] is scatters[1].out  # the concat is gone
    for n in scatters:
        assert n.attrs["inserted_window_dims"] == (0, 2) and n.attrs["scatter_dims_to_operand_dims"] == (0, 2)
    assert not any(n.op == "concat" and n.out.type.shape == (2, 2, 16, 8) for n in graph.nodes)


@pytest.mark.parametrize("rows", [[3, 15], [15, 15], [16, -1], [0, 1]])
def test_same_values_for_any_rows(rows):
    """Duplicates (the later wins), windows outside the cache (skipped), every layer's reader."""
    _, out = run_pass(StackedUpdates(), STACKED)
    for got, want in zip(_results(out, rows), _results(STACKED, rows)):
        np.testing.assert_array_equal(got, want)


def test_does_not_chain_layers_stacked_out_of_order():
    text = STACKED.replace("concat(%v0, %v1)", "concat(%v1, %v0)")
    changed, out = run_pass(StackedUpdates(), text)
    assert not changed and out == ir(text)


def test_does_not_chain_slices_of_another_tensor():
    other = STACKED.replace("%u1: f32[2,2,8])", "%u1: f32[2,2,8], %other: f32[2,2,16,8])") \
                   .replace("%l1 = slice(%past)", "%l1 = slice(%other)")
    changed, out = run_pass(StackedUpdates(), other)
    assert not changed and out == ir(other)
