"""benchmarks/gpu_compare.py end to end without a GPU: a small bundle (gpu_bundle.py: mlp at
batch 1 and 2, a 32^3 GEMM, the kernels' host builds) run through the stand-in CUDA driver
(tests/fake_cuda_util.py) with the torch peers and JAX on the CPU, in a process where
zstandard cannot be imported (the GPU machine has none). The GPU outputs match the CPU
artifact's, the table has its rows and columns, a capped torch.compile says so, and a
wrong reference output fails the run. Also the pieces that need a GPU to run whole: the
kernel spans read from a profiler trace, the comparison and the table's cells."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpu_bundle
import gpu_compare
from fake_cuda_util import fake_cuda_env

pytest.importorskip("torch")  # the bundle's models are torch modules, and so are the peers
ROOT = Path(__file__).resolve().parents[2]

# runs gpu_compare.py as __main__ with every import of zstandard refused
NO_ZSTANDARD = """
import runpy, sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "zstandard":
            raise ModuleNotFoundError("no zstandard on the GPU machine")
sys.meta_path.insert(0, Refuse())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    assert gpu_bundle.main([str(out), "--model", "mlp", "--batch", "1", "--batch", "2", "--gemm-size", "32",
                            "--host-code", "--no-runtime"]) == 0
    return out


def _run(bundle: Path, monkeypatch, *args: str) -> subprocess.CompletedProcess:
    fake_cuda_env(monkeypatch, bundle / "host")
    command = [sys.executable, "-c", NO_ZSTANDARD, str(ROOT / "benchmarks" / "gpu_compare.py"), str(bundle),
               "--peer-device", "cpu", "--quick", "--runs", "2", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def _table(stdout: str) -> list[list[str]]:
    lines = stdout[stdout.index("## Table"):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model | batch | aot ms"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_bundle_holds_what_the_device_side_reads(bundle):
    meta = json.loads((bundle / "bundle.json").read_text())
    assert [(e["model"], e["batch"]) for e in meta["models"]] == [("mlp", 1), ("mlp", 2)]
    assert [g["precision"] for g in meta["gemm"]] == ["fp32", "tf32"]
    for entry in meta["models"]:
        assert (bundle / entry["folder"] / "model.aot").is_file() and (bundle / entry["onnx"]).is_file()
        assert not (bundle / entry["folder"] / "inputs.npz").exists()  # made again there
        x = gpu_bundle.case_input(entry["shape"])
        assert x.shape == tuple(entry["shape"]) and x.dtype == np.float32
    assert any((bundle / "host").glob("*.so"))


def test_stand_in_run_passes_and_prints_the_table(bundle, monkeypatch):
    result = _run(bundle, monkeypatch, "--peers", "eager,compile,jax", "--compile-cap", "0.01")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    checks = re.findall(r"^\| mlp \| (\d) \| (aot, [a-z ]+) \| \S+ \| \S+ \| (\w+) \|$", out, re.M)
    assert sorted(checks) == [("1", "aot, device tensors", "PASS"), ("1", "aot, host arrays", "PASS"),
                              ("2", "aot, device tensors", "PASS"), ("2", "aot, host arrays", "PASS")]
    rows = _table(out)
    assert [(r[0], r[1]) for r in rows] == [("mlp", "1"), ("mlp", "2")]
    for row in rows:
        assert len(row) == 9
        float(row[2]), float(row[3])  # aot and eager measured
        assert row[4].startswith("compile > 0.01 s cap") or row[4].startswith("skipped (an earlier compile")
        assert re.fullmatch(r"[0-9.]+|n/a \(no jax.*", row[5]), row[5]
        float(row[6])  # aot/eager
    assert re.search(r"^GEMM 32\^3 fp32: aot .* cuBLAS \(TF32 off\) .* \(PASS\)$", out, re.M)
    assert re.search(r"^GEMM 32\^3 tf32: aot .* cuBLAS \(TF32 on\) .* \(PASS\)$", out, re.M)
    assert "aot_run_device overhead: n/a" in out
    assert "all GPU outputs match" in out


def test_a_wrong_reference_fails_the_run(bundle, monkeypatch, tmp_path):
    wrong = tmp_path / "bundle"
    shutil.copytree(bundle, wrong)
    outputs = wrong / "mlp_b2" / "cpu_outputs.npz"
    arrays = dict(np.load(outputs))
    arrays = {k: v + np.float32(0.5) for k, v in arrays.items()}
    np.savez(outputs, **arrays)
    result = _run(wrong, monkeypatch, "--peers", "", "--model", "mlp")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"^\| mlp \| 2 \| aot, host arrays \| 0\.5 \| .* \| FAIL \|$", result.stdout, re.M)
    assert re.search(r"^\| mlp \| 1 \| aot, host arrays \| .* \| PASS \|$", result.stdout, re.M)
    assert "FAILED" in result.stdout


def test_kernel_spans_split_a_trace_into_runs():
    trace = {"traceEvents": [
        {"cat": "kernel", "name": "aot_kernel_0", "ts": 100.0, "dur": 5.0},
        {"cat": "gpu_memcpy", "name": "Memcpy DtoH", "ts": 112.0, "dur": 1.0},
        {"cat": "kernel", "name": "aot_kernel_1", "ts": 106.0, "dur": 4.0},
        {"cat": "kernel", "name": "aot_kernel_0", "ts": 200.0, "dur": 6.0},
        {"cat": "kernel", "name": "aot_kernel_1", "ts": 207.0, "dur": 3.0},
    ]}
    assert gpu_compare.kernel_spans(trace, 2) == pytest.approx([0.010, 0.010])
    with pytest.raises(ValueError, match="3 kernels for 2 runs"):
        gpu_compare.kernel_spans({"traceEvents": trace["traceEvents"][:4]}, 2)


def test_compare_within_and_outside_tolerance():
    want = [np.array([1.0, -2.0, 0.0, np.nan, np.inf], np.float32)]
    assert gpu_compare.compare([want[0] * (1 + 5e-4)], want)[2]
    assert not gpu_compare.compare([want[0] + np.float32(0.01)], want)[2]
    assert not gpu_compare.compare([np.zeros(3, np.float32)], want)[2]  # another shape
    assert not gpu_compare.compare([np.where(np.isnan(want[0]), 0, want[0])], want)[2]  # a number for NaN


def test_cells_and_ratios():
    row = gpu_compare.Row("m", 1, {"aot": 1.0, "eager": 2.0, "compile": "skipped (deadline)", "jax": "n/a (op sort)"})
    (line,) = gpu_compare.table([row])[2:]
    assert line == "| m | 1 | 1.000 | 2.000 | skipped (deadline) | n/a (op sort) | 0.50 | - | - |"
