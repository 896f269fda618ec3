"""Differential graph testing (aot/fuzz): a seeded short run against onnxruntime, and
the generator's and shrinker's own contracts. The long run is benchmarks/fuzz_graphs.py."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.target import runnable_code_paths
from aot.fuzz.differential import compare, check_case
from aot.fuzz.generate import FuzzCase, case_for, random_model
from aot.fuzz.shrink import load_regression, save_regression, shrink

ort = pytest.importorskip("onnxruntime")
import fuzz_graphs  # noqa: E402

# the host, then each other x86 code path it runs (AVX-512, AVX2, SSE4)
CPUS = ["native", *(t.cpu for t in runnable_code_paths(CpuTarget.host())[1:])]
SHORT_RUN = 90  # graphs: about 30 s on one core


@pytest.mark.slow
def test_seeded_short_run_matches_onnxruntime():
    failures = []
    for seed in range(SHORT_RUN):
        outcome = check_case(case_for(seed, CPUS))
        if outcome.kind != "ok":
            failures.append(f"seed {seed}: {outcome.kind}: {outcome.detail}")
    assert not failures, "\n".join(failures)


def test_generator_is_deterministic_and_valid_by_construction():
    for seed in range(40):
        model = random_model(seed)
        assert model.SerializeToString() == random_model(seed).SerializeToString()
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        assert len(inferred.graph.output) == len(model.graph.output)


def test_generator_covers_the_ops_the_pipeline_fuses_tiles_and_plans():
    seen = {node.op_type for seed in range(300) for node in random_model(seed).graph.node}
    wanted = {"Conv", "MatMul", "Gemm", "MaxPool", "AveragePool", "Concat", "Slice", "Pad", "Reshape", "Transpose",
              "Softmax", "LayerNormalization", "BatchNormalization", "ReduceSum", "ReduceMax", "Gather", "Split",
              "Expand", "Where", "Add", "Mul", "Relu"}
    assert wanted <= seen, wanted - seen


def test_shared_producers_with_several_consumers_occur():
    counts = []
    for seed in range(100):
        reads: dict[str, int] = {}
        for node in random_model(seed).graph.node:
            for name in node.input:
                reads[name] = reads.get(name, 0) + 1
        counts.append(max(reads.values(), default=0))
    assert sum(c >= 2 for c in counts) >= 30


def test_compare_names_the_worst_element():
    want = np.zeros((2, 3), np.float32)
    got = want.copy()
    assert compare(got, want) == ""
    got[1, 2] = 0.5
    assert "at (1, 2)" in compare(got, want)
    assert "shape" in compare(got[:1], want)
    got = want.copy()
    got[0, 0] = np.nan
    assert "NaN at (0, 0)" in compare(got, want)


def test_a_mismatch_is_found_shrunk_and_saved(tmp_path):
    # a stand-in for a miscompile: "fails" while the graph still holds a MaxPool; the
    # shrinker must get down to that one node and keep the failing property
    case = next(c for c in (case_for(s, ["native"]) for s in range(200))
                if sum(n.op_type == "MaxPool" for n in c.model.graph.node) == 1 and len(c.model.graph.node) >= 5)

    def still_fails(candidate: FuzzCase) -> bool:
        onnx.checker.check_model(candidate.model, full_check=True)  # every step stays a valid model
        return any(n.op_type == "MaxPool" for n in candidate.model.graph.node)

    small = shrink(case, still_fails)
    assert [n.op_type for n in small.model.graph.node] == ["MaxPool"]
    path = save_regression(small, "mismatch", "stand-in", tmp_path)
    again = load_regression(path)
    assert again.model.graph == small.model.graph and (again.seed, again.cpu, again.threads) == (small.seed, small.cpu, small.threads)
    assert check_case(again).kind == "ok"


def test_the_long_run_program_runs_workers_and_summarizes(tmp_path, capsys):
    assert fuzz_graphs.main(["--graphs", "4", "--workers", "2", "--cpus", "native", "--save", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["graphs"] == 4 and summary["outcomes"] == {"ok": 4} and not list(tmp_path.iterdir())
