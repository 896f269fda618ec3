"""Every graph the fuzzer found failing (shrunk, tests/data/fuzz/*.onnx) must now match
onnxruntime, on the CPU and thread count it failed with, or, where its metadata names a
GPU path (fuzz.gpu), through the GPU kernels emulated with that matmul precision. A graph that once crashed or hung
its worker runs in a child process with a time limit, so it fails the test, not the suite."""
from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from aot.codegen.cpu import CpuTarget
from aot.fuzz.differential import check_case
from aot.fuzz.shrink import load_regression
from paths_util import TEST_DATA

pytest.importorskip("onnxruntime")

FOUND = sorted((TEST_DATA / "fuzz").glob("*.onnx"))
ISOLATED_SECONDS = 120  # these compile in well under a second; a hang never ends


def _check_in_child(path: Path, results) -> None:
    outcome = check_case(load_regression(path))
    results.put((outcome.kind, outcome.detail))


@pytest.mark.parametrize("path", FOUND, ids=[p.stem for p in FOUND])
def test_found_graph_matches_onnxruntime(path):
    case = load_regression(path)
    if case.cpu != "native" and not CpuTarget.from_name(case.cpu).runs_on(CpuTarget.host()):
        pytest.skip(f"this host cannot run {case.cpu} code")
    failure = {p.key: p.value for p in case.model.metadata_props}.get("fuzz.failure", "")
    if failure not in ("crash", "hang"):
        outcome = check_case(case)
        assert outcome.kind == "ok", f"{path.name}: {outcome.kind}: {outcome.detail}"
        return
    context = mp.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_check_in_child, args=(path, results))
    child.start()
    child.join(ISOLATED_SECONDS)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"{path.name}: still compiling or running after {ISOLATED_SECONDS} s (it once hung)")
    assert child.exitcode == 0, f"{path.name}: the process died with exit code {child.exitcode}"
    kind, detail = results.get(timeout=5)
    assert kind == "ok", f"{path.name}: {kind}: {detail}"
