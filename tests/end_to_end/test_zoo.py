"""A few of the transformers zoo's models (models/make_zoo.py) compile and match onnxruntime.

The smallest of each kind: a BERT encoder on token ids (its embedding gathers from a
30,522-row table), a GPT-2 decode step with a key/value cache, a CLIP vision
transformer, and wav2vec2 on raw audio. Skipped cleanly where torch, transformers
or onnxscript (torch's default exporter) is not installed: they make models, aot
does not depend on them. benchmarks/bench_zoo.py runs the whole zoo.
"""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.slow  # transformers exports and whole-model compiles

import make_zoo  # noqa: E402

from aot.verify import format_report, verify  # noqa: E402

MODELS = ("bert", "gpt2_decode", "clip_vision", "wav2vec2")


@pytest.fixture(scope="module")
def zoo_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.mark.parametrize("name", MODELS)
def test_zoo_model_matches_onnxruntime(name: str, zoo_dir: Path) -> None:
    # aot verify: compile, run beside onnxruntime on the model's own inputs, every output in tolerance
    model = make_zoo.make(name, zoo_dir)
    report = verify(model, inputs=make_zoo.load_inputs(model))
    assert report.reference == "onnxruntime"
    assert [o.name for o in report.outputs] == list(make_zoo.ZOO[name].outputs)
    assert report.ok, format_report(report)


@pytest.mark.parametrize("name", MODELS)
def test_no_parameter_is_left_constant(name: str) -> None:
    # HF initialises norm scales to 1 and biases to 0: a compiler that drops one would still match
    model, _ = make_zoo.build(name)
    constant = [n for n, p in model.named_parameters() if p.numel() > 1 and bool((p == p.reshape(-1)[0]).all())]
    assert constant == []


def test_gpt2_decode_step_inputs_are_its_own_cache() -> None:
    # the past keys/values are what GPT-2 computed for the prompt: 31 positions, 1 new token
    _, feeds = make_zoo.build("gpt2_decode")
    assert feeds["input_ids"].shape == (1, 1)
    assert feeds["attention_mask"].shape == (1, make_zoo.TEXT_LEN)
    assert feeds["past_key_0"].shape == (1, 4, make_zoo.TEXT_LEN - 1, 32)
    assert float(abs(feeds["past_value_1"]).max()) > 0


def test_zoo_exports_are_seeded(tmp_path: Path) -> None:
    first = make_zoo.make("distilbert", tmp_path / "a")
    second = make_zoo.make("distilbert", tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    assert make_zoo.inputs_path(first).read_bytes() == make_zoo.inputs_path(second).read_bytes()
