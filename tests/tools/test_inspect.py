"""aot inspect: JSON keys, the memory-plan SVG and the kernel graph (SVG and DOT)."""
import json
import re
import xml.dom.minidom

import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import aot
from aot.cli import main


def _model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 16], [0.01 * i for i in range(256)])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
        helper.make_node("MatMul", ["r", "w"], ["z"]),
    ]
    graph = helper.make_graph(nodes, "small", [x], [y, z], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("inspect") / "m.aot"
    aot.compile(_model(), path)
    return path


def test_json_has_the_pipeline_numbers(artifact):
    result = CliRunner().invoke(main, ["inspect", str(artifact), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    for key in ("kernels", "arena_bytes", "arena_lower_bound_bytes", "temporaries_bytes", "weights_bytes", "code_bytes", "memory_plan"):
        assert key in info
    assert info["code_bytes"][info["manifest"]["cpu"][0]["section"]] > 0
    assert info["arena_lower_bound_bytes"] <= info["arena_bytes"] <= info["temporaries_bytes"]
    ops = [k["ops"] for k in info["kernels"]]
    # softmax is one kernel: max, exp, sum, one reciprocal per row and a multiply
    assert ["reduce", "broadcast", "sub", "exp", "reduce", "div", "broadcast", "mul"] in ops
    for k in info["kernels"]:
        assert k["output"] and isinstance(k["inputs"], list) and "root because" in k["reason"]
    (temp,) = info["memory_plan"]  # r: read by the softmax and the second matmul
    assert len(temp["values"]) == 1 and temp["size"] == 4 * 16 * 4 and temp["offset"] == 0
    assert (temp["start"], temp["end"]) == (0, 2)


def test_memory_plan_svg_draws_one_rectangle_per_buffer(artifact, tmp_path):
    out = tmp_path / "plan.svg"
    result = CliRunner().invoke(main, ["inspect", str(artifact), "--memory-plan", str(out)])
    assert result.exit_code == 0, result.output
    doc = xml.dom.minidom.parse(str(out))
    titles = [t.firstChild.data for t in doc.getElementsByTagName("title")]
    assert len(titles) == 1 and re.match(r"b0: %\S+; 256 B at offset 0, steps 0\.\.2$", titles[0])


@pytest.mark.parametrize("suffix", ["dot", "svg"])
def test_kernel_graph_groups_fused_ops(artifact, tmp_path, suffix):
    out = tmp_path / f"graph.{suffix}"
    result = CliRunner().invoke(main, ["inspect", str(artifact), "--graph", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    if suffix == "dot":
        assert text.startswith("digraph kernels {")
        edges = re.findall(r'^  "([^"]+)" -> "([^"]+)"', text, re.M)
        kernels = re.findall(r'^  "(k\d+_\w+)" \[label', text, re.M)
        assert len(kernels) == 3
        # the input feeds the first matmul; r feeds both the softmax and the second matmul
        assert ("in0", kernels[0]) in edges and len(edges) == 3
    else:
        doc = xml.dom.minidom.parse(str(out))
        assert len(doc.getElementsByTagName("line")) == 3
        assert "reduce+broadcast+sub+exp" in text


def test_memory_plan_fails_cleanly_for_artifacts_without_a_tooling_section(tmp_path, artifact):
    from aot.artifact import pack_artifact, read_artifact

    old = read_artifact(artifact)
    bare = tmp_path / "bare.aot"
    bare.write_bytes(pack_artifact(old.manifest, [(n, d) for n, d in old.sections.items() if n not in ("manifest", "tooling")]))
    result = CliRunner().invoke(main, ["inspect", str(bare), "--memory-plan", str(tmp_path / "p.svg")])
    assert result.exit_code == 1 and "no memory_plan (no tooling section)" in result.output
    result = CliRunner().invoke(main, ["inspect", str(bare)])  # the runtime's fields alone still describe it
    assert result.exit_code == 0 and "kernels (3):" in result.output, result.output


def test_summary_lists_each_kernels_estimated_cost(artifact):
    import json
    import re

    from aot.artifact import read_artifact

    kernels = read_artifact(artifact).manifest["kernels"]
    result = CliRunner().invoke(main, ["inspect", str(artifact)])
    assert result.exit_code == 0, result.output
    for k in kernels:
        line = next(ln for ln in result.output.splitlines() if ln.split() and ln.split()[0] == k.get("name", k["symbol"]))
        assert re.search(rf"est +{k['cost_ns'] / 1000:.1f} us", line), (line, json.dumps(k))


def test_the_cpu_variants_are_listed_best_first(tmp_path):
    path = tmp_path / "variants.aot"
    aot.compile(_model(), path, cpu="x86-64-v4,x86-64-v3")
    result = CliRunner().invoke(main, ["inspect", str(path)])
    assert result.exit_code == 0, result.output
    assert "cpu code: variant 1 of 2: x86_64 x86-64-v4 (x86_64-unknown-linux-gnu) in cpu.x86_64.x86-64-v4, up to AVX-512" in result.output
    assert "cpu code: variant 2 of 2: x86_64 x86-64-v3 (x86_64-unknown-linux-gnu) in cpu.x86_64.x86-64-v3, up to AVX2" in result.output
    info = json.loads(CliRunner().invoke(main, ["inspect", str(path), "--json"]).output)
    assert [(v["cpu"], v["section"]) for v in info["cpu_variants"]] == [
        ("x86-64-v4", "cpu.x86_64.x86-64-v4"), ("x86-64-v3", "cpu.x86_64.x86-64-v3")]
    assert all(v["code_bytes"] > 0 for v in info["cpu_variants"])
