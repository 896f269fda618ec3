"""benchmarks/gpu_compare.py end to end without a GPU: a small bundle (gpu_bundle.py: mlp at
batch 1 and 2, a 32^3 GEMM, llama_tiny's small config as decode steps at batch 1 and 2 and an
8-token prefill, the kernels' host builds) run through the stand-in CUDA driver
(tests/fake_cuda_util.py) with the torch peers and JAX on the CPU, in a process where
zstandard cannot be imported (the GPU machine has none). The GPU outputs match the CPU
artifact's, the table has its rows and columns, a capped torch.compile says so, and a
wrong reference output fails the run (a model's, or a llama step's cache slots). Also the pieces that need a GPU to run whole: the
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
                            "--host-code", "--no-runtime", "--llm", "small"]) == 0
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
    assert [(e["kind"], e["batch"], e["tokens"]) for e in meta["llm"]] == [("decode", 1, 1), ("decode", 2, 1),
                                                                          ("prefill", 1, 8)]
    cfg, weights = gpu_bundle.load_llm_weights(bundle / "llama" / "weights.npz")
    assert cfg.hidden == 64 and weights["embed"].dtype == np.float32
    assert len(np.unique(weights["l0.wq"])) <= 2 * gpu_bundle.LEVELS  # rounded, so it compresses
    for entry in meta["llm"]:
        assert entry["donations"] == [{"input": 2, "output": 1}, {"input": 3, "output": 2}]
        feeds = gpu_bundle.llm_inputs(cfg, entry)
        assert gpu_bundle.feeds_crc32(feeds) == entry["feeds_crc32"]
        with np.load(bundle / entry["folder"] / "cpu_outputs.npz") as cpu:
            logits, keys, values = gpu_bundle.llm_reference(cpu, feeds, entry)
        assert logits.shape == (entry["batch"], entry["tokens"], cfg.vocab)
        assert keys.shape == values.shape == cfg.cache_shape(entry["batch"])
        written = slice(entry["position"], entry["position"] + entry["tokens"])
        assert not np.array_equal(keys[:, :, :, written], feeds["past_keys"][:, :, :, written])
        assert np.array_equal(np.delete(keys, written, axis=3), np.delete(feeds["past_keys"], written, axis=3))


def test_stand_in_run_passes_and_prints_the_table(bundle, monkeypatch):
    result = _run(bundle, monkeypatch, "--peers", "eager,compile,jax", "--compile-cap", "0.01")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    checks = re.findall(r"^\| mlp \| (\d) \| (aot, [a-z ]+) \| \S+ \| \S+ \| (\w+) \|$", out, re.M)
    assert sorted(checks) == [("1", "aot, device tensors", "PASS"), ("1", "aot, host arrays", "PASS"),
                              ("2", "aot, device tensors", "PASS"), ("2", "aot, host arrays", "PASS")]
    llama = re.findall(r"^\| (llama_tiny [a-zT0-9 ]+) \| (\d) \| (aot, [a-z, ]+) \| \S+ \| \S+ \| (\w+) \|$", out, re.M)
    assert sorted(llama) == sorted((model, batch, path, "PASS") for model, batch in
                                   [("llama_tiny decode", "1"), ("llama_tiny decode", "2"), ("llama_tiny prefill T8", "1")]
                                   for path in ("aot, host arrays", "aot, device tensors, cache donated"))
    assert len(re.findall(r"^llama_tiny .*: jax compile .* PASS$", out, re.M)) == 3
    rows = _table(out)
    assert [(r[0], r[1]) for r in rows] == [("mlp", "1"), ("mlp", "2"), ("llama_tiny decode", "1"),
                                            ("llama_tiny decode", "2"), ("llama_tiny prefill T8", "1")]
    for row in rows[2:]:
        float(row[2]), float(row[3]), float(row[5])  # aot, eager and jax measured
        rates = row[9].split(" / ")
        assert len(rates) == 3 and all(float(r) > 0 for r in rates)
        tokens = 8 if "prefill" in row[0] else int(row[1])
        assert float(rates[0]) == pytest.approx(tokens / float(row[2]) * 1e3, rel=0.01)
    for row in rows[:2]:
        assert len(row) == 10 and row[9] == "-"
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


def test_a_wrong_cache_slot_fails_a_llama_step(bundle, monkeypatch, tmp_path):
    wrong = tmp_path / "bundle"
    shutil.copytree(bundle, wrong)
    outputs = wrong / "llama_decode_b2t1" / "cpu_outputs.npz"
    arrays = dict(np.load(outputs))
    arrays["present_values.written"] = arrays["present_values.written"] + np.float32(0.5)
    np.savez(outputs, **arrays)
    result = _run(wrong, monkeypatch, "--peers", "", "--model", "llama_tiny")
    assert result.returncode == 1, result.stdout + result.stderr
    for path in ("aot, host arrays", "aot, device tensors, cache donated"):
        assert re.search(rf"^\| llama_tiny decode \| 2 \| {path} \| 0\.5 \| .* \| FAIL \|$", result.stdout, re.M)
        assert re.search(rf"^\| llama_tiny decode \| 1 \| {path} \| .* \| PASS \|$", result.stdout, re.M)
    assert "| mlp |" not in result.stdout and "FAILED" in result.stdout


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
    assert line == "| m | 1 | 1.000 | 2.000 | skipped (deadline) | n/a (op sort) | 0.50 | - | - | - |"
    step = gpu_compare.Row("llama", 8, {"aot": 2.0, "eager": 4.0, "jax": "error: x"}, tokens=1)
    assert gpu_compare.tokens_per_s(step) == "4000 / 2000 / -"
    prefill = gpu_compare.Row("llama", 1, {"aot": 16.0, "eager": 8.0, "jax": 32.0}, tokens=64)
    assert gpu_compare.table([prefill])[2].endswith("| 4000 / 8000 / 2000 |")
