"""`aot-compile --emit c` (issue 17): models as static objects and headers, linked into C programs
built with `cc -std=c11 -Wall -Wextra -Werror`, run, and compared with onnxruntime."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import make_samples as samples
from aot.cli import compile_main
from aot.codegen.cpu import CpuTarget
from aot.emit_c import emit_c
from aot.errors import ArgumentError, UnsupportedError
from emit_c_util import RUNS, build, described, driver_source, run_models
from targets_util import host_runs

RTOL = 1e-4
ROOT = Path(__file__).resolve().parents[2]


def _ort(model: onnx.ModelProto | str, feeds: dict) -> list[np.ndarray]:
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    scale = float(np.max(np.abs(want))) or 1.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale)


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory):
    return samples.write_samples(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def lenet(sample_dir, tmp_path_factory):
    """lenet through the command line, into a directory it creates."""
    out = tmp_path_factory.mktemp("lenet") / "out"
    result = CliRunner().invoke(compile_main, [str(sample_dir["lenet"]), "--emit", "c", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "entries lenet_run, lenet_run_threads" in result.output
    return out


@pytest.fixture(scope="module")
def mlp(sample_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp")
    emit_c(sample_dir["mlp"], out)
    return out


def test_lenet_matches_onnxruntime(lenet, sample_dir, tmp_path):
    assert sorted(p.name for p in lenet.iterdir()) == ["lenet.h", "lenet.json", "lenet.o", "liblenet.a"]
    info = described(lenet, "lenet")
    assert info["entry"] == "lenet_run" and [t["name"] for t in info["inputs"]] == ["x"]
    program = build(driver_source([info]), tmp_path, [lenet], [lenet / "lenet.o"])
    x = np.load(sample_dir["lenet"].with_name("lenet.input.npy"))
    (got,) = run_models(program, tmp_path, {"lenet": [x]}, {"lenet": info})["lenet"]
    _close(got, _ort(str(sample_dir["lenet"]), {"x": x})[0])


def test_two_models_link_into_one_program(lenet, mlp, sample_dir, tmp_path):
    """Both objects in one program (one from its archive): nothing but the entries is global."""
    infos = {"lenet": described(lenet, "lenet"), "mlp": described(mlp, "mlp")}
    for folder, prefix in ((lenet, "lenet"), (mlp, "mlp")):
        defined = subprocess.run(["nm", "-g", "--defined-only", str(folder / f"{prefix}.o")],
                                 capture_output=True, text=True, check=True).stdout.split()
        assert defined[1::3] == ["T", "T"] and defined[2::3] == [f"{prefix}_run", f"{prefix}_run_threads"], defined
        undefined = subprocess.run(["nm", "-u", str(folder / f"{prefix}.o")], capture_output=True, text=True,
                                   check=True).stdout.split()
        assert "aot_pool_run" in undefined and undefined[undefined.index("aot_pool_run") - 1] == "w", undefined
    program = build(driver_source(list(infos.values())), tmp_path, [lenet, mlp],
                    [lenet / "lenet.o", mlp / "libmlp.a"])
    feeds = {name: [np.load(sample_dir[name].with_name(f"{name}.input.npy"))] for name in infos}
    got = run_models(program, tmp_path, feeds, infos)
    for name in infos:
        _close(got[name][0], _ort(str(sample_dir[name]), {"x": feeds[name][0]})[0])


def _runtime_archive() -> Path:
    from aot.runtime.library import build_runtime

    return build_runtime().with_name("libaot_runtime.a")


def _big_matmul() -> onnx.ModelProto:
    """Kernels far above the pool's split threshold: a 256x512 @ 512x512 MatMul and a Relu."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((512, 512)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Relu", ["mm"], ["y"])], "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])],
        initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("threads", [0, 1, 2, 3])
def test_run_threads_on_a_runtime_pool_matches_onnxruntime(lenet, mlp, sample_dir, tmp_path, threads):
    """<prefix>_run_threads on a pool of the runtime (linked statically), or with a NULL pool and
    no runtime linked (threads 0): lenet, mlp and a model whose kernels every pool splits."""
    big = tmp_path / "big"
    emit_c(_big_matmul(), big, name="big")
    infos = {"lenet": described(lenet, "lenet"), "mlp": described(mlp, "mlp"), "big": described(big, "big")}
    libs = [str(_runtime_archive()), "-lzstd", "-lpthread", "-ldl"] if threads else []
    includes = [lenet, mlp, big] + ([ROOT / "runtime_c/include"] if threads else [])
    program = build(driver_source(list(infos.values()), threads=threads), tmp_path, includes,
                    [lenet / "lenet.o", mlp / "mlp.o", big / "big.o"], libs=libs)
    x = np.random.default_rng(2).standard_normal((256, 512)).astype(np.float32)
    feeds = {"lenet": [np.load(sample_dir["lenet"].with_name("lenet.input.npy"))],
             "mlp": [np.load(sample_dir["mlp"].with_name("mlp.input.npy"))], "big": [x]}
    got = run_models(program, tmp_path, feeds, infos)
    _close(got["lenet"][0], _ort(str(sample_dir["lenet"]), {"x": feeds["lenet"][0]})[0])
    _close(got["mlp"][0], _ort(str(sample_dir["mlp"]), {"x": feeds["mlp"][0]})[0])
    _close(got["big"][0], _ort(_big_matmul(), {"x": x})[0])


# Stands in for the runtime's aot_pool_run: runs every kernel of the program the object hands
# it in chunks taken last to first, so a wrong work count, kernel function or weights pointer
# in the object's table gives a wrong answer; counts its calls.
_FAKE_POOL = """
#include <stdint.h>
typedef void (*kernel_fn)(const void* const*, void* const*, uint8_t*, const uint8_t*, int64_t, int64_t);
typedef struct { kernel_fn fn; int64_t work; int64_t cost_ns; } kernel_t;
typedef struct { uint32_t struct_size, kernel_count; const kernel_t* kernels; const uint8_t* weights; } program_t;
int fake_pool_calls = 0;
int32_t aot_pool_run(void* pool, const program_t* p, const void* const* in, void* const* out, void* arena,
                     void* error) {
  (void)error;
  if (pool != (void*)&fake_pool_calls || p->struct_size != sizeof *p) return 1;
  fake_pool_calls++;
  for (uint32_t k = 0; k < p->kernel_count; k++) {
    int64_t w = p->kernels[k].work, step = w / 3 + 1;
    for (int64_t end = w; end > 0; end -= step)
      p->kernels[k].fn(in, out, (uint8_t*)arena, p->weights, end - step > 0 ? end - step : 0, end);
  }
  return 0;
}
"""


def test_run_threads_hands_the_pool_a_program_of_the_plan(lenet, sample_dir, tmp_path):
    """The object's program table, run by a stand-in pool in reversed chunks, computes lenet."""
    info = described(lenet, "lenet")
    source = driver_source([info], threads=0).replace(
        "struct aot_pool* pool = NULL;", "extern int fake_pool_calls;\n  struct aot_pool* pool = (struct aot_pool*)&fake_pool_calls;")
    source = source.replace("  return 0;\n}", '  printf("pool calls %d\\n", fake_pool_calls);\n  return 0;\n}')
    (tmp_path / "fake_pool.c").write_text(_FAKE_POOL)
    program = build(source, tmp_path, [lenet], [lenet / "lenet.o", tmp_path / "fake_pool.c"])
    x = np.load(sample_dir["lenet"].with_name("lenet.input.npy"))
    x.tofile(tmp_path / "lenet.in0.bin")
    result = subprocess.run([str(program), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and f"pool calls {RUNS}" in result.stdout, result.stdout + result.stderr
    got = np.fromfile(tmp_path / "lenet.out0.bin", np.float32).reshape(info["outputs"][0]["shape"])
    _close(got, _ort(str(sample_dir["lenet"]), {"x": x})[0])


def _several() -> onnx.ModelProto:
    """Three inputs, three outputs, names that are no C identifiers, three dtypes."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 2)).astype(np.float32)
    nodes = [helper.make_node("Add", ["a:0", "b-in"], ["sum"]),
             helper.make_node("MatMul", ["a:0", "w"], ["mm"]),
             helper.make_node("Tanh", ["mm"], ["prod.out"]),
             helper.make_node("Mul", ["class", "two"], ["Class"]),
             helper.make_node("Cast", ["class"], ["_flag"], to=TensorProto.BOOL)]
    graph = helper.make_graph(
        nodes, "several",
        [helper.make_tensor_value_info("a:0", TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("b-in", TensorProto.FLOAT, [5]),
         helper.make_tensor_value_info("class", TensorProto.INT32, [4])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("prod.out", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("Class", TensorProto.INT32, [4]),
         helper.make_tensor_value_info("_flag", TensorProto.BOOL, [4])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(2, np.int32), "two")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_several_inputs_and_outputs_with_unusual_names(tmp_path):
    model = _several()
    path = tmp_path / "several-io.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "out"
    result = emit_c(path, out)
    assert result.prefix == "several_io"
    info = described(out, "several_io")
    # the manifest keeps the model's names beside the identifiers
    assert [(t["name"], t["c_name"]) for t in info["inputs"] + info["outputs"]] == [
        ("a:0", "a_0"), ("b-in", "b_in"), ("class", "class_"),
        ("sum", "sum"), ("prod.out", "prod_out"), ("Class", "Class"), ("_flag", "flag")]
    header = (out / "several_io.h").read_text()
    assert ("int32_t several_io_run(const float* a_0, const float* b_in, const int32_t* class_, float* sum, "
            "float* prod_out, int32_t* Class, uint8_t* flag, void* arena);") in header
    assert "#define SEVERAL_IO_A_0_SHAPE {3, 5}" in header and "#define SEVERAL_IO_CLASS_BYTES 16" in header
    rng = np.random.default_rng(1)
    feeds = {"a:0": rng.standard_normal((3, 5)).astype(np.float32), "b-in": rng.standard_normal(5).astype(np.float32),
             "class": np.array([0, -3, 7, 1], np.int32)}
    program = build(driver_source([info]), tmp_path, [out], [out / "several_io.o"])
    got = run_models(program, tmp_path, {"several_io": list(feeds.values())}, {"several_io": info})["several_io"]
    for ours, theirs in zip(got, _ort(model, feeds)):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        _close(ours, theirs) if ours.dtype.kind == "f" else np.testing.assert_array_equal(ours, theirs)


def _two_convs_one_shape() -> onnx.ModelProto:
    """Two 3x3 convs of one shape (64 -> 64 channels, 7x7) with other weights and epilogues:
    their weights outgrow L1, so both run in band items whose accumulation is one shared
    helper function (codegen/cpu/body.py: new_helper), linked into the static object once."""
    rng = np.random.default_rng(4)

    def weight(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.05).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["a"]),
             helper.make_node("Conv", ["x", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "x"], ["b"])]
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 7, 7])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 64, 7, 7]) for n in "ab"],
                              initializer=[weight("w1", (64, 64, 3, 3)), weight("b1", (64,)), weight("w2", (64, 64, 3, 3))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_convs_sharing_a_helper_function_match_onnxruntime(tmp_path):
    model = _two_convs_one_shape()
    path = tmp_path / "convs.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "out"
    emit_c(path, out)
    info = described(out, "convs")
    x = np.random.default_rng(5).standard_normal((1, 64, 7, 7)).astype(np.float32)
    program = build(driver_source([info]), tmp_path, [out], [out / "convs.o"])
    got = run_models(program, tmp_path, {"convs": [x]}, {"convs": info})["convs"]
    for ours, theirs in zip(got, _ort(model, {"x": x})):
        _close(ours, theirs)


def _vad() -> onnx.ModelProto:
    """An If whose else branch cannot run at the compiled shape: a run-time check (as in
    tests/end_to_end/test_runtime_checks.py), whose failure the entry returns as its status."""
    def branch(prefix, shape, scale):
        nodes = [helper.make_node("Reshape", ["x", f"{prefix}_shape"], [f"{prefix}_r"], name=f"{prefix}_reshape"),
                 helper.make_node("ReduceSum", [f"{prefix}_r", f"{prefix}_axes"], [f"{prefix}_s"], keepdims=0),
                 helper.make_node("Mul", [f"{prefix}_s", f"{prefix}_k"], [f"{prefix}_y"])]
        inits = [helper.make_tensor(f"{prefix}_shape", TensorProto.INT64, [len(shape)], shape),
                 helper.make_tensor(f"{prefix}_axes", TensorProto.INT64, [1], [1]),
                 helper.make_tensor(f"{prefix}_k", TensorProto.FLOAT, [], [scale])]
        return helper.make_graph(nodes, prefix, [], [helper.make_tensor_value_info(f"{prefix}_y", TensorProto.FLOAT,
                                                                                    [None])], initializer=inits)
    nodes = [helper.make_node("Equal", ["sr", "c16k"], ["is16k"]),
             helper.make_node("If", ["is16k"], ["y"], name="pick_rate", then_branch=branch("b16", [2, 5], 2.0),
                              else_branch=branch("b8", [-1, 4], 3.0))]
    graph = helper.make_graph(nodes, "vad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "samples"]),
                                             helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
                              initializer=[helper.make_tensor("c16k", TensorProto.INT64, [], [16000])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_failed_run_time_check_is_the_status_and_its_message(tmp_path):
    out = tmp_path / "out"
    result = emit_c(_vad(), out, name="vad", shapes={"x": (1, 10)})
    info = described(out, "vad")
    assert len(info["checks"]) == 1 and "#define VAD_CHECK_COUNT 1" in (out / "vad.h").read_text()
    program = build(driver_source([info]), tmp_path, [out], [result.files["object"]])
    x = (np.arange(10, dtype=np.float32) - 4.5).reshape(1, 10)
    (got,) = run_models(program, tmp_path, {"vad": [x, np.array(16000, np.int64)]}, {"vad": info})["vad"]
    np.testing.assert_allclose(got, _ort(_vad(), {"x": x, "sr": np.array(16000, np.int64)})[0], rtol=1e-6)
    np.array(8000, np.int64).tofile(tmp_path / "vad.in1.bin")
    failed = subprocess.run([str(program), str(tmp_path)], capture_output=True, text=True)
    assert failed.returncode == 3
    assert failed.stdout.strip() == info["checks"][0]["message"]
    assert "node 'pick_rate'" in failed.stdout


def test_a_donated_input_is_read_from_one_buffer_or_copied_from_two(tmp_path):
    """past_keys -> present_keys (inferred by name): one buffer updates in place, two leave the input."""
    graph = helper.make_graph([helper.make_node("Add", ["past_keys", "step"], ["present_keys"])], "cache",
                              [helper.make_tensor_value_info("past_keys", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("step", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("present_keys", TensorProto.FLOAT, [2, 3])])
    out = tmp_path / "out"
    emit_c(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out, name="cache")
    assert described(out, "cache")["donations"] == [{"input": 0, "output": 0}]
    source = """\
#include <stdio.h>
#include "cache.h"
int main(void) {
  float past[6] = {1, 2, 3, 4, 5, 6}, step[6] = {10, 10, 10, 10, 10, 10}, present[6] = {0};
  _Alignas(64) static unsigned char arena[CACHE_ARENA_BYTES + 1];
  if (cache_run(past, step, present, arena)) return 1;          /* two buffers */
  if (past[0] != 1 || present[0] != 11 || present[5] != 16) return 2;
  if (cache_run(past, step, past, arena)) return 3;             /* one buffer, in place */
  if (cache_run(past, step, past, arena)) return 4;
  if (past[0] != 21 || past[5] != 26) return 5;
  puts("ok");
  return 0;
}
"""
    program = build(source, tmp_path, [out], [out / "cache.o"])
    result = subprocess.run([str(program)], capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (0, "ok\n")


def test_existing_files_are_replaced_and_nothing_else_is_touched(lenet, sample_dir, tmp_path):
    """As `-o model.aot` replaces an artifact: the files of these names, through a rename each."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "mlp.h").write_text("stale")
    (out / "notes.txt").write_text("mine")
    emit_c(sample_dir["mlp"], out)
    assert (out / "mlp.h").read_text().startswith("/* mlp.h - generated by aot")
    assert (out / "notes.txt").read_text() == "mine"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temp files left


def _cli(*args):
    return CliRunner().invoke(compile_main, [str(a) for a in args])


def test_bad_arguments_fail_before_the_compile(sample_dir, tmp_path):
    lenet = sample_dir["lenet"]
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    cases = [
        ((lenet, "--emit", "c", "-o", a_file), "it is a file; --emit c writes several files, so -o names a directory"),
        ((lenet, "--emit", "c", "-o", tmp_path / "missing" / "out"), "does not exist"),
        ((lenet, "--emit", "c", "--cpu", "portable", "-o", tmp_path), "builds one CPU variant"),
        ((lenet, "--emit", "c", "--cpu", "neoverse-v1", "-o", tmp_path), "builds for this host's architecture"),
        ((lenet, "--emit", "c", "--name", "2fast", "-o", tmp_path), "is not a usable C identifier"),
        ((lenet, "--emit", "c", "--name", "class", "-o", tmp_path), "e.g. --name class_"),
        ((lenet, "--emit", "c", "--target", "cuda", "-o", tmp_path), "--target cuda does not go with --emit c"),
        ((lenet, "--name", "x", "-o", tmp_path / "m.aot"), "--name x names the C prefix of --emit c"),
    ]
    for args, message in cases:
        result = _cli(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
    assert not list(tmp_path.glob("*.o"))


def test_a_dynamic_dim_asks_for_a_shape(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "dyn.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    with pytest.raises(UnsupportedError, match=r"dim 0 \('batch'\) is dynamic; fix it with shapes"):
        emit_c(path, tmp_path / "out")
    result = _cli(path, "--emit", "c", "-o", tmp_path / "out")
    assert result.exit_code == 1 and "fix it with --shape x=1x4" in result.output
    with pytest.raises(ArgumentError, match="it is a file"):
        emit_c(path, path)


def test_a_named_cpu_variant(sample_dir, tmp_path):
    """--cpu picks the one variant; the header and the json name it, and what it uses."""
    target = CpuTarget.from_name("x86-64-v3")
    if CpuTarget.host().arch != "x86_64" or not host_runs(target):
        pytest.skip("this host cannot run x86-64-v3 code")
    out = tmp_path / "out"
    result = emit_c(sample_dir["lenet"], out, cpu="x86-64-v3", name="bn")
    info = described(out, "bn")
    assert result.cpu == info["cpu"]["name"] == "x86-64-v3" and "avx2" in info["cpu"]["features"]
    assert "avx512f" not in info["cpu"]["features"]
    assert "Code for CPU 'x86-64-v3' (x86_64), using:" in (out / "bn.h").read_text()
    program = build(driver_source([info]), tmp_path, [out], [out / "bn.o"])
    x = np.load(sample_dir["lenet"].with_name("lenet.input.npy"))
    (got,) = run_models(program, tmp_path, {"bn": [x]}, {"bn": info})["bn"]
    _close(got, _ort(str(sample_dir["lenet"]), {"x": x})[0])
