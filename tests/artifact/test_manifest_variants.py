"""manifest_check on the CPU variants' fields (packaging/FORMAT.md, `cpu`): each entry's name and
x86_features, and its own kernels, one per top-level kernel, as runtime_c/src/model.c reads them."""
from __future__ import annotations

import copy

import pytest
from onnx import TensorProto, helper

from aot.driver import compile_model
from aot.errors import ArtifactError
from aot.manifest_check import check_manifest


@pytest.fixture(scope="module")
def compiled():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "two", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    result = compile_model(model, cpu="x86-64-v4,x86-64-v3")
    from aot.artifact import read_artifact

    sizes = {s.name: s.raw_size for s in read_artifact(result.artifact).table}
    return result.manifest, sizes


def _v3_kernels(m):
    return m["cpu"][1]["kernels"]


EDITS = [
    ("kernels null", lambda m: m["cpu"][1].update(kernels=7), r'cpu\[1\]: "kernels" must be an array with one entry per kernel \(1\)'),
    ("a kernel less", lambda m: _v3_kernels(m).pop(), r"one entry per kernel \(1\)"),
    ("a kernel more", lambda m: _v3_kernels(m).append(dict(_v3_kernels(m)[0])), r"one entry per kernel \(1\)"),
    ("not an object", lambda m: _v3_kernels(m).__setitem__(0, 1), r"cpu\[1\]\.kernels\[0\]: must be an object"),
    ("no symbol", lambda m: _v3_kernels(m)[0].pop("symbol"), r'cpu\[1\]\.kernels\[0\]: missing "symbol"'),
    ("no work", lambda m: _v3_kernels(m)[0].pop("work"), r'cpu\[1\]\.kernels\[0\]: missing "work"'),
    ("work too large", lambda m: _v3_kernels(m)[0].update(work=2**61), r'"work" must be an integer in'),
    ("cost negative", lambda m: _v3_kernels(m)[0].update(cost_ns=-1), r'"cost_ns" must be an integer'),
    ("cpu name not a string", lambda m: m["cpu"][0].update(cpu=4), r'cpu\[0\]: "cpu" must be a string'),
    ("features not a list", lambda m: m["cpu"][0].update(x86_features="avx2"), r'cpu\[0\]: "x86_features" must be an array'),
    ("an empty feature", lambda m: m["cpu"][1].update(x86_features=[""]), r'cpu\[1\]: "x86_features" must be an array'),
    ("257 features", lambda m: m["cpu"][1].update(x86_features=["avx"] * 257), r'at most 256'),
    ("the second section missing", lambda m: m["cpu"][1].update(section="cpu.nope"), r"section 'cpu.nope': missing"),
    # the top-level kernels give the first variant's code fields: an entry without its own needs them
    ("top-level symbol missing", lambda m: m["kernels"][0].pop("symbol"), r'kernels\[0\]: missing "symbol"'),
]


@pytest.mark.parametrize("what, edit, message", EDITS, ids=[e[0] for e in EDITS])
def test_a_damaged_variant_is_an_artifact_error(compiled, what, edit, message):
    manifest, sizes = compiled
    edited = copy.deepcopy(manifest)
    edit(edited)
    with pytest.raises(ArtifactError, match=message):
        check_manifest(edited, sizes)


def test_the_compiled_variants_pass_and_top_level_names_suffice_where_every_variant_lists_its_kernels(compiled):
    manifest, sizes = compiled
    check_manifest(manifest, sizes)
    edited = copy.deepcopy(manifest)
    edited["cpu"][0]["kernels"] = [{k: v for k, v in kernel.items() if k != "name"} for kernel in edited["kernels"]]
    edited["kernels"] = [{"name": kernel["name"]} for kernel in edited["kernels"]]
    check_manifest(edited, sizes)
