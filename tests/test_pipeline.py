import numpy as np

from aot.interpreter import interpret
from aot.ir.parser import parse_graph
from aot.pipeline import PipelineOptions, run_pipeline
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
    assert names == ["00-import.ir", "01-const-fold.ir", "02-dce.ir", "03-output-copies.ir", "04-fusion.txt", "05-buffers.txt"]
    assert "exp" not in (tmp_path / "02-dce.ir").read_text()
    assert any(line.startswith("const-fold") for line in lines)
    assert len(plan.kernels) == 2
    got = interpret(graph, {"x": np.ones((2, 3), np.float32)})
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
