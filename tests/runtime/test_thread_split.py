"""The runtime's thread split (runtime_c/src/schedule.c, threadpool.c) through aot.Session.

Kernels whose manifest cost_ns is too small run whole on the calling thread,
large ones are split across the context's threads; a context's first runs
time every kernel on the calling thread and later runs split by those times
(the C tests in runtime_c/tests/test_schedule.c count which thread runs what).
Either way the results are the same bytes at every thread count and in every
run, and match onnxruntime.
"""
import gc
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import aot
from aot.artifact import pack_artifact, read_artifact

ort = pytest.importorskip("onnxruntime")


def weight(name, shape, seed):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.05, name)


def mixed_model():
    """A large matmul (split), then small kernels (run on the caller): matmul, softmax, add."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["z"]),
        helper.make_node("Softmax", ["z"], ["s"], axis=-1),
        helper.make_node("Add", ["s", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [61, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [61, 7])],
        [weight("w1", (256, 512), 1), weight("w2", (512, 7), 2), weight("b", (7,), 3)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def tiny_model():
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("split") / "mixed.aot"
    model = mixed_model()
    aot.compile(model, path)
    return model, path


def test_results_identical_at_every_thread_count(mixed):
    model, path = mixed
    x = np.random.default_rng(0).standard_normal((61, 256)).astype(np.float32)
    results = {}
    for threads in (1, 2, 3, 4):
        session = aot.Session(path, threads=threads)
        # the calibration runs (on the caller) and the split runs after them
        results[threads] = [session.run(None, {"x": x})[0] for _ in range(6)]
    for threads, runs in results.items():
        for got in runs:
            assert got.tobytes() == results[1][0].tobytes(), f"threads={threads}"
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(results[1][0], want, rtol=1e-4, atol=1e-5)


def test_large_kernels_are_split_and_small_ones_are_not(mixed):
    _, path = mixed
    costs = [k["cost_ns"] for k in read_artifact(path).manifest["kernels"]]
    assert max(costs) > 50_000  # the 61x256x512 matmul
    assert min(costs) < 2_000  # bias, softmax: on the caller


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_model_of_small_kernels_starts_no_threads(tmp_path):
    path = tmp_path / "tiny.aot"
    aot.compile(tiny_model(), path)
    x = np.arange(15, dtype=np.float32).reshape(5, 3) - 7
    want = aot.Session(path, threads=1).run(None, {"x": x})[0]
    gc.collect()  # an earlier test's Session, destroyed between the counts, would take its workers along
    before = thread_count()
    session = aot.Session(path, threads=4)
    assert thread_count() == before
    assert session.run(None, {"x": x})[0].tobytes() == want.tobytes()
    np.testing.assert_array_equal(want, np.maximum(x + x, 0))


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_model_with_a_large_kernel_starts_its_workers(mixed):
    _, path = mixed
    gc.collect()
    before = thread_count()
    session = aot.Session(path, threads=3)
    assert thread_count() == before + 2
    del session


def test_cost_round_trips_and_artifacts_without_it_still_run(mixed, tmp_path):
    """cost_ns survives the writer and both readers; an artifact from before cost_ns runs alike."""
    _, path = mixed
    art = read_artifact(path)
    again = read_artifact(pack_artifact(art.manifest, [(n, d) for n, d in art.sections.items() if n != "manifest"]))
    assert [k["cost_ns"] for k in again.manifest["kernels"]] == [k["cost_ns"] for k in art.manifest["kernels"]]
    manifest = dict(art.manifest)
    manifest["kernels"] = [{k: v for k, v in kernel.items() if k != "cost_ns"} for kernel in art.manifest["kernels"]]
    old = tmp_path / "old.aot"
    old.write_bytes(pack_artifact(manifest, [(n, d) for n, d in art.sections.items() if n != "manifest"]))
    x = np.random.default_rng(1).standard_normal((61, 256)).astype(np.float32)
    want = aot.Session(path, threads=1).run(None, {"x": x})[0]
    for threads in (1, 2, 4):
        assert aot.Session(old, threads=threads).run(None, {"x": x})[0].tobytes() == want.tobytes()


def test_bad_cost_is_an_artifact_error(mixed, tmp_path):
    _, path = mixed
    art = read_artifact(path)
    manifest = dict(art.manifest)
    manifest["kernels"] = [dict(k, cost_ns=-3) for k in art.manifest["kernels"]]
    bad = tmp_path / "bad.aot"
    bad.write_bytes(pack_artifact(manifest, [(n, d) for n, d in art.sections.items() if n != "manifest"]))
    with pytest.raises(aot.ArtifactError, match='"cost_ns" must be an integer'):
        aot.Session(bad)
