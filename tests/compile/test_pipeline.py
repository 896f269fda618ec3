import numpy as np

from aot.interpreter import interpret
from aot.ir import DType
from aot.ir.parser import parse_graph
from aot.pipeline import PipelineOptions, run_pipeline
from codegen_util import Compiled, graph_with_inputs
from passes_util import ir

MODEL = """
    graph @g(%x: f32[2,3]) {
      %a = constant() {value = dense<1.0>} : f32[]
      %b = constant() {value = dense<2.0>} : f32[]
      %c = add(%a, %b) : f32[]
      %cb = broadcast(%c) {dims = [], shape = [2, 3]} : f32[2,3]
      %dead = exp(%x) : f32[2,3]
      %y = mul(%x, %cb) : f32[2,3]
      return %y as "y", %x as "x_again"
    }"""


def test_pipeline_dumps_after_each_changing_pass(tmp_path):
    graph = parse_graph(ir(MODEL))
    expected = interpret(parse_graph(ir(MODEL)), {"x": np.ones((2, 3), np.float32)})
    lines: list[str] = []
    plan = run_pipeline(graph, PipelineOptions(dump_dir=tmp_path, log=lines.append))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["00-import.ir", "01-dce.ir", "02-const-fold.ir", "03-dce.ir", "04-output-copies.ir", "05-fusion.txt",
                     "06-buffers.txt"]
    # the dead exp goes before the rewrites run, the constants folded into %c after
    assert "exp" in (tmp_path / "00-import.ir").read_text()
    assert "exp" not in (tmp_path / "01-dce.ir").read_text()
    assert "%a = constant" in (tmp_path / "02-const-fold.ir").read_text()
    assert "%a = constant" not in (tmp_path / "03-dce.ir").read_text()
    assert lines[0].startswith("dce") and "after import: changed (6 -> 5 nodes)" in lines[0]
    assert any(line.startswith("const-fold") for line in lines)
    assert len(plan.kernels) == 2
    got = interpret(graph, {"x": np.ones((2, 3), np.float32)})
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_without_a_dump_folder_nothing_is_printed_for_it(monkeypatch):
    import aot.pipeline

    printed = []
    monkeypatch.setattr(aot.pipeline, "print_graph", lambda graph: printed.append(graph) or "")
    monkeypatch.setattr(aot.pipeline, "explain", lambda kernels: printed.append(kernels) or "")
    monkeypatch.setattr(aot.pipeline, "describe_plan", lambda plan: printed.append(plan) or "")
    plan = run_pipeline(parse_graph(ir(MODEL)), PipelineOptions())
    assert len(plan.kernels) == 2 and printed == []


def test_verbose_lines_say_what_each_pass_changed():
    graph = parse_graph(ir("""
        graph @g(%x: f32[2,3]) {
          %one = constant() {value = dense<1.0>} : f32[]
          %ob = broadcast(%one) {dims = [], shape = [2, 3]} : f32[2,3]
          %a = mul(%x, %ob) : f32[2,3]
          %e1 = exp(%a) : f32[2,3]
          %e2 = exp(%x) : f32[2,3]
          %y = add(%e1, %e2) : f32[2,3]
          return %y as "y"
        }"""))
    lines: list[str] = []
    plan = run_pipeline(graph, PipelineOptions(log=lines.append))
    text = "\n".join(lines)
    assert "simplify" in text and "1 rewrite (x*1 -> x: 1)" in text
    assert "1 duplicate node(s) merged" in text
    assert any(line.startswith("buffers") and "lower bound" in line for line in lines)
    assert [k.ops for k in plan.kernels] == [["exp", "add"]]


def test_dead_nodes_from_the_import_go_before_the_rewrites():
    # CSE keeps the earlier of two twins: were the dead %early still there, it would replace %late
    graph = parse_graph(ir("""
        graph @g(%x: f32[2,3]) {
          %early = exp(%x) : f32[2,3] loc("Exp_0")
          %late = exp(%x) : f32[2,3] loc("Exp_1")
          return %late as "y"
        }"""))
    plan = run_pipeline(graph)
    assert [(n.out.name, n.loc) for n in plan.graph.nodes] == [("late", "Exp_1")]


def _in_place_model():
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("d1", "d2")]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes = [
        helper.make_node("Exp", ["x"], ["a"]),
        helper.make_node("ReduceMax", ["a"], ["m"], keepdims=1, axes=[0]),
        helper.make_node("Sub", ["a", "m"], ["c"]),
        helper.make_node("ReduceSum", ["c", "axes"], ["d1"], keepdims=0),
        helper.make_node("ReduceMin", ["c"], ["d2"], keepdims=0, axes=[0]),
    ]
    graph = helper.make_graph(nodes, "inplace", [x], outs, [axes])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_in_place_reuse_keeps_numerics(tmp_path):
    import aot
    from aot.driver import import_model

    model = _in_place_model()
    result = aot.compile(model, tmp_path / "m.aot")
    assert result.plan.notes["in_place"] >= 1
    assert result.plan.arena_bytes <= result.plan.arena_lower_bound * 1.05
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    got = aot.Session(tmp_path / "m.aot").run(None, {"x": x})
    graph, _, _ = import_model(model)
    for g, w in zip(got, interpret(graph, {"x": x})):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4)


def test_compile_output_is_deterministic(tmp_path):
    import aot

    model = _in_place_model()
    first = aot.compile(model, None).artifact
    assert aot.compile(model, None).artifact == first


def test_pipeline_fuses_and_runs_gather_scatter_sort_and_reverse(rng):
    """Fusion, buffer assignment and planning over gather/scatter/sort/reverse, then the compiled plan."""
    x_val = rng.standard_normal((6, 5)).astype(np.float32)
    i_val = np.array([5, 1, 1, 0], np.int32)
    g, b, (x, i) = graph_with_inputs(("x", DType.F32, (6, 5)), ("i", DType.I32, (4,)))
    e = b.op("exp", [x])
    rows = b.op("gather", [e, i], offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                index_vector_dim=1, slice_sizes=(1, 5))
    scaled = b.op("mul", [rows, b.op("reverse", [rows], dims=(1,))])
    order = b.op("argsort", [scaled], dim=1, descending=False, dtype=DType.I32)
    values = b.op("sort", [scaled], dim=0, descending=True)
    added = b.op("scatter", [e, i, values], kind="add", update_window_dims=(1,), inserted_window_dims=(0,),
                 scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    g.add_output(order, "order")
    g.add_output(b.op("tanh", [added]), "out")
    feeds = {"x": x_val, "i": i_val}
    want = interpret(g, feeds)
    got = Compiled(run_pipeline(g)).run(feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
