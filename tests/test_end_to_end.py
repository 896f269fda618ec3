"""ONNX model -> aot-compile -> artifact -> C runtime, checked against onnxruntime and the interpreter."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import aot
from aot.driver import import_model
from aot.errors import ArtifactError, ModelError, RunError, UnsupportedError
from aot.interpreter import interpret
from targets_util import host_runs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
import make_samples  # noqa: E402

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
def test_avx2_build_packs_eight_lanes_and_matches_onnxruntime(compiled, name, tmp_path):
    from aot.codegen.cpu import CpuTarget
    from aot.driver import compile_model

    paths, _ = compiled
    result = compile_model(paths[name], tmp_path / f"{name}.aot", cpu="haswell")
    packed = [n for n in result.plan.graph.nodes if n.op in ("dot", "conv") and n.inputs[1].type.rank in (3, 5)]
    assert packed and all(n.inputs[1].type.shape[-1] == 8 for n in packed)
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
