"""Buffer donation at compile time: the pairs asked for and inferred (aot/donations.py), checked
against the model, and what the artifact records of them: the manifest's pairs, the tooling
section's how and why, and the code's own description (code_info version 2)."""
from __future__ import annotations

import numpy as np
import pytest
from llvmlite import ir
from onnx import TensorProto, helper

from aot.artifact import read_artifact
from aot.codegen.cpu.code_info import MAGIC, code_info_words
from aot.driver import compile_model
from aot.errors import ArgumentError, ArtifactError
from aot.manifest_check import check_manifest
from donation_util import cache_model
from onnx_util import make_model, vinfo

SHAPE = [1, 2, 16, 8]


def donations_of(result) -> list[tuple[str, str]]:
    m = result.manifest
    return [(m["inputs"][d["input"]]["name"], m["outputs"][d["output"]]["name"]) for d in m.get("donations", [])]


@pytest.mark.parametrize("past, present", [("past_keys", "present_keys"),
                                           ("past_key_values.0.key", "present.0.key"),
                                           ("past.1.value", "present.1.value")])
def test_pairs_are_inferred_from_the_names(past, present):
    lines: list[str] = []
    result = compile_model(cache_model(names=(past, present)), log=lines.append)
    assert donations_of(result) == [(past, present)]
    assert result.tooling["donations"][0]["inferred"] is True
    assert f"donate         {past} -> {present} (inferred from the names)" in lines
    assert any(line.startswith(f"donation       {past} -> {present}: in place") for line in lines)


def test_a_jax_result_field_is_matched_by_its_name():
    result = compile_model(cache_model(names=("past_keys", "result['present_keys']")))
    assert donations_of(result) == [("past_keys", "result['present_keys']")]


def test_no_pair_without_inference_or_with_other_names():
    assert "donations" not in compile_model(cache_model(), infer_donation=False).manifest
    assert "donations" not in compile_model(cache_model(names=("cache", "cache_out"))).manifest


def test_a_pair_asked_for_by_name():
    result = compile_model(cache_model(names=("cache", "cache_out")), donate={"cache": "cache_out"})
    assert result.manifest["donations"] == [{"input": 0, "output": 0}]
    assert result.tooling["donations"] == [{"how": "in place", "inferred": False,
                                            "why": "k3_scatter (scatter) writes only the updated windows over it"}]


def test_an_output_whose_names_do_not_agree_is_not_inferred():
    """past_len -> present_len by name, but int64 against float32: said in -v, not donated."""
    model = make_model([helper.make_node("Cast", ["past_len"], ["present_len"], to=TensorProto.FLOAT)],
                       [vinfo("past_len", TensorProto.INT64, (2,))], [vinfo("present_len", TensorProto.FLOAT, (2,))])
    lines: list[str] = []
    result = compile_model(model, log=lines.append)
    assert "donations" not in result.manifest
    assert "donate         not inferred: past_len -> present_len: the input is int64, the output float32" in lines


@pytest.mark.parametrize("donate, message", [
    ({"nope": "present_keys"}, "donate {'nope': 'present_keys'}: the model has no input 'nope' (its inputs: "
                               "'past_keys', 'position', 'new_keys', 'q')"),
    ({"past_keys": "nope"}, "the model has no output 'nope' (its outputs: 'present_keys', 'attn')"),
    ({"position": "present_keys"}, "donate {'position': 'present_keys'}: the input is int64, the output float32; "
                                   "an output can take over only an input of its own dtype and shape"),
    ({"new_keys": "present_keys"}, "the input's shape is [1, 2, 1, 8], the output's [1, 2, 16, 8]"),
    ({"past_keys": "present_keys", "q": "present_keys"}, "gives output 'present_keys' more than one input"),
    (["past_keys"], "donate must be a dict of input name -> output name"),
])
def test_a_wrong_pair_is_an_argument_error(donate, message):
    with pytest.raises(ArgumentError) as err:
        compile_model(cache_model(), donate=donate)
    assert message in str(err.value)


def test_the_code_description_carries_the_pairs_only_where_there_are_any():
    """Version 1 without donations (the table as before), version 2 with: the pairs after the kernels."""
    module = ir.Module()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), []), name="f")
    plain = compile_model(cache_model(), infer_donation=False).plan
    donated = compile_model(cache_model()).plan
    kernels = [(fn, 1)] * len(plain.kernels)
    words = [c.constant for c in code_info_words(plain, fn, None, kernels)]
    assert words[:2] == [MAGIC, 1] and len(words) == 12 + 4 + 2 + 2 * len(kernels)
    kernels = [(fn, 1)] * len(donated.kernels)
    words = [c.constant for c in code_info_words(donated, fn, None, kernels)]
    assert words[:2] == [MAGIC, 2] and words[-3:] == [1, 0, 0]


def test_the_manifest_check_refuses_pairs_the_runtime_would():
    manifest = read_artifact(compile_model(cache_model()).artifact).manifest
    sections = {"weights": manifest["weights"]["bytes"], manifest["cpu"][0]["section"]: 1}
    check_manifest(manifest, sections)
    for pairs, needle in (({"input": 1, "output": 0}, "input 'position' and output 'present_keys' differ"),
                          ({"input": 4, "output": 0}, "donations[0]: \"input\" must be an integer in [0, 3]"),
                          ({"input": 0}, "donations[0]: missing \"output\""),
                          ("x", "donations[0]: must be an object")):
        with pytest.raises(ArtifactError) as err:
            check_manifest({**manifest, "donations": [pairs]}, sections)
        assert needle in str(err.value)
    twice = [{"input": 0, "output": 0}, {"input": 0, "output": 0}]
    with pytest.raises(ArtifactError, match="is in donations\\[0\\] too"):
        check_manifest({**manifest, "donations": twice}, sections)


def test_a_model_without_donations_compiles_as_before():
    """The same plan and code whether or not inference runs, where no name implies a pair."""
    model = cache_model(names=("cache", "cache_out"))
    a, b = compile_model(model), compile_model(model, infer_donation=False)
    assert a.artifact == b.artifact
    assert np.array_equal(np.frombuffer(a.plan.weights, np.uint8), np.frombuffer(b.plan.weights, np.uint8))
