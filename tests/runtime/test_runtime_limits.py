"""The C runtime against manifests edited after compilation (CRCs recomputed), through
aot.Session: compiled code carries `aot_code_info` (aot/codegen/cpu/code_info.py), what it
was built for, and the runtime refuses a manifest that differs from it instead of running
the code past its buffers; the caller's memory limit; 40,000 inputs (issue 11, items 3-5)."""

import os
import shutil
import subprocess
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import aot
from aot.artifact import FORMAT_VERSION, pack_artifact, read_artifact
from aot.errors import ArtifactError, RunError

CC = shutil.which(os.environ.get("CC", "cc"))


def _weight(name, shape, seed):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 0.1, name)


def _model():
    """Three kernels, an arena and weights: softmax(relu(x @ w1) @ w2)."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["z"]), helper.make_node("Softmax", ["z"], ["y"], axis=-1)],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [61, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [61, 7])],
        [_weight("w1", (256, 64), 1), _weight("w2", (64, 7), 2)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _reference(x, model):
    w1, w2 = (numpy_helper.to_array(t) for t in model.graph.initializer)
    z = np.maximum(x @ w1, 0) @ w2
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def compiled():
    model = _model()
    result = aot.compile(model)
    assert result.manifest["arena"]["bytes"] > 0 and len(result.manifest["kernels"]) > 1
    return result, read_artifact(result.artifact), model


def _reseal(art, manifest, weights=None):
    """The artifact with `manifest` (and `weights`), checksums recomputed, as anyone can."""
    return pack_artifact(manifest, [(n, weights if n == "weights" and weights is not None else d)
                                    for n, d in art.sections.items() if n != "manifest"])


def test_compiled_artifact_runs(compiled):
    result, _, model = compiled
    x = np.random.default_rng(1).standard_normal((61, 256)).astype(np.float32)
    with aot.Session(result.artifact, threads=4) as s:
        (y,) = s.run(None, {"x": x})
    np.testing.assert_allclose(y, _reference(x, model), rtol=1e-4, atol=1e-5)


def _edits(manifest):
    """(what, edited manifest, message) for each field the code relies on."""
    arena = manifest["arena"]["bytes"]
    first = manifest["kernels"][0]
    yield "arena 0", dict(manifest, arena={"bytes": 0, "alignment": 64}), f"arena.bytes is 0, the code was built for {arena}"
    yield "arena larger", dict(manifest, arena={"bytes": arena + 64}), f"arena.bytes is {arena + 64}, the code was"
    yield "no inputs", dict(manifest, inputs=[]), "the input count is 0, the code was built for 1"
    yield ("smaller input", dict(manifest, inputs=[{"name": "x", "dtype": "float32", "shape": [1, 256]}]),
           r"inputs\[0\] \('x'\) is 1024 bytes, the code was built for 62464")
    yield ("larger output", dict(manifest, outputs=[{"name": "y", "dtype": "float64", "shape": [61, 7]}]),
           r"outputs\[0\] \('y'\) is 3416 bytes, the code was built for 1708")
    yield "no outputs", dict(manifest, outputs=[]), '"outputs" is empty'
    yield "weights null", dict(manifest, weights=None), '"weights" must be an object'
    huge = dict(first, work=2**61 - 1)
    yield ("work 2^61 - 1", dict(manifest, kernels=[huge, *manifest["kernels"][1:]]),
           rf"kernels\[0\] \('{first['name']}'\): work is {2**61 - 1}, the code was built for {first['work']}")
    yield ("work 2^61", dict(manifest, kernels=[dict(first, work=2**61), *manifest["kernels"][1:]]),
           r'"work" must be an integer in \[0, 2305843009213693951\]')
    swapped = [dict(k, work=first["work"]) for k in reversed(manifest["kernels"])]
    yield "kernels reversed", dict(manifest, kernels=swapped), r"kernels\[0\] .*: its symbol is not the code's kernel 0"
    yield "a kernel less", dict(manifest, kernels=manifest["kernels"][:-1]), "the kernel count is"
    cpu = [dict(manifest["cpu"][0], entry=first["symbol"])]
    yield "entry is a kernel", dict(manifest, cpu=cpu), f"cpu entry '{first['symbol']}' is not the code's entry function"


@pytest.mark.parametrize("index", range(12))
def test_manifest_edits_are_refused_at_open(compiled, index):
    _, art, _ = compiled
    what, manifest, message = list(_edits(art.manifest))[index]
    with pytest.raises(ArtifactError, match=message):
        aot.Session(_reseal(art, manifest), threads=4)


def test_weights_that_agree_with_their_section_but_not_the_code(compiled):
    _, art, _ = compiled
    weights = art.sections["weights"]
    n = len(weights) - 64
    manifest = dict(art.manifest, weights=dict(art.manifest["weights"], bytes=n))
    with pytest.raises(ArtifactError, match=f"weights.bytes is {n}, the code was built for {len(weights)}"):
        aot.Session(_reseal(art, manifest, weights[:n]))


def test_caller_memory_limit(compiled, tmp_path):
    result, _, _ = compiled
    with pytest.raises(RunError, match="section 'manifest'.*over max_memory_bytes 1000"):
        aot.Session(result.artifact, max_memory_bytes=1000)
    with pytest.raises(RunError, match=r"(arena .*|section '\S+'): \d+ bytes would bring the model to \d+ bytes, "
                                       r"over max_memory_bytes 100000"):
        aot.Session(result.artifact, max_memory_bytes=100_000)
    path = tmp_path / "m.aot"
    path.write_bytes(result.artifact)
    with pytest.raises(RunError, match="the file's bytes"):
        aot.Session(path, max_memory_bytes=len(result.artifact) - 1)
    x = np.ones((61, 256), np.float32)
    for src in (result.artifact, path):
        with aot.Session(src, max_memory_bytes=1 << 30) as s:
            assert s.run(None, {"x": x})[0].shape == (61, 7)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(RunError, match="max_memory_bytes must be a positive integer"):
            aot.Session(result.artifact, max_memory_bytes=bad)


INPUTS = 40_000


def _many_inputs_code(tmp_path) -> bytes:
    """Code for 40,000 float32 [1] inputs and one output y[0] = x[0] + x[39999], with its
    aot_code_info, linked like compiler output."""
    sizes = ", ".join(["4"] * (INPUTS + 1))
    source = tmp_path / "many.c"
    source.write_text(f"""
#include <stdint.h>
__attribute__((visibility("default"))) void aot_model_entry(const void* const* in, void* const* out,
                                                           uint8_t* arena, const uint8_t* weights) {{
  (void)arena; (void)weights;
  *(float*)out[0] = *(const float*)in[0] + *(const float*)in[{INPUTS - 1}];
}}
__attribute__((visibility("default"))) const struct {{
  char magic[8]; uint64_t version, arena_bytes, arena_alignment, weights_bytes, weights_alignment;
  uint64_t inputs, outputs, kernels, checks; const void* entry; const void* checks_fn;
  uint64_t sizes[{INPUTS + 1}];
}} aot_code_info = {{{{'A','O','T','C','I','N','F','O'}}, 1, 0, 64, 0, 64, {INPUTS}, 1, 0, 0,
                   (const void*)aot_model_entry, 0, {{{sizes}}}}};
""")
    out = tmp_path / "many.so"
    subprocess.run([CC, "-O2", "-fPIC", "-ffreestanding", "-nostdlib", "-shared", "-o", str(out), str(source)], check=True)
    return out.read_bytes()


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_forty_thousand_inputs_open_in_well_under_a_second(tmp_path):
    arch = os.uname().machine
    manifest = {
        "format_version": FORMAT_VERSION,
        "inputs": [{"name": f"in{i:05d}", "dtype": "float32", "shape": [1]} for i in range(INPUTS)],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [1]}],
        "arena": {"bytes": 0, "alignment": 64},
        "weights": {"section": "weights", "bytes": 0, "alignment": 64},
        "cpu": [{"section": f"cpu.{arch}", "arch": arch, "entry": "aot_model_entry"}],
        "kernels": [],
    }
    blob = pack_artifact(manifest, [("weights", b""), (f"cpu.{arch}", _many_inputs_code(tmp_path))])
    start = time.perf_counter()
    session = aot.Session(blob)
    took = time.perf_counter() - start
    # the C open takes about 0.08 s (5 s when names were compared pairwise), the binding's
    # 40,000 descriptors about 0.4 s more
    assert took < 2.0, f"opening 40,000 inputs took {took:.2f} s"
    feeds = {f"in{i:05d}": np.array([0.0], np.float32) for i in range(INPUTS)}
    feeds["in00000"] = np.array([1.5], np.float32)
    feeds[f"in{INPUTS - 1:05d}"] = np.array([2.0], np.float32)
    assert session.run(None, feeds)[0].tolist() == [3.5]
    session.close()
    manifest["inputs"][-1]["name"] = "in00007"
    with pytest.raises(ArtifactError, match=r"inputs\[39999\]: duplicate name 'in00007'"):
        aot.Session(pack_artifact(manifest, [("weights", b""), (f"cpu.{arch}", b"\x7fELF")]))
