"""Differential graph testing (aot/fuzz): seeded short runs against onnxruntime, through
the CPU code paths and through the GPU kernels (emulated on the host, their PTX through
ptxas where installed), and the generator's and shrinker's own contracts. The long run
is benchmarks/fuzz_graphs.py."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.target import runnable_code_paths
from aot.codegen.nvptx.ptxas import ptxas_path
from aot.fuzz import differential
from aot.fuzz.differential import compare, check_case
from aot.fuzz.generate import GPU_TARGETS, FuzzCase, case_for, random_model
from aot.fuzz.shrink import load_regression, save_regression, shrink

ort = pytest.importorskip("onnxruntime")
import fuzz_graphs  # noqa: E402

# the host, then each other x86 code path it runs (AVX-512, AVX2, SSE4)
CPUS = ["native", *(t.cpu for t in runnable_code_paths(CpuTarget.host())[1:])]
SHORT_RUN = 90  # graphs: about 30 s on one core
GPU_SHORT_RUN = 60  # graphs through the GPU kernels (emulated), fp32 and tf32: about 45 s on one core


@pytest.mark.slow
def test_seeded_short_run_matches_onnxruntime():
    failures = []
    for seed in range(SHORT_RUN):
        outcome = check_case(case_for(seed, CPUS))
        if outcome.kind != "ok":
            failures.append(f"seed {seed}: {outcome.kind}: {outcome.detail}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_seeded_short_run_on_the_gpu_kernels_matches_onnxruntime():
    failures = []
    for seed in range(GPU_SHORT_RUN):
        case = case_for(seed, list(GPU_TARGETS))
        outcome = check_case(case)
        if outcome.kind != "ok":
            failures.append(f"seed {seed} ({case.target}): {outcome.kind}: {outcome.detail}")
    assert not failures, "\n".join(failures)


def test_targets_keep_the_seed_to_case_mapping():
    # a CPU case is the graph it always was; a GPU case draws from GPU_OPS, by the seed alone
    for seed in range(30):
        cpu_case = case_for(seed, CPUS)
        assert not cpu_case.gpu and cpu_case.target == cpu_case.cpu
        mixed = case_for(seed, ["native", "gpu", "gpu-tf32"])
        assert mixed == case_for(seed, ["native", "gpu", "gpu-tf32"])
        assert mixed.gpu == {"native": "", "gpu": "fp32", "gpu-tf32": "tf32"}[mixed.target]
        graph = random_model(seed, gpu=bool(mixed.gpu))
        assert mixed.model.SerializeToString() == graph.SerializeToString()
    assert {case_for(s, ["native", "gpu", "gpu-tf32"]).target for s in range(30)} == {"native", "gpu", "gpu-tf32"}


def test_gpu_cases_also_draw_sorting_scatter_and_arg_reductions():
    gpu_only = {"TopK", "ScatterElements", "ScatterND", "ArgMax", "ArgMin"}
    assert gpu_only <= {node.op_type for seed in range(100) for node in random_model(seed, gpu=True).graph.node}
    assert not gpu_only & {node.op_type for seed in range(300) for node in random_model(seed).graph.node}
    for seed in range(40):
        model = random_model(seed, gpu=True)
        onnx.checker.check_model(model, full_check=True)
        assert model.SerializeToString() == random_model(seed, gpu=True).SerializeToString()


def _dot_case(gpu: str) -> FuzzCase:
    return next(c for c in (FuzzCase(s, random_model(s), gpu=gpu) for s in range(200))
                if any(n.op_type == "MatMul" for n in c.model.graph.node))


def test_a_gpu_case_runs_the_emulated_gpu_kernels(monkeypatch):
    case = _dot_case("fp32")
    assert check_case(case).kind == "ok"
    from aot.codegen.nvptx.emulate import EmulatedKernels

    real_run = EmulatedKernels.run

    def off_by_one(self, feeds):  # a stand-in for a wrong GPU kernel
        return [out + 1 for out in real_run(self, feeds)]

    monkeypatch.setattr(EmulatedKernels, "run", off_by_one)
    assert check_case(case).kind == "mismatch"
    assert check_case(FuzzCase(case.seed, case.model)).kind == "ok"  # the CPU path does not run them


def test_tf32_loosens_the_tolerance_only_where_a_dot_ran_on_tensor_cores(monkeypatch):
    seen = []
    real_compare = differential.compare

    def spy(got, want, rtol=differential.RTOL, atol=differential.ATOL):
        seen.append((rtol, atol))
        return real_compare(got, want, rtol, atol)

    monkeypatch.setattr(differential, "compare", spy)
    assert check_case(_dot_case("tf32")).kind == "ok"
    assert set(seen) == {(differential.TF32_RTOL, differential.TF32_ATOL)}
    seen.clear()
    plain = next(FuzzCase(s, random_model(s), gpu="tf32") for s in range(200)
                 if not any(n.op_type in ("MatMul", "Gemm", "Conv") for n in random_model(s).graph.node))
    assert check_case(plain).kind == "ok"
    assert set(seen) == {(differential.RTOL, differential.ATOL)}


@pytest.mark.skipif(ptxas_path() is None, reason="ptxas (CUDA toolkit) is not on PATH")
def test_a_ptx_that_ptxas_rejects_is_a_finding(monkeypatch):
    import aot.codegen.nvptx as nvptx

    real_emit = nvptx.emit_gpu

    def broken(plan, target):
        code = real_emit(plan, target)
        return dataclasses.replace(code, ptx=code.ptx.replace("ret;", "ret.bogus;", 1))

    monkeypatch.setattr(nvptx, "emit_gpu", broken)
    outcome = check_case(FuzzCase(0, random_model(0), gpu="fp32"))
    assert outcome.kind == "ptxas_error" and "rejected the PTX" in outcome.detail


def test_a_gpu_regression_saves_and_replays_on_the_gpu_path(tmp_path):
    case = FuzzCase(7, random_model(7), gpu="tf32")
    again = load_regression(save_regression(case, "mismatch", "stand-in", tmp_path))
    assert again.model.graph == case.model.graph and (again.seed, again.gpu, again.target) == (7, "tf32", "gpu-tf32")
    cpu = load_regression(save_regression(FuzzCase(7, random_model(7), "native", 2), "mismatch", "x", tmp_path))
    assert (cpu.gpu, cpu.cpu, cpu.threads) == ("", "native", 2)


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


def test_the_long_run_program_runs_gpu_cases(tmp_path, capsys):
    assert fuzz_graphs.main(["--graphs", "3", "--gpu", "--save", str(tmp_path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["graphs"] == 3 and summary["outcomes"] == {"ok": 3}
    assert set(summary["per_target"]) <= set(GPU_TARGETS) and not list(tmp_path.iterdir())
    with pytest.raises(SystemExit):
        fuzz_graphs.main(["--gpu", "--cpus", "native"])
