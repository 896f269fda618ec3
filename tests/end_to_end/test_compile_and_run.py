"""ONNX model -> aot-compile -> artifact -> C runtime, checked against onnxruntime and the interpreter."""
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import aot
from aot.driver import import_model
from aot.errors import ArtifactError, ModelError, RunError, UnsupportedError
from aot.interpreter import interpret
import make_samples
from paths_util import ROOT
from targets_util import host_runs

ort = pytest.importorskip("onnxruntime")

SAMPLES = ["mlp", "lenet", "lenet_bn"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("samples")
    paths = make_samples.write_samples(out)
    artifacts = {}
    for name in SAMPLES:
        artifacts[name] = out / f"{name}.aot"
        aot.compile(paths[name], artifacts[name])
    return paths, artifacts


def reference_outputs(model_path: Path, feeds: dict) -> list:
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    scale = max(1.0, float(np.max(np.abs(want))))
    assert got.shape == want.shape and got.dtype == want.dtype
    assert float(np.max(np.abs(got - want))) <= 1e-4 * scale


@pytest.mark.parametrize("name", SAMPLES)
def test_matches_onnxruntime_and_interpreter(compiled, name):
    paths, artifacts = compiled
    x = np.load(paths[name].with_suffix(".input.npy"))
    session = aot.Session(artifacts[name])
    (info,) = session.get_inputs()
    assert info.name == "x" and info.shape == list(x.shape) and info.dtype == np.float32
    got = session.run(None, {"x": x})
    want = reference_outputs(paths[name], {"x": x})
    graph, _, _ = import_model(paths[name])
    oracle = interpret(graph, {"x": x})
    for g, w, o in zip(got, want, oracle):
        assert_close(g, w)
        assert_close(g, o.astype(g.dtype))


@pytest.mark.parametrize("name", ["mlp", "lenet_bn"])
def test_avx2_build_packs_sixteen_lanes_and_matches_onnxruntime(compiled, name, tmp_path):
    """The layout is 16 lanes on every target (two ymm registers on AVX2), so CPU variants
    share one weights section; the AVX2 code reads it and matches onnxruntime."""
    from aot.codegen.cpu import CpuTarget
    from aot.driver import compile_model

    paths, _ = compiled
    result = compile_model(paths[name], tmp_path / f"{name}.aot", cpu="haswell")
    packed = [n for n in result.plan.graph.nodes if n.op in ("packed_dot", "packed_conv")]
    assert packed and all(n.attrs["lanes"] == 16 and n.inputs[1].type.shape[-1] == 16 for n in packed)
    if not host_runs(CpuTarget.from_name("haswell")):
        pytest.skip("this host cannot run AVX2 code")
    x = np.load(paths[name].with_suffix(".input.npy"))
    got = aot.Session(tmp_path / f"{name}.aot").run(None, {"x": x})
    for g, w in zip(got, reference_outputs(paths[name], {"x": x})):
        assert_close(g, w)


def spp_block(channels: int = 48, size: int = 13):
    """YOLOv5's SPP block (issue 9): x, three max pools of x (5, 9, 13; stride 1, same padding),
    concat, 1x1 conv. Its AVX2 build once differed from onnxruntime by 1e19."""
    from onnx import numpy_helper

    rng = np.random.default_rng(0)
    weight = (rng.standard_normal((channels, 4 * channels, 1, 1)) * 0.05).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], [f"p{k}"], kernel_shape=[k, k], strides=[1, 1], pads=[k // 2] * 4)
             for k in (5, 9, 13)]
    nodes.append(helper.make_node("Concat", ["x", "p5", "p9", "p13"], ["c"], axis=1))
    nodes.append(helper.make_node("Conv", ["c", "w"], ["y"]))
    graph = helper.make_graph(nodes, "spp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


@pytest.mark.parametrize("cpu", ["native", "haswell", "x86-64-v2"])
def test_spp_block_matches_onnxruntime_on_every_instruction_set(cpu, tmp_path):
    from aot.codegen.cpu import CpuTarget

    if cpu != "native" and not host_runs(CpuTarget.from_name(cpu)):
        pytest.skip(f"this host cannot run {cpu} code")
    model = spp_block()
    path = tmp_path / "spp.onnx"
    path.write_bytes(model.SerializeToString())
    aot.compile(path, tmp_path / "spp.aot", cpu=cpu)
    x = np.random.default_rng(1).standard_normal((1, 48, 13, 13)).astype(np.float32)
    (got,) = aot.Session(tmp_path / "spp.aot").run(None, {"x": x})
    (want,) = reference_outputs(path, {"x": x})
    assert_close(got, want)


def test_threads_give_the_same_result(compiled):
    paths, artifacts = compiled
    x = np.load(paths["lenet"].with_suffix(".input.npy"))
    one = aot.Session(artifacts["lenet"]).run(None, {"x": x})[0]
    four = aot.Session(artifacts["lenet"], threads=4).run(None, {"x": x})[0]
    np.testing.assert_array_equal(one, four)


def test_compile_is_deterministic(compiled, tmp_path):
    paths, artifacts = compiled
    again = tmp_path / "again.aot"
    aot.compile(paths["lenet"], again)
    assert again.read_bytes() == artifacts["lenet"].read_bytes()


def test_artifact_is_not_much_bigger_than_its_weights(compiled):
    _, artifacts = compiled
    info = aot.Session(artifacts["mlp"])
    assert info is not None
    from aot.inspect import describe

    d = describe(artifacts["mlp"])
    assert d["file_bytes"] <= d["weights_bytes"] * 1.05 + 64 * 1024


@pytest.fixture(scope="module")
def c_runner(tmp_path_factory):
    """The example C program, linked statically against libaot_runtime.a: no Python on its path."""
    if subprocess.run(["sh", "-c", "command -v cc"], capture_output=True).returncode:
        pytest.skip("no C compiler")
    build = tmp_path_factory.mktemp("cbuild")
    subprocess.run(["make", "-s", "-C", str(ROOT / "runtime_c"), f"BUILD_DIR={build}"], check=True)
    exe = build / "run_model"
    subprocess.run(
        ["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'runtime_c/include'}",
         str(ROOT / "runtime_c/examples/run_model.c"), str(build / "libaot_runtime.a"),
         "-lzstd", "-lpthread", "-ldl", "-o", str(exe)],
        check=True,
    )
    return exe


@pytest.mark.parametrize("name", ["mlp", "lenet"])
def test_c_program_matches_onnxruntime(compiled, c_runner, tmp_path, name):
    paths, artifacts = compiled
    x = np.load(paths[name].with_suffix(".input.npy"))
    x_file = tmp_path / "x.bin"
    x.tofile(x_file)
    y_file = tmp_path / "y.bin"
    result = subprocess.run([str(c_runner), str(artifacts[name]), "-i", str(x_file), "-o", str(y_file)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    want = reference_outputs(paths[name], {"x": x})[0]
    got = np.fromfile(y_file, dtype=np.float32).reshape(want.shape)
    assert_close(got, want)


# --- bad input: a clear error, never a crash ---------------------------------

def test_missing_model_file(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        aot.compile(tmp_path / "nope.onnx", tmp_path / "x.aot")


def test_non_onnx_file(tmp_path):
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"\x00\xffthis is not a protobuf" * 10)
    with pytest.raises(ModelError, match="bogus.onnx"):
        aot.compile(bogus, tmp_path / "x.aot")
    assert not (tmp_path / "x.aot").exists()


def test_every_unsupported_op_is_listed(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("NonZero", ["a"], ["b"], name="nz_1"),
        helper.make_node("Unique", ["b"], ["y"], name="uniq_2"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedError) as info:
        aot.compile(model, tmp_path / "x.aot")
    message = str(info.value)
    assert "nz_1" in message and "NonZero" in message and "uniq_2" in message and "Unique" in message


def test_wrong_input_shape_and_dtype_at_run_time(compiled):
    _, artifacts = compiled
    session = aot.Session(artifacts["lenet"])
    with pytest.raises(RunError, match="'x'.*shape"):
        session.run(None, {"x": np.zeros((1, 1, 28, 27), np.float32)})
    with pytest.raises(RunError, match="'x'.*(dtype|float)"):
        session.run(None, {"x": np.zeros((1, 1, 28, 28), np.float64)})
    with pytest.raises(RunError, match="x"):
        session.run(None, {})


def test_truncated_artifacts(compiled, tmp_path):
    _, artifacts = compiled
    data = artifacts["lenet"].read_bytes()
    for cut in [0, 7, 63, 64, 100, 200, len(data) // 2, len(data) - 1]:
        damaged = tmp_path / f"cut{cut}.aot"
        damaged.write_bytes(data[:cut])
        with pytest.raises(ArtifactError):
            aot.Session(damaged)


def test_flipped_byte_in_each_section_names_the_section(compiled, tmp_path):
    from aot.artifact import read_artifact

    _, artifacts = compiled
    data = artifacts["lenet"].read_bytes()
    for section in read_artifact(data).table:
        damaged = bytearray(data)
        damaged[section.offset + section.stored_size // 2] ^= 0x40
        path = tmp_path / f"flip-{section.name}.aot"
        path.write_bytes(bytes(damaged))
        with pytest.raises(ArtifactError, match=section.name):
            aot.Session(path)


# --- the model's own names, and dims as exporters write them -----------------

def _softmax_relu_model(inputs: list[str], outputs: list[str], dims: list) -> onnx.ModelProto:
    """outputs[0] = Softmax(inputs[0] + inputs[1]), outputs[1] = Relu(same), every tensor of `dims`."""
    nodes = [helper.make_node("Add", inputs, ["sum"]), helper.make_node("Softmax", ["sum"], [outputs[0]]),
             helper.make_node("Relu", ["sum"], [outputs[1]])]
    graph = helper.make_graph(nodes, "names", [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_names_round_trip_exactly_through_manifest_runtime_and_session(tmp_path):
    """TF and Caffe2 exports name tensors 'x:0' and 'gpu_0/data_0'; feeds and outputs keep them verbatim."""
    inputs = ["gpu_0/data_0", 'in put:0 é\t"q"\\ 😀']
    outputs = ["gpu_0/softmax_1", "out put ✓"]
    model = _softmax_relu_model(inputs, outputs, [2, 5])
    result = aot.compile(model, tmp_path / "names.aot")
    assert [t["name"] for t in result.manifest["inputs"]] == inputs
    assert [t["name"] for t in result.manifest["outputs"]] == outputs
    session = aot.Session(tmp_path / "names.aot")  # names as the C runtime reports them
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == [i.name for i in theirs.get_inputs()] == inputs
    assert [o.name for o in session.get_outputs()] == [o.name for o in theirs.get_outputs()] == outputs
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal((2, 5)).astype(np.float32) for name in inputs}
    for got, want in zip(session.run(outputs[::-1], feeds), theirs.run(outputs[::-1], feeds)):
        assert_close(got, want)
    with pytest.raises(RunError, match=r"unknown input 'gpu_0_data_0' \(model inputs: 'gpu_0/data_0'"):
        session.run(None, {"gpu_0_data_0": feeds[inputs[0]], inputs[1]: feeds[inputs[1]]})


@pytest.mark.parametrize("dynamic", [-1, None], ids=["dim_value_minus_1", "no_dim_field"])
def test_exporter_dynamic_dims_are_fixed_by_shapes_at_compile_time(dynamic, tmp_path):
    """Older Paddle exports write dim_value -1, some exporters neither field: dynamic, as onnxruntime reads them."""
    model = _softmax_relu_model(["x", "bias"], ["p", "r"], [dynamic, 3, dynamic, 192])
    with pytest.raises(UnsupportedError, match=r"input 'x' dims 0 \(.*\), 2 \(.*\) are dynamic; .*shapes=\{'x': \(1, 3, 1, 192\)"):
        aot.compile(model, tmp_path / "m.aot")
    shape = (1, 3, 48, 192)
    aot.compile(model, tmp_path / "m.aot", shapes={"x": shape, "bias": shape})
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32), "bias": rng.standard_normal(shape).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, expected in zip(aot.Session(tmp_path / "m.aot").run(None, feeds), want):
        assert_close(got, expected)


def test_zero_dim_value_is_an_empty_tensor_not_a_dynamic_dim(tmp_path):
    model = _softmax_relu_model(["x", "y"], ["p", "r"], [0, 4])
    aot.compile(model, tmp_path / "empty.aot")  # no --shape needed
    feeds = {"x": np.zeros((0, 4), np.float32), "y": np.zeros((0, 4), np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = aot.Session(tmp_path / "empty.aot").run(None, feeds)
    assert [g.shape for g in got] == [w.shape for w in want] == [(0, 4), (0, 4)]


def test_bind_an_input_declared_with_a_minus_one_dim(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("shape", TensorProto.INT64, [-1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    shape = np.array([3, 2], np.int64)
    aot.compile(model, tmp_path / "r.aot", bind={"shape": shape})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "shape": shape})
    (got,) = aot.Session(tmp_path / "r.aot").run(None, {"x": x})
    assert_close(got, want)
