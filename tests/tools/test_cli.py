"""The command line: aot-compile, aot inspect, aot run."""
import json

import numpy as np
import pytest
from click.testing import CliRunner

from aot.artifact import FORMAT_VERSION
from aot.cli import compile_main, main, parse_shape_option
import make_samples


@pytest.fixture(scope="module")
def lenet(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    paths = make_samples.write_samples(out)
    artifact = out / "lenet.aot"
    result = CliRunner().invoke(compile_main, [str(paths["lenet"]), "-o", str(artifact), "--explain", "fusion"])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "root because" in result.output
    return paths["lenet"], artifact


def test_inspect_text_and_json(lenet):
    _, artifact = lenet
    text = CliRunner().invoke(main, ["inspect", str(artifact)])
    assert text.exit_code == 0 and "kernels" in text.output and "weights" in text.output
    raw = CliRunner().invoke(main, ["inspect", "--json", str(artifact)])
    info = json.loads(raw.output)
    assert info["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 1, 28, 28]}]
    assert info["arena_bytes"] >= info["arena_lower_bound_bytes"] > 0
    assert info["weights_bytes"] > 0 and info["kernels"]
    assert set(s["name"] for s in info["sections"]) >= {"manifest", "weights"}


def test_inspect_extract(lenet, tmp_path):
    _, artifact = lenet
    result = CliRunner().invoke(main, ["inspect", str(artifact), "--extract", str(tmp_path / "x")])
    assert result.exit_code == 0
    names = sorted(p.name for p in (tmp_path / "x").iterdir())
    assert "manifest.json" in names and "tooling.json" in names and "weights.bin" in names
    assert any(n.endswith(".so") for n in names)
    assert json.loads((tmp_path / "x" / "manifest.json").read_text())["format_version"] == FORMAT_VERSION
    assert "reason" in json.loads((tmp_path / "x" / "tooling.json").read_text())["kernels"][0]


def test_run_writes_outputs(lenet, tmp_path):
    model, artifact = lenet
    x = model.with_suffix(".input.npy")
    result = CliRunner().invoke(main, ["run", str(artifact), "--input", f"x={x}", "--output-dir", str(tmp_path), "--repeat", "3"])
    assert result.exit_code == 0, result.output
    assert "latency median" in result.output
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 10) and abs(float(y.sum()) - 1.0) < 1e-5  # softmax output


def test_dump_ir(lenet, tmp_path):
    model, _ = lenet
    result = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "m.aot"), "--dump-ir", str(tmp_path / "dump"), "-v"])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert names[0] == "00-import.ir" and "cpu.ll" in names and any(n.endswith("-fusion.txt") for n in names)
    assert "const-fold" in result.output  # -v timing lines (stderr is mixed in by CliRunner)


def test_errors_exit_nonzero_with_a_message(tmp_path):
    missing = CliRunner().invoke(compile_main, [str(tmp_path / "none.onnx")])
    assert missing.exit_code == 1 and "error:" in missing.output and "no such file" in missing.output
    bad = tmp_path / "bad.aot"
    bad.write_bytes(b"AOTMODEL" + b"\0" * 10)
    broken = CliRunner().invoke(main, ["inspect", str(bad)])
    assert broken.exit_code == 1 and "error:" in broken.output


def test_shape_option():
    assert parse_shape_option(("x=1x3x224x224", "mask=")) == {"x": (1, 3, 224, 224), "mask": ()}
    with pytest.raises(Exception, match="NAME=DIMS"):
        parse_shape_option(("x=1xfoo",))


def test_bind_fixes_an_input_to_a_constant(tmp_path):
    from onnx import TensorProto, helper, save

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = tmp_path / "reshape.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    unbound = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "a.aot")])
    assert unbound.exit_code == 1 and "shape" in unbound.output
    np.save(tmp_path / "shape.npy", np.array([3, 2], np.int64))
    bound = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "b.aot"), "--bind", f"shape={tmp_path / 'shape.npy'}"])
    assert bound.exit_code == 0, bound.output
    info = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(tmp_path / "b.aot")]).output)
    assert info["inputs"] == [{"name": "x", "dtype": "float32", "shape": [2, 3]}]
    assert info["outputs"][0]["shape"] == [3, 2]
    np.save(tmp_path / "wrong.npy", np.array([3, 2], np.int32))
    wrong = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "c.aot"), "--bind", f"shape={tmp_path / 'wrong.npy'}"])
    assert wrong.exit_code == 1 and "int64" in wrong.output
    unknown = CliRunner().invoke(compile_main, [str(model), "-o", str(tmp_path / "d.aot"), "--bind", f"nope={tmp_path / 'shape.npy'}"])
    assert unknown.exit_code == 1 and "'nope'" in unknown.output


def test_names_and_exporter_dims_through_compile_inspect_and_run(tmp_path):
    """`--shape`, `--input` and `--output-dir` take the model's own names: '/', '=', spaces, non-ASCII."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, save

    data, scale, probs = "gpu_0/data_0", "scale=1 é", "gpu_0/softmax_1"
    graph = helper.make_graph(
        [helper.make_node("Mul", [data, scale], ["m"]), helper.make_node("Softmax", ["m"], [probs])], "g",
        [helper.make_tensor_value_info(data, TensorProto.FLOAT, [-1, 5]),  # an older Paddle export's batch dim
         helper.make_tensor_value_info(scale, TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(probs, TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    save(model, tmp_path / "m.onnx")
    artifact = tmp_path / "m.aot"
    dynamic = CliRunner().invoke(compile_main, [str(tmp_path / "m.onnx"), "-o", str(artifact)])
    assert dynamic.exit_code == 1 and "input 'gpu_0/data_0' dim 0 (dim_value -1) is dynamic" in dynamic.output
    assert "--shape gpu_0/data_0=1x5" in dynamic.output
    compiled = CliRunner().invoke(compile_main, [str(tmp_path / "m.onnx"), "-o", str(artifact), "--shape", f"{data}=3x5"])
    assert compiled.exit_code == 0, compiled.output

    info = json.loads(CliRunner().invoke(main, ["inspect", "--json", str(artifact)]).output)
    assert [t["name"] for t in info["inputs"]] == [data, scale] and info["outputs"][0]["name"] == probs
    text = CliRunner().invoke(main, ["inspect", str(artifact)]).output
    assert f'inputs:  {data}: float32[3, 5], "{scale}": float32[1]' in text

    feeds = {data: np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32), scale: np.array([2.0], np.float32)}
    np.save(tmp_path / "data.npy", feeds[data])
    np.save(tmp_path / "scale.npy", feeds[scale])
    ran = CliRunner().invoke(main, ["run", str(artifact), "--input", f"{data}={tmp_path / 'data.npy'}",
                                    "--input", f"{scale}={tmp_path / 'scale.npy'}", "--output-dir", str(tmp_path / "out")])
    assert ran.exit_code == 0, ran.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_0%2Fsoftmax_1.npy"]  # one file, in the dir
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "gpu_0%2Fsoftmax_1.npy"), want, rtol=1e-5, atol=1e-6)


def test_weights_codec_none_stores_the_weights_as_they_are(lenet, tmp_path):
    from aot.artifact import parse_table
    source = lenet[0]
    plain = tmp_path / "plain.aot"
    result = CliRunner().invoke(compile_main, [str(source), "-o", str(plain), "--weights-codec", "none"])
    assert result.exit_code == 0, result.output
    codecs = {s.name: s.codec for s in parse_table(plain.read_bytes())}
    assert codecs["weights"] == "none"
    refused = CliRunner().invoke(compile_main, [str(source), "--emit", "c", "-o", str(tmp_path / "c"),
                                                "--weights-codec", "none"])
    assert refused.exit_code != 0 and "--weights-codec none does not go with --emit c" in refused.output
