import numpy as np

from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.rewrite.dce import DeadCodeElim
from aot.rewrite.scatter_transpose import ScatterTranspose
from passes_util import ir, run_pass

# torch's index_copy_(2, rows, new) on a [1, 2, 16, 8] cache: the sequence dim to the front,
# ScatterND of [T, 1] row indices along it, and back
INDEX_COPY = """
    graph @g(%past: f32[1,2,16,8], %rows: i64[2,1], %new: f32[2,2,1,8]) {
      %t = transpose(%past) {perm = [2, 1, 0, 3]} : f32[16,2,1,8]
      %s = scatter(%t, %rows, %new) {index_vector_dim = 1, inserted_window_dims = [0], kind = "assign", scatter_dims_to_operand_dims = [0], update_window_dims = [1, 2, 3]} : f32[16,2,1,8]
      %present = transpose(%s) {perm = [2, 1, 0, 3]} : f32[1,2,16,8]
      return %present as "present"
    }"""


def test_the_scatter_lands_in_the_untransposed_cache():
    changed, out = run_pass(ScatterTranspose(), INDEX_COPY)
    assert changed
    graph = parse_graph(out)
    DeadCodeElim().run(graph)
    assert str(graph) == ir("""
        graph @g(%past: f32[1,2,16,8], %rows: i64[2,1], %new: f32[2,2,1,8]) {
          %0 = transpose(%new) {perm = [0, 2, 1, 3]} : f32[2,1,2,8]
          %present = scatter(%past, %rows, %0) {index_vector_dim = 1, inserted_window_dims = [2], kind = "assign", scatter_dims_to_operand_dims = [2], update_window_dims = [1, 2, 3]} : f32[1,2,16,8]
          return %present as "present"
        }""")


def _same_results(before: str, after: str, rows: list[int]) -> None:
    rng = np.random.default_rng(0)
    graph = parse_graph(ir(before))
    feeds = {"past": rng.standard_normal((1, 2, 16, 8)).astype(np.float32),
             "rows": np.array(rows, np.int64).reshape(2, 1), "new": rng.standard_normal((2, 2, 1, 8)).astype(np.float32)}
    want = interpret(graph, feeds)
    got = interpret(parse_graph(after), feeds)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_same_values_with_an_index_out_of_range_and_another_reader_transposed():
    text = INDEX_COPY.replace('''      return %present as "present"''', '''      %keys_t = transpose(%s) {perm = [2, 1, 3, 0]} : f32[1,2,8,16]
      return %present as "present", %keys_t as "keys_t"''')
    changed, out = run_pass(ScatterTranspose(), text)
    assert changed and "scatter(%past, %rows" in out
    _same_results(text, out, [3, 15])
    _same_results(text, out, [15, 15])  # the later update wins
    _same_results(text, out, [16, -1])  # windows outside the cache are skipped


def test_does_not_rewrite_when_the_transposed_scatter_has_another_reader():
    text = INDEX_COPY.replace('''      return %present as "present"''', '''      %e = exp(%s) : f32[16,2,1,8]
      return %present as "present", %e as "e"''')
    changed, out = run_pass(ScatterTranspose(), text)
    assert not changed and out == ir(text)
