"""The manifest's `cuda` entry and the tooling section's, checked by aot/manifest_check.py and
aot/tooling.py: a launch plan that points outside the model's buffers, a missing code section or
a plan of another length, or a checks launch that is missing, extra or without its status word
last, is an ArtifactError naming the field."""
from __future__ import annotations

import copy
import re

import pytest

from aot.artifact import pack_artifact, read_artifact
from aot.driver import compile_model
from aot.errors import ArtifactError
from aot.manifest_check import check_manifest
from aot.tooling import check_tooling
from gpu_util import dense_softmax_model, gather_check_model


@pytest.fixture(scope="module")
def compiled():
    result = compile_model(dense_softmax_model(), target="cpu,cuda", sm="sm_80")
    sizes = {s.name: s.raw_size for s in read_artifact(result.artifact).table}
    return result, sizes


def _launch(manifest, j=0):
    return manifest["cuda"]["sms"][0]["kernels"][j]


def _arg(manifest, kind):
    return next(a for k in manifest["cuda"]["sms"][0]["kernels"] for a in k["args"] if a["kind"] == kind)


def _set(path, value):
    def edit(m):
        *parents, key = path
        for p in parents:
            m = m[p]
        m[key] = value
    return edit


BAD_MANIFESTS = [
    (_set(["cuda"], []), "\"cuda\" must be an object"),
    (_set(["cuda", "weights"], "other"), "cuda: \"weights\" is 'other', not the weights section 'weights'"),
    (_set(["cuda", "arena", "bytes"], -1), "cuda.arena: \"bytes\" must be an integer"),
    (_set(["cuda", "sms"], []), "\"sms\" is empty"),
    (lambda m: m["cuda"]["sms"].append(copy.deepcopy(m["cuda"]["sms"][0])), "cuda.sms[1]: \"sm\" 'sm_80' is empty or given twice"),
    (_set(["cuda", "sms", 0, "ptx"], "ptx.sm_99"), "section 'ptx.sm_99': missing (manifest cuda.sms[0].ptx)"),
    (_set(["cuda", "sms", 0, "cubin"], "cubin.sm_99"), "section 'cubin.sm_99': missing"),
    (lambda m: m["cuda"]["sms"][0]["kernels"].pop(), "cuda.sms[0]: 1 kernels, the manifest has 2"),
    (lambda m: _launch(m).update(name="k9"), "name 'k9' is not kernels[0]'s"),
    (lambda m: _launch(m).update(grid=[0, 1, 1]), "grid[0] must be an integer in [1, 2147483647]"),
    (lambda m: _launch(m).update(block=[1024, 2, 1]), "a block of more than 1024 threads"),
    (lambda m: _launch(m).update(block=[32, 1]), "\"block\" must be an array of 3 integers"),
    (lambda m: _launch(m).update(shared_bytes=1 << 20), "\"shared_bytes\" must be an integer"),
    (lambda m: _launch(m).update(args=[]), "\"args\" must hold 1 to 512 arguments"),
    (lambda m: _arg(m, "input").update(index=2), "args[0]: \"index\" must be an integer in [0, 1]"),
    (lambda m: _arg(m, "arena").update(offset=1 << 20), "\"offset\" must be an integer in [0, 256]"),
    (lambda m: _arg(m, "weights").update(offset=-8), "\"offset\" must be an integer"),
    (lambda m: _arg(m, "output").update(kind="host"), "\"kind\" must be one of arena, weights, input, output"),
]


@pytest.mark.parametrize("edit, message", BAD_MANIFESTS)
def test_bad_cuda_entry_is_refused(compiled, edit, message):
    result, sizes = compiled
    manifest = copy.deepcopy(result.manifest)
    edit(manifest)
    with pytest.raises(ArtifactError, match=re.escape(message)):
        check_manifest(manifest, sizes)


def test_the_compilers_cuda_entry_passes(compiled):
    result, sizes = compiled
    check_manifest(result.manifest, sizes)
    check_tooling(result.tooling, result.manifest)


def test_gpu_only_kernels_need_no_cpu_symbol(compiled):
    result, sizes = compiled
    manifest = copy.deepcopy(result.manifest)
    manifest["cpu"] = []
    manifest["kernels"] = [{"name": k["name"]} for k in manifest["kernels"]]
    check_manifest(manifest, sizes)
    # with CPU code whose variant lists no kernels of its own, a kernel needs its symbol and work
    manifest["cpu"] = [{k: v for k, v in c.items() if k != "kernels"} for c in result.manifest["cpu"]]
    with pytest.raises(ArtifactError, match=r"kernels\[0\]: missing \"symbol\""):
        check_manifest(manifest, sizes)


@pytest.mark.parametrize("edit, message", [
    (_set(["cuda"], 3), "\"cuda\" must be an object"),
    (_set(["cuda", "sms"], []), "\"cuda.sms\" must be an array with one entry per manifest cuda.sms"),
    (lambda t: t["cuda"]["sms"][0]["kernels"].pop(), "cuda.sms\\[0\\]: \"kernels\" must be an array with one entry"),
    (lambda t: t["cuda"]["sms"][0]["kernels"][0].update(body=3), "\"body\" must be a string"),
    (lambda t: t["cuda"]["sms"][0]["kernels"][0].update(name="k7"), "name 'k7' is not the manifest's"),
    (lambda t: t["cuda"]["sms"][0]["kernels"][0].update(ptxas={"registers": "many"}), "\"registers\" must be an integer"),
    (_set(["cuda", "arena", "lower_bound_bytes"], 1.5), "\"lower_bound_bytes\" must be an integer"),
])
def test_bad_tooling_cuda_entry_is_refused(compiled, edit, message):
    result, _ = compiled
    tooling = copy.deepcopy(result.tooling)
    edit(tooling)
    with pytest.raises(ArtifactError, match=message):
        check_tooling(tooling, result.manifest)


def test_tooling_cuda_entry_without_a_manifest_one_is_refused(compiled):
    result, _ = compiled
    manifest = {k: v for k, v in result.manifest.items() if k != "cuda"}
    with pytest.raises(ArtifactError, match="only where the manifest has one"):
        check_tooling(result.tooling, manifest)


def test_reader_refuses_an_artifact_whose_launch_plan_was_edited(compiled):
    result, _ = compiled
    artifact = read_artifact(result.artifact)
    manifest = copy.deepcopy(result.manifest)
    _arg(manifest, "arena")["offset"] = 4096
    sections = [(name, data) for name, data in artifact.sections.items() if name not in ("manifest", "tooling")]
    with pytest.raises(ArtifactError, match=r"section 'manifest': cuda.sms\[0\].kernels\[\d\]: args\[\d\]"):
        read_artifact(pack_artifact(manifest, sections))


@pytest.fixture(scope="module")
def with_checks():
    result = compile_model(gather_check_model(), target="cpu,cuda", sm="sm_80")
    sizes = {s.name: s.raw_size for s in read_artifact(result.artifact).table}
    return result, sizes


def test_the_compilers_checks_launch_passes(with_checks):
    result, sizes = with_checks
    check_manifest(result.manifest, sizes)
    check_tooling(result.tooling, result.manifest)
    launch = result.manifest["cuda"]["sms"][0]["checks"]
    assert launch["symbol"] == "aot_model_checks" and launch["args"][-1] == {"kind": "status"}
    assert result.tooling["cuda"]["sms"][0]["checks"]["body"] == "checks"


def _checks_launch(manifest):
    return manifest["cuda"]["sms"][0]["checks"]


BAD_CHECKS = [
    (lambda m: m["cuda"]["sms"][0].pop("checks"), "cuda.sms[0]: the manifest has 2 checks but no \"checks\" launch"),
    (lambda m: _checks_launch(m).update(args=_checks_launch(m)["args"][:-1]),
     "cuda.sms[0].checks: args[0]: the checks launch takes one \"status\" argument, its last"),
    (lambda m: _checks_launch(m)["args"].insert(0, {"kind": "status"}),
     "cuda.sms[0].checks: args[0]: the checks launch takes one \"status\" argument, its last"),
    (lambda m: _checks_launch(m)["args"].append({"kind": "status"}),
     "args[1]: the checks launch takes one \"status\" argument, its last"),
    (lambda m: _checks_launch(m).update(args=[{"kind": "status"}, {"kind": "arena", "offset": 0}]),
     "args[0]: the checks launch takes one \"status\" argument, its last"),
    (lambda m: _checks_launch(m)["args"][0].update(offset=1 << 20), "cuda.sms[0].checks: args[0]: \"offset\""),
    (lambda m: _checks_launch(m).pop("symbol"), "cuda.sms[0].checks: missing \"symbol\""),
    (lambda m: _checks_launch(m).update(block=[2048, 1, 1]), "cuda.sms[0].checks: block[0] must be an integer"),
    (lambda m: m["cuda"]["sms"][0].update(checks=[]), "cuda.sms[0].checks: must be an object"),
    (lambda m: m["cuda"]["sms"][0]["kernels"][0]["args"].append({"kind": "status"}),
     "cuda.sms[0].kernels[0]: args[4]: \"kind\" must be one of arena, weights, input, output"),
]


@pytest.mark.parametrize("edit, message", BAD_CHECKS)
def test_bad_checks_launch_is_refused(with_checks, edit, message):
    result, sizes = with_checks
    manifest = copy.deepcopy(result.manifest)
    edit(manifest)
    with pytest.raises(ArtifactError, match=re.escape(message)):
        check_manifest(manifest, sizes)


def test_a_checks_launch_without_checks_is_refused(compiled, with_checks):
    result, sizes = compiled
    manifest = copy.deepcopy(result.manifest)
    manifest["cuda"]["sms"][0]["checks"] = _checks_launch(with_checks[0].manifest)
    message = "cuda.sms[0]: a \"checks\" launch, but the manifest has no checks"
    with pytest.raises(ArtifactError, match=re.escape(message)):
        check_manifest(manifest, sizes)


def test_tooling_checks_entry_only_where_the_manifest_has_a_launch(with_checks):
    result, _ = with_checks
    manifest = copy.deepcopy(result.manifest)
    del manifest["cuda"]["sms"][0]["checks"]
    with pytest.raises(ArtifactError, match=re.escape("cuda.sms[0].checks: only where the manifest's")):
        check_tooling(result.tooling, manifest)
    tooling = copy.deepcopy(result.tooling)
    tooling["cuda"]["sms"][0]["checks"]["blocks"] = "one"
    with pytest.raises(ArtifactError, match="\"blocks\" must be an integer"):
        check_tooling(tooling, result.manifest)
