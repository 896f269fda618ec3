"""Buffer donation end to end: a [1, 2, 16, 8] cache updated at a position input (ScatterND,
ScatterElements, and the torch exporter's Transpose-ScatterND-Transpose for index_copy_) and
read whole by an attention-like step, compiled with past_keys donated to present_keys and run
by the C runtime with one buffer for both (updated in place) and with two (the input copied
first, left as it was), on 1 and 3 threads and on the GPU stand-in driver, against
onnxruntime; a manifest edited to a pair the code was not built for is refused."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest

from aot.artifact import pack_artifact, read_artifact
from aot.codegen.nvptx.host_library import artifact_host_libraries
from aot.driver import compile_model
from aot.errors import ArtifactError, RunError
from aot.runtime.device_array import DeviceArray
from aot.runtime.session import Session
from donation_util import cache_feeds, cache_model, stacked_cache_feeds, stacked_cache_model
from fake_cuda_util import fake_cuda_env, fake_cuda_stat

DTOD = "cuMemcpyDtoDAsync_v2"
UPDATES = ("scatter_nd", "elements", "index_copy")


def _reference(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=UPDATES)
def cache(request, tmp_path_factory) -> SimpleNamespace:
    model = cache_model(update=request.param, extra="old_sum")
    result = compile_model(model, target="cpu,cuda")
    folder = tmp_path_factory.mktemp(request.param)
    artifact_host_libraries(result, folder)
    return SimpleNamespace(update=request.param, model=model, result=result, artifact=result.artifact,
                           reference=_reference(model), host_dir=folder)


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_the_pair_is_in_the_manifest_and_the_session(cache):
    assert cache.result.manifest["donations"] == [{"input": 0, "output": 0}]
    assert Session(cache.artifact).donations == {"past_keys": "present_keys"}


@pytest.mark.parametrize("threads", [1, 3])
def test_two_buffers_copy_the_input_first_and_leave_it_as_it_was(cache, threads):
    session = Session(cache.artifact, threads=threads)
    feeds = cache_feeds()
    past = feeds["past_keys"].copy()
    _close(session.run(None, feeds), cache.reference.run(None, feeds))
    np.testing.assert_array_equal(feeds["past_keys"], past)
    given = np.full_like(past, np.nan)  # the output's own buffer, given: the input is copied there
    got = session.run(None, feeds, outputs={"present_keys": given})
    assert got[0] is given
    _close(got, cache.reference.run(None, feeds))


@pytest.mark.parametrize("threads", [1, 3])
def test_one_buffer_is_updated_in_place_step_after_step(cache, threads):
    """A decode loop: the cache array is fed and given as present_keys; each step writes one row."""
    session = Session(cache.artifact, threads=threads)
    feeds = cache_feeds(position=0)
    cache_array = feeds["past_keys"]
    want_cache = cache_array.copy()
    for position in range(4):
        feeds = {**cache_feeds(position=position, seed=position), "past_keys": cache_array}
        want = cache.reference.run(None, {**feeds, "past_keys": want_cache})
        present, attn, old_sum = session.run(None, feeds, outputs={"present_keys": cache_array})
        assert present is cache_array
        _close([present, attn, old_sum], want)  # old_sum read the cache before the update
        want_cache = want[0]


def test_outputs_on_the_cpu_are_checked(cache):
    session = Session(cache.artifact)
    feeds = cache_feeds()
    for given, message in ((np.zeros((1, 2, 16, 8), np.float64), "expected dtype float32, got float64"),
                           (np.zeros((1, 2, 8, 16), np.float32), "expected shape [1,2,16,8], got [1,2,8,16]"),
                           (np.zeros((1, 2, 16, 16), np.float32)[..., ::2], "must be C-contiguous and writable"),
                           ([0.0], "outputs= on a CPU session takes numpy arrays")):
        with pytest.raises(RunError, match=message.replace("[", "\\[").replace("]", "\\]")):
            session.run(None, feeds, outputs={"present_keys": given})
    # another output in the cache's buffer is no donation: refused by the runtime
    inside = feeds["past_keys"].reshape(-1)[:16].reshape(1, 2, 1, 8)
    with pytest.raises(RunError, match="output 'attn' overlaps input 'past_keys' \\(only a donated input"):
        session.run(None, feeds, outputs={"attn": inside})
    shifted = np.zeros(1 + feeds["past_keys"].size, np.float32)
    shifted[1:] = feeds["past_keys"].reshape(-1)
    with pytest.raises(RunError, match="overlaps its donated input 'past_keys' without being the same buffer"):
        session.run(None, {**feeds, "past_keys": shifted[1:].reshape(1, 2, 16, 8)},
                    outputs={"present_keys": shifted[:-1].reshape(1, 2, 16, 8)})


@pytest.mark.parametrize("steps", [1, 3])
def test_a_stacked_cache_updated_layer_by_layer_in_place(steps):
    """torch's stacked static cache (per layer: Gather, index_copy_'s Transpose-ScatterND-Transpose,
    attention, then Unsqueeze and Concat): one scatter per layer on the cache itself, in place."""
    model = stacked_cache_model(layers=3, steps=steps)
    result = compile_model(model)
    (note,) = result.tooling["donations"]
    assert note["how"] == "in place" and note["why"].count("(scatter)") == 3
    reference = _reference(model)
    session = Session(result.artifact, threads=3)
    cache_array = stacked_cache_feeds(layers=3, steps=steps)["past_keys"]
    want_cache = cache_array.copy()
    for position in (0, 4, 13):
        feeds = {**stacked_cache_feeds(layers=3, steps=steps, position=position, seed=position),
                 "past_keys": cache_array}
        want = reference.run(None, {**feeds, "past_keys": want_cache})
        got = session.run(None, feeds, outputs={"present_keys": cache_array})
        assert got[0] is cache_array
        _close(got, want)
        want_cache = want[0]


def _edited(artifact: bytes, donations) -> bytes:
    parsed = read_artifact(artifact)
    manifest = {k: v for k, v in parsed.manifest.items() if k != "donations"}
    if donations is not None:
        manifest["donations"] = donations
    sections = [(n, d) for n, d in parsed.sections.items() if n not in ("manifest", "tooling")]
    return pack_artifact(manifest, sections)


def test_a_manifest_edited_to_a_pair_the_code_was_not_built_for_is_refused(cache):
    with pytest.raises(ArtifactError, match="manifest: 0 donations, the code was built for 1"):
        Session(_edited(cache.artifact, None))
    plain = compile_model(cache.model, infer_donation=False).artifact
    with pytest.raises(ArtifactError, match="manifest: 1 donations, the code was built for 0"):
        Session(_edited(plain, [{"input": 0, "output": 0}]))
    with pytest.raises(ArtifactError, match="input 'new_keys' and output 'present_keys' differ in dtype or shape"):
        Session(_edited(cache.artifact, [{"input": 2, "output": 0}]))


# -- the GPU path, on the stand-in driver ---------------------------------------------------
@pytest.fixture
def gpu(monkeypatch, cache) -> SimpleNamespace:
    fake_cuda_env(monkeypatch, cache.host_dir)
    return cache


def test_gpu_host_buffers_match_onnxruntime(gpu):
    session = Session(gpu.artifact, device="cuda")
    feeds = cache_feeds()
    before = fake_cuda_stat(DTOD)
    _close(session.run(None, feeds), gpu.reference.run(None, feeds))
    assert fake_cuda_stat(DTOD) == before  # uploaded straight into the output's buffer


@pytest.mark.parametrize("graphs", [True, False])
def test_gpu_one_device_buffer_is_updated_in_place_and_two_get_one_copy(gpu, graphs):
    session = Session(gpu.artifact, device="cuda", cuda_graph=graphs)
    cache_array = DeviceArray.from_numpy(session, cache_feeds()["past_keys"])
    want_cache = cache_array.numpy()
    for position in range(3):
        feeds = {**cache_feeds(position=position, seed=position), "past_keys": cache_array}
        want = gpu.reference.run(None, {**feeds, "past_keys": want_cache})
        before = fake_cuda_stat(DTOD)
        present, attn, old_sum = session.run(None, feeds, outputs={"present_keys": cache_array})
        assert present is cache_array and fake_cuda_stat(DTOD) == before  # nothing copied
        _close([present.numpy(), attn.numpy(), old_sum.numpy()], want)
        want_cache = want[0]
    kept = cache_array.numpy()
    other = DeviceArray.empty(session, (1, 2, 16, 8), np.float32)
    feeds = {**cache_feeds(position=7), "past_keys": cache_array}
    before = fake_cuda_stat(DTOD)
    present, attn, old_sum = session.run(None, feeds, outputs={"present_keys": other})
    assert fake_cuda_stat(DTOD) == before + 1
    _close([present.numpy(), attn.numpy(), old_sum.numpy()], gpu.reference.run(None, {**feeds, "past_keys": kept}))
    np.testing.assert_array_equal(cache_array.numpy(), kept)


def test_gpu_every_input_on_the_device_a_scalar_too(gpu):
    session = Session(gpu.artifact, device="cuda")
    feeds = {k: DeviceArray.from_numpy(session, v) for k, v in cache_feeds(position=9).items()}
    assert feeds["position"].shape == ()  # numpy's ascontiguousarray makes a 0-d array [1]
    want = gpu.reference.run(None, cache_feeds(position=9))
    present, attn, old_sum = session.run(None, feeds, outputs={"present_keys": feeds["past_keys"]})
    _close([present.numpy(), attn.numpy(), old_sum.numpy()], want)


def test_gpu_overlap_that_is_no_donation_is_refused(gpu):
    session = Session(gpu.artifact, device="cuda")
    cache_array = DeviceArray.from_numpy(session, cache_feeds()["past_keys"])
    feeds = {**cache_feeds(), "new_keys": DeviceArray.from_numpy(session, cache_feeds()["new_keys"])}
    with pytest.raises(RunError, match="output 'attn' overlaps input 'new_keys'"):
        session.run(None, {**feeds, "past_keys": cache_array}, outputs={"attn": feeds["new_keys"]})
