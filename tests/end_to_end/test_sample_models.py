"""Sample models (models/make_samples.py): import, run through the interpreter, match onnxruntime."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from aot.importers.onnx import import_onnx
from aot.interpreter import interpret
import make_samples as samples

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    return samples.write_samples(tmp_path_factory.mktemp("samples"))


@pytest.mark.parametrize("name", ["mlp", "lenet", "lenet_bn"])
def test_sample_matches_onnxruntime(name, sample_dir):
    path = sample_dir[name]
    x = np.load(path.with_name(f"{name}.input.npy"))
    graph = import_onnx(path)
    assert [v.name for v in graph.inputs] == ["x"] and graph.output_names == ["y"]
    (ours,) = interpret(graph, {"x": x})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"x": x})
    assert ours.shape == theirs.shape == (1, 10)
    scale = float(np.max(np.abs(theirs)))
    assert 1e-3 < scale < 1e3, f"activations should stay O(1), output scale is {scale}"
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * scale)


def test_samples_are_deterministic(tmp_path):
    first = samples.write_samples(tmp_path / "a")
    second = samples.write_samples(tmp_path / "b")
    for name in first:
        assert first[name].read_bytes() == second[name].read_bytes()
        assert (tmp_path / "a" / f"{name}.input.npy").read_bytes() == (tmp_path / "b" / f"{name}.input.npy").read_bytes()


def test_lenet_bn_folds_batch_norm_into_scale_and_shift():
    graph = import_onnx(samples.make_sample("lenet_bn"))
    ops = [n.op for n in graph.nodes]
    assert ops.count("conv") == 2 and ops.count("reduce_window") == 2
    assert "rsqrt" not in ops and "sqrt" not in ops  # scale = gamma / sqrt(var + eps) computed at import


def test_unknown_sample_name():
    with pytest.raises(KeyError, match="unknown sample model 'resnet'"):
        samples.make_sample("resnet")


LIGHT_DIR = Path(importlib.util.find_spec("onnx").origin).parent / "backend" / "test" / "data" / "light"
# vgg19 is left out only for time (its 550 MB of weights take about 20 s to run through the interpreter)
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
                "zfnet512"]


def _light_model(name: str) -> Path:
    path = LIGHT_DIR / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not shipped with this onnx")
    return path


def _light_feeds_and_stored_output(path: Path, session) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The input onnx's backend runner feeds these models (arange / n, by the model's own input name), and the
    output it stores for that input beside the model."""
    import onnx
    from onnx import numpy_helper

    (info,) = session.get_inputs()
    n = int(np.prod(info.shape))
    x = (np.arange(n).reshape(info.shape) / n).astype(np.float32)
    stored = numpy_helper.to_array(onnx.load_tensor(str(path.with_name(f"{path.stem}_output_0.pb"))))
    return {info.name: x}, stored


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_onnx_light_model_topologies(name):
    """The real-topology models shipped with onnx import completely, keep their own input and output names
    ('gpu_0/data_0'), and, fed by those names, match onnxruntime and the output stored beside them."""
    path = _light_model(name)
    graph = import_onnx(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert graph.input_names == [i.name for i in session.get_inputs()]
    assert graph.output_names == [o.name for o in session.get_outputs()]
    feeds, stored = _light_feeds_and_stored_output(path, session)
    by_value = {value.name: feeds[name] for value, name in zip(graph.inputs, graph.input_names)}
    (ours,) = interpret(graph, by_value)
    (theirs,) = session.run(None, feeds)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ours, stored, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_onnx_light_model_compiled_runs_by_its_own_names():
    """zfnet512 (the quickest to compile of the three whose names hold '/') through the artifact and the C runtime."""
    import aot

    path = _light_model("zfnet512")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds, stored = _light_feeds_and_stored_output(path, session)
    ours = aot.Session(aot.compile(path).artifact)
    assert [i.name for i in ours.get_inputs()] == ["gpu_0/data_0"] and [o.name for o in ours.get_outputs()] == ["gpu_0/softmax_1"]
    (got,) = ours.run(["gpu_0/softmax_1"], feeds)
    (theirs,) = session.run(None, feeds)
    np.testing.assert_allclose(got, theirs, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got, stored, rtol=1e-4, atol=1e-6)
