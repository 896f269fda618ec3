"""GPU code for whole models without a GPU (benchmarks/gpu_suite.py): each StableHLO test case,
each benchmark model and a seeded sample of ONNX node cases gets a GPU kernel for every plan
kernel, ptxas accepts them for sm_80 and sm_90 (where installed), and the GPU-only artifact, run
by the C runtime's CUDA path on the stand-in driver (each launch the kernel's host build),
matches the reference (the interpreter; onnxruntime for the benchmark models; onnx's stored
outputs for node cases)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole models, emulated

import gpu_suite  # noqa: E402
from fake_cuda_util import fake_cuda_env  # noqa: E402

SMS = ["sm_80", "sm_90"]
STABLEHLO = {c.name: c for c in gpu_suite._stablehlo_cases()}
NODE_SAMPLE = 40


@pytest.fixture(scope="module", autouse=True)
def host_dir(tmp_path_factory):
    """The stand-in driver for the module's runs, its host code in a fresh folder."""
    folder = tmp_path_factory.mktemp("host_code")
    with pytest.MonkeyPatch.context() as patch:
        fake_cuda_env(patch, folder)
        yield folder


def _check(case: gpu_suite.GpuCase, host_dir: Path) -> gpu_suite.Row:
    row = gpu_suite.run_case(case, SMS, "runtime", host_dir)
    assert row.status == "ok", f"{case.name}: {row.status}: {row.reason}"
    assert row.kernels > 0
    return row


@pytest.mark.parametrize("name", sorted(STABLEHLO))
def test_stablehlo_case_on_gpu_path(name: str, host_dir: Path) -> None:
    _check(STABLEHLO[name], host_dir)


def test_node_case_sample_on_gpu_path(host_dir: Path) -> None:
    failed = []
    for case in gpu_suite._node_cases(NODE_SAMPLE, seed=0):
        row = gpu_suite.run_case(case, SMS, "runtime", host_dir)
        # a node case the importer rejects is the CPU path's (onnx_suite.py); everything else must pass
        if row.status != "ok" and not (row.status == "rejected" and not row.reason.startswith("CodegenError")):
            failed.append(f"{case.name}: {row.status}: {row.reason}")
    assert not failed, "\n".join(failed)


@pytest.fixture(scope="module")
def benchmark_cases(tmp_path_factory) -> dict[str, gpu_suite.GpuCase]:
    pytest.importorskip("torch")
    return {c.name: c for c in gpu_suite._benchmark_cases(Path(tmp_path_factory.mktemp("gpu_benchmarks")))}


@pytest.mark.parametrize("name", ["mlp", "lenet", "bert_mini", "gpt_block", "mobilenetv2", "resnet18"])
def test_benchmark_model_on_gpu_path(name: str, benchmark_cases, host_dir: Path) -> None:
    _check(benchmark_cases[name], host_dir)
