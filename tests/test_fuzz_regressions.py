"""Every graph the fuzzer found failing (shrunk, tests/data/fuzz/*.onnx) must now match
onnxruntime, on the CPU and thread count it failed with. (tests/data/fuzz/known_hangs/
holds graphs whose compile does not end yet: not replayed, see its README.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from aot.codegen.cpu import CpuTarget
from aot.fuzz.differential import check_case
from aot.fuzz.shrink import load_regression

pytest.importorskip("onnxruntime")

FOUND = sorted((Path(__file__).parent / "data" / "fuzz").glob("*.onnx"))


@pytest.mark.parametrize("path", FOUND, ids=[p.stem for p in FOUND])
def test_found_graph_matches_onnxruntime(path):
    case = load_regression(path)
    if case.cpu != "native" and not CpuTarget.from_name(case.cpu).runs_on(CpuTarget.host()):
        pytest.skip(f"this host cannot run {case.cpu} code")
    outcome = check_case(case)
    assert outcome.kind == "ok", f"{path.name}: {outcome.kind}: {outcome.detail}"
