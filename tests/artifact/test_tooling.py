"""The tooling section (aot/tooling.py): what the compiler writes for tools, kept out of the
runtime's manifest; the C runtime never decodes it, the Python reader checks it before a tool
uses it."""
import json

import numpy as np
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import aot
from aot.artifact import ArtifactError, pack_artifact, read_artifact
from aot.cli import main
from aot.runtime.session import Session
from aot.tooling import annotated

# What the C runtime reads (packaging/FORMAT.md, "What the runtime reads"), per object.
RUNTIME_KEYS = {
    "": {"format_version", "model", "inputs", "outputs", "arena", "weights", "cpu", "kernels", "checks"},
    "model": {"name"},
    "inputs": {"name", "dtype", "shape"},
    "outputs": {"name", "dtype", "shape"},
    "arena": {"bytes", "alignment"},
    "weights": {"section", "bytes", "alignment"},
    "cpu": {"section", "arch", "cpu", "entry", "code_info", "checks", "x86_features", "kernels"},
    "kernels": {"name", "symbol", "work", "cost_ns"},
    "checks": {"message"},
}


def _model():
    w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "tooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                              [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def compiled():
    return aot.compile(_model())


def _repack(result, tooling=None, tooling_bytes=None) -> bytes:
    art = read_artifact(result.artifact)
    sections = [(n, d) for n, d in art.sections.items() if n not in ("manifest", "tooling")]
    if tooling_bytes is not None:
        sections.append(("tooling", tooling_bytes))
    return pack_artifact(art.manifest, sections, tooling=tooling)


def _run(blob: bytes) -> np.ndarray:
    x = np.arange(16, dtype=np.float32).reshape(2, 8) / 16
    with Session(blob) as session:
        return session.run(None, {"x": x})[0]


def test_the_manifest_holds_only_what_the_runtime_reads(compiled):
    manifest = compiled.manifest
    assert set(manifest) <= RUNTIME_KEYS[""]
    for key, allowed in RUNTIME_KEYS.items():
        if key and key in manifest:
            entries = manifest[key] if isinstance(manifest[key], list) else [manifest[key]]
            for entry in entries:
                assert set(entry) <= allowed, (key, set(entry) - allowed)


def test_the_tooling_section_extends_the_manifest_entry_by_entry(compiled):
    tooling = compiled.tooling
    assert [k["name"] for k in tooling["kernels"]] == [k["name"] for k in compiled.manifest["kernels"]]
    assert all(k["reason"] and k["ops"] for k in tooling["kernels"])
    assert tooling["cpu"][0]["triple"] and tooling["compiler"]["name"] == "aot"
    assert tooling["values"]["x"]["kind"] == "input"  # an object keyed by value name
    art = read_artifact(compiled.artifact)
    assert art.table[-1].name == "tooling" and art.tooling == tooling
    view = art.annotated
    assert view["kernels"][0]["symbol"] == compiled.manifest["kernels"][0]["symbol"]
    assert view["kernels"][0]["reason"] == tooling["kernels"][0]["reason"]
    assert view["cpu"][0]["arch"] == compiled.manifest["cpu"][0]["arch"] and view["cpu"][0]["triple"]


def test_annotated_keeps_the_manifests_values_and_merges_lists_of_equal_length():
    manifest = {"a": 1, "kernels": [{"name": "k0", "work": 3}], "arena": {"bytes": 8}}
    tooling = {"a": 2, "kernels": [{"name": "k0", "ops": ["add"]}], "arena": {"lower_bound_bytes": 4}, "b": [1]}
    assert annotated(manifest, tooling) == {"a": 1, "kernels": [{"name": "k0", "work": 3, "ops": ["add"]}],
                                            "arena": {"bytes": 8, "lower_bound_bytes": 4}, "b": [1]}


def test_the_runtime_never_decodes_the_tooling_section(compiled):
    """Not JSON at all, and yet the model opens and runs: only its CRC is checked."""
    blob = _repack(compiled, tooling_bytes=b"\xff not json \xff" * 100)
    np.testing.assert_array_equal(_run(blob), _run(compiled.artifact))
    art = read_artifact(blob)  # the runtime's fields are whole
    with pytest.raises(ArtifactError, match="section 'tooling': not valid UTF-8 JSON"):
        art.tooling


def test_tooling_objects_have_no_member_cap(compiled):
    """The runtime's JSON reader caps an object at 1,024 members; tables keyed by value name
    live in the tooling section, which it never parses."""
    values = {f"v{i}": {"kind": "arena", "index": 0, "offset": 64 * i, "bytes": 64} for i in range(3000)}
    blob = _repack(compiled, tooling=dict(compiled.tooling, values=values))
    np.testing.assert_array_equal(_run(blob), _run(compiled.artifact))
    assert len(read_artifact(blob).tooling["values"]) == 3000


DAMAGED = [
    (lambda t: t.update(kernels=t["kernels"][:-1]),
     r'"kernels" must be an array with one entry per manifest kernels\[\] entry \(\d+\)'),
    (lambda t: t["kernels"][0].update(name="other"), r"kernels\[0\]: name 'other' is not the manifest's"),
    (lambda t: t["kernels"][0].update(ops="dot"), r'kernels\[0\]: "ops" must be an array of strings'),
    (lambda t: t["kernels"][0].update(reason=7), r'kernels\[0\]: "reason" must be a string'),
    (lambda t: t.update(cpu=[]), r'"cpu" must be an array with one entry per manifest cpu\[\] entry \(1\)'),
    (lambda t: t.update(compiler="aot"), '"compiler" must be an object'),
    (lambda t: t["arena"].update(lower_bound_bytes=1.5), r'arena: "lower_bound_bytes" must be an integer'),
    (lambda t: t.update(values=[]), '"values" must be an object'),
    (lambda t: t["values"]["x"].update(index=True), r"values\['x'\]: \"index\" must be an integer"),
    (lambda t: t.update(memory_plan={}), '"memory_plan" must be an array'),
    (lambda t: t["memory_plan"].append({"buffer": "b9", "values": []}), r'memory_plan\[\d+\]: missing "offset"'),
    (lambda t: t["memory_plan"].append(3), r"memory_plan\[\d+\] must be an object"),
]


@pytest.mark.parametrize("edit, message", DAMAGED, ids=[m[:40] for _, m in DAMAGED])
def test_a_damaged_tooling_section_is_an_artifact_error_and_inspect_says_so(compiled, tmp_path, edit, message):
    tooling = json.loads(json.dumps(compiled.tooling))
    edit(tooling)
    bad = tmp_path / "bad.aot"
    bad.write_bytes(_repack(compiled, tooling=tooling))
    with pytest.raises(ArtifactError, match=message):
        read_artifact(bad).tooling
    result = CliRunner().invoke(main, ["inspect", str(bad)])
    assert result.exit_code == 1 and "section 'tooling'" in result.output, result.output
    assert "Traceback" not in result.output
    np.testing.assert_array_equal(_run(bad.read_bytes()), _run(compiled.artifact))


def test_the_tooling_section_has_the_manifests_json_bounds(compiled):
    deep: list = []
    for _ in range(70):
        deep = [deep]
    with pytest.raises(ArtifactError, match="section 'tooling': nesting deeper than 64"):
        read_artifact(_repack(compiled, tooling=dict(compiled.tooling, pad=deep))).tooling
    with pytest.raises(ArtifactError, match=r"section 'tooling': raw size \d+ is over the 16777216 bytes"):
        read_artifact(_repack(compiled, tooling=dict(compiled.tooling, pad=" " * (16 << 20))))
