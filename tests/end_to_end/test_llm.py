"""llama_tiny (models/make_llm.py, the small config) compiled by aot, against onnxruntime and JAX.

aot compiles the torch export with --shape twice (prefill T=8, decode T=1) and the JAX
StableHLO files (one per shape); each engine then runs its own greedy generation:
a prefill of an 8-token prompt into an empty cache, then 8 decode steps, each feeding
the step's present keys/values back as past and the argmax as the next token. Every
step's logits must match onnxruntime's and JAX's (rtol 1e-3 of the logits' scale) and
the generated tokens must be the same. torch, onnxscript and JAX make the models; aot
does not depend on them, so the module skips where they are missing.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")
pytest.importorskip("jax")

import make_llm  # noqa: E402

import aot  # noqa: E402
from aot.importers.onnx.lower import supported_ops  # noqa: E402

CFG = make_llm.SMALL
PROMPT = 8
STEPS = 8
RTOL = 1e-3

Step = make_llm.Step


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("llm")
    make_llm.write_all(out, CFG, [(1, PROMPT), (1, 1)])
    return out


@pytest.fixture(scope="module")
def weights(models: Path) -> dict[str, np.ndarray]:
    return make_llm.load_weights(models / f"{make_llm.NAME}.npz")[1]


def _compile(model: Path, tokens: int, out: Path) -> aot.Session:
    shapes = None
    if model.suffix == ".onnx":  # dynamic batch and length: --shape picks the specialization
        cache = CFG.cache_shape(1)
        shapes = {"input_ids": (1, tokens), "past_keys": cache, "past_values": cache}
    artifact = out / f"{model.stem}_t{tokens}.aot"
    aot.compile(model, artifact, shapes=shapes)
    return aot.Session(artifact)


def _by_length(prefill: aot.Session, decode: aot.Session) -> Step:
    def step(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        session = prefill if feeds["input_ids"].shape[1] == PROMPT else decode
        return session.run(None, dict(feeds))  # outputs in the model's order: logits, keys, values
    return step


def _ort(path: Path) -> Step:
    session = make_llm.ort_session(path)
    return lambda feeds: session.run(list(make_llm.OUTPUTS), dict(feeds))


def _generate(step: Step) -> tuple[list[np.ndarray], list[int]]:
    return make_llm.generate(CFG, step, PROMPT, STEPS)


def _assert_same_generation(got: tuple[list[np.ndarray], list[int]], want: tuple[list[np.ndarray], list[int]],
                            peer: str) -> None:
    for i, (a, b) in enumerate(zip(got[0], want[0])):
        err = make_llm.max_scaled_error(a, b)
        assert err <= RTOL, f"step {i}: logits differ from {peer}'s by {err:.2e} of their scale"
    assert got[1] == want[1], f"greedy tokens differ from {peer}'s"


@pytest.fixture(scope="module")
def peers(models: Path, weights: dict[str, np.ndarray]) -> dict[str, tuple[list[np.ndarray], list[int]]]:
    return {"onnxruntime": _generate(_ort(models / f"{make_llm.NAME}.onnx")),
            "jax": _generate(make_llm.jax_engine(CFG, weights))}


def test_exports_agree(models: Path, weights: dict[str, np.ndarray]) -> None:
    # torch (opset 20 and 23), the hand-written opset-23 graph and JAX: one decoder
    assert make_llm.check_exports(models, CFG, weights) == []


def test_generation_is_not_degenerate(peers) -> None:
    # a model that repeats one token would hide a broken cache or mask
    _, tokens = peers["onnxruntime"]
    assert len(set(tokens)) > 2, tokens


@pytest.fixture(scope="module")
def onnx_sessions(models: Path, tmp_path_factory) -> tuple[aot.Session, aot.Session]:
    """The torch export compiled twice: (prefill, decode)."""
    model, out = models / f"{make_llm.NAME}.onnx", tmp_path_factory.mktemp("onnx_aot")
    return _compile(model, PROMPT, out), _compile(model, 1, out)


def test_onnx_prefill_and_decode_match(onnx_sessions, peers) -> None:
    ours = _generate(_by_length(*onnx_sessions))
    for peer, theirs in peers.items():
        _assert_same_generation(ours, theirs, peer)


def test_stablehlo_prefill_and_decode_match(models: Path, peers, tmp_path: Path) -> None:
    prefill = _compile(models / make_llm.mlir_name(1, PROMPT), PROMPT, tmp_path)
    decode = _compile(models / make_llm.mlir_name(1, 1), 1, tmp_path)
    ours = _generate(_by_length(prefill, decode))
    for peer, theirs in peers.items():
        _assert_same_generation(ours, theirs, peer)


def _check_decode_over_stale_cache(session: aot.Session, model: Path) -> None:
    # slots past the position hold junk the mask must ignore; slots before it, earlier tokens
    feeds = make_llm.make_inputs(CFG, 1, 1, CFG.max_len // 2, seed=9)
    got = session.run(None, feeds)
    want = _ort(model)(feeds)
    for name, a, b in zip(make_llm.OUTPUTS, got, want):
        err = make_llm.max_scaled_error(a, b)
        assert err <= RTOL, f"{name} differs from onnxruntime's by {err:.2e} of its scale"


def test_decode_over_stale_cache_matches_onnxruntime(models: Path, onnx_sessions) -> None:
    _check_decode_over_stale_cache(onnx_sessions[1], models / f"{make_llm.NAME}.onnx")


@pytest.mark.slow
def test_opset23_torch_export_matches_onnxruntime(models: Path, tmp_path: Path) -> None:
    # torch's exporter at opset 23: RMSNormalization and Attention (GQA, boolean mask) nodes
    model = models / f"{make_llm.NAME}_torch23.onnx"
    _check_decode_over_stale_cache(_compile(model, 1, tmp_path), model)


@pytest.mark.slow
@pytest.mark.skipif("RotaryEmbedding" not in supported_ops(), reason="aot does not lower RotaryEmbedding yet")
def test_opset23_graph_matches_onnxruntime(models: Path, tmp_path: Path) -> None:
    # RMSNormalization, RotaryEmbedding (position ids, rotate-half) and Attention (GQA, boolean mask)
    model = models / f"{make_llm.NAME}_op23.onnx"
    _check_decode_over_stale_cache(_compile(model, 1, tmp_path), model)
