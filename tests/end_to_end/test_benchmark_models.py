"""Each benchmark model (models/make_benchmarks.py, torch.onnx exports) compiles and matches onnxruntime.

Skipped cleanly where torch is not installed (it is a tool for making models,
not a dependency of aot). Models are generated at test time into a temporary
directory, once per session.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

pytestmark = pytest.mark.slow  # torch exports and whole-model compiles

import make_benchmarks  # noqa: E402

import aot  # noqa: E402
from aot.verify import format_report, verify  # noqa: E402


@pytest.fixture(scope="session")
def bench_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("benchmarks")


@pytest.mark.parametrize("name", make_benchmarks.MODELS)
def test_aot_verify_passes_on_benchmark_model(name: str, bench_dir: Path) -> None:
    # aot verify: compile, run beside onnxruntime on the model's own input, every output in tolerance
    model = make_benchmarks.make(name, bench_dir)
    x = np.load(bench_dir / f"{name}.input.npy")
    report = verify(model, inputs={"x": x})
    assert report.reference == "onnxruntime"
    assert report.ok, format_report(report)


def test_benchmark_models_are_seeded(bench_dir: Path) -> None:
    first = make_benchmarks.make("lenet", bench_dir / "a")
    second = make_benchmarks.make("lenet", bench_dir / "b")
    assert first.read_bytes() == second.read_bytes()


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "bert_mini", "gpt_block"])
def test_dynamo_exports_match_onnxruntime(name: str, tmp_path: Path) -> None:
    """torch's newer exporter writes other graphs (opset 20, LayerNormalization, Split): they compile too."""
    pytest.importorskip("onnxscript")
    model = make_benchmarks.make(name, tmp_path, dynamo=True)
    x = np.load(tmp_path / f"{name}.input.npy")
    artifact = tmp_path / f"{name}.aot"
    aot.compile(model, artifact)
    (ours,) = aot.Session(artifact).run(None, {"x": x})
    (theirs,) = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4)
