"""aarch64 artifacts of the sample models, run under qemu-aarch64 and compared with onnxruntime on the host.

The C runtime and its run_model example are cross-built (runtime_c's `make cross-aarch64`:
Debian's gcc-aarch64-linux-gnu and libzstd-dev:arm64) and each artifact runs under
qemu-aarch64 (Debian's qemu-user) on an emulated CPU that has the features its code may use
and no more: generic aarch64 code on a Cortex-A57 (Armv8.0), neoverse-n1 code on a Neoverse
N1, neoverse-v1 code (SVE) on qemu's `max` at two SVE vector lengths, since the code must not
depend on one. Correctness only: speed under emulation says nothing.
Some of the runtime's C tests run under qemu-aarch64 too (all: `make cross-aarch64-test`).
Skips, saying why, where the cross compiler, the arm64 libzstd or qemu-aarch64 is missing
(scripts/setup.sh --aarch64 installs all three, and CI passes it, so CI runs these).
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import make_samples as samples
from aot.codegen.cpu.target import CpuTarget
from aot.driver import compile_model
from paths_util import RUNTIME_C

ort = pytest.importorskip("onnxruntime")

CROSS_CC = "aarch64-linux-gnu-gcc"
QEMU = "qemu-aarch64"
MODELS = ["mlp", "lenet", "lenet_bn"]
# (--cpu, the qemu CPU models its code runs on: the oldest one that has its features)
TARGETS = [("generic-aarch64", ["cortex-a57"]), ("neoverse-n1", ["neoverse-n1"]),
           ("neoverse-v1", ["max,sve-default-vector-length=16", "max,sve-default-vector-length=64"])]
RUN_TIMEOUT_S = 120


def _missing_tools() -> str | None:
    """Why aarch64 artifacts cannot be run here, or None."""
    for tool, package in ((CROSS_CC, "gcc-aarch64-linux-gnu"), (QEMU, "qemu-user")):
        if shutil.which(tool) is None:
            return f"no {tool} (Debian: apt-get install {package})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing_tools() is not None, reason=str(_missing_tools()))]


def _cross_make(target: str, build: Path) -> subprocess.CompletedProcess[str]:
    """runtime_c's `make TARGET` for aarch64 into `build` (AARCH64_BUILD_DIR, for cross-aarch64;
    BUILD_DIR and the cross compiler, for one file); skips where there is no libzstd for arm64."""
    probe = build / "zstd_probe.c"
    probe.write_text("#include <zstd.h>\nint main(void) { return ZSTD_versionNumber() == 0; }\n")
    found = subprocess.run([CROSS_CC, str(probe), "-o", str(build / "zstd_probe"), "-lzstd"],
                           capture_output=True, text=True)
    if found.returncode != 0:
        pytest.skip("no libzstd for arm64 (Debian: dpkg --add-architecture arm64 && apt-get update && "
                    f"apt-get install libzstd-dev:arm64): {found.stderr.strip()[-300:]}")
    return subprocess.run(["make", "-s", "-C", str(RUNTIME_C), target, f"AARCH64_BUILD_DIR={build}",
                           f"BUILD_DIR={build}", f"CC={CROSS_CC}"], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def aarch64_build(tmp_path_factory) -> Path:
    """The runtime and run_model cross-built for aarch64 (`make cross-aarch64`), in this folder."""
    build = tmp_path_factory.mktemp("runtime-aarch64")
    made = _cross_make("cross-aarch64", build)
    assert made.returncode == 0, f"make cross-aarch64 failed:\n{made.stdout}\n{made.stderr}"
    return build


@pytest.fixture(scope="module")
def run_model(aarch64_build) -> Path:
    return aarch64_build / "run_model"


# test_runtime is left out: its count of a context's worker threads (/proc/self/status)
# is off by one now and then under qemu, whose threads outlive the guest's join for a
# moment; `make cross-aarch64-test` runs it too
C_TESTS = ["test_json", "test_schedule", "test_cpu_features_aarch64"]


@pytest.mark.parametrize("name", C_TESTS)
def test_c_runtime_test_passes_under_qemu(name, aarch64_build):
    """The runtime's own C tests of JSON, the thread pool's schedule and the aarch64 feature
    check, built for aarch64 with warnings as errors and run under qemu-aarch64 (on a
    Neoverse N1, whose capabilities the feature test reads)."""
    made = _cross_make(str(aarch64_build / name), aarch64_build)
    assert made.returncode == 0, f"building {name} failed:\n{made.stdout}\n{made.stderr}"
    done = subprocess.run([QEMU, "-cpu", "neoverse-n1", str(aarch64_build / name)], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, f"{name} under qemu failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    assert " 0 failures" in done.stdout, done.stdout


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory) -> dict[str, Path]:
    return samples.write_samples(tmp_path_factory.mktemp("samples"))


def _reference(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The sample's seeded input and onnxruntime's output for it, on the host."""
    x = np.load(path.with_name(f"{path.stem}.input.npy"))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x})
    return x, y


def _run_under_qemu(run_model: Path, artifact: Path, x: np.ndarray, shape: tuple[int, ...],
                    qemu_cpu: str) -> subprocess.CompletedProcess[str] | np.ndarray:
    """The artifact's output for `x` from run_model under qemu-aarch64 -cpu `qemu_cpu`, or the
    finished process where it failed."""
    x_path = artifact.with_suffix(".x.bin")
    y_path = artifact.with_suffix(f".{qemu_cpu.replace(',', '_').replace('=', '')}.y.bin")
    x.astype(np.float32).tofile(x_path)
    done = subprocess.run([QEMU, "-cpu", qemu_cpu, str(run_model), str(artifact), "-i", str(x_path),
                           "-o", str(y_path)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        return done
    return np.fromfile(y_path, dtype=np.float32).reshape(shape)


def _assert_matches(ours: np.ndarray, theirs: np.ndarray) -> None:
    scale = float(np.max(np.abs(theirs)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize("cpu,qemu_cpus", TARGETS, ids=[cpu for cpu, _ in TARGETS])
@pytest.mark.parametrize("name", MODELS)
def test_sample_matches_onnxruntime_under_qemu(name, cpu, qemu_cpus, sample_dir, run_model, tmp_path):
    path = sample_dir[name]
    x, expected = _reference(path)
    artifact = tmp_path / f"{name}.aot"
    result = compile_model(path, artifact, cpu=cpu)
    assert [(c["arch"], c["cpu"]) for c in result.manifest["cpu"]] == [("aarch64", CpuTarget.from_name(cpu).cpu)]
    for qemu_cpu in qemu_cpus:
        got = _run_under_qemu(run_model, artifact, x, expected.shape, qemu_cpu)
        assert isinstance(got, np.ndarray), f"run_model under -cpu {qemu_cpu} failed ({got.returncode}): {got.stderr}"
        _assert_matches(got, expected)


def test_sve_code_is_refused_on_a_cpu_without_sve(sample_dir, run_model, tmp_path):
    """neoverse-v1 code uses SVE (LLVM's predicated loads): on a Neoverse N1 the runtime must
    refuse it at open, naming what the CPU lacks, not die of SIGILL in the first run."""
    path = sample_dir["lenet"]
    x, expected = _reference(path)
    artifact = tmp_path / "lenet.aot"
    result = compile_model(path, artifact, cpu="neoverse-v1")
    assert "sve" in result.manifest["cpu"][0]["aarch64_features"]
    got = _run_under_qemu(run_model, artifact, x, expected.shape, "neoverse-n1")
    assert not isinstance(got, np.ndarray), "SVE code ran on a CPU without SVE"
    assert got.returncode == 1, got.stderr  # an error from open, not a signal
    assert "sve" in got.stderr and "neoverse-v1" in got.stderr, got.stderr


def test_one_artifact_with_x86_and_aarch64_code_runs_on_both(sample_dir, run_model, tmp_path):
    """--cpu x86-64-v3,neoverse-n1: the host (x86-64) runtime loads the x86 variant, the
    aarch64 one under qemu the aarch64 variant, from one artifact with one weights section."""
    from aot.runtime.session import Session

    host = CpuTarget.host()
    v3 = CpuTarget.from_name("x86-64-v3")
    if host.arch != "x86_64" or not v3.runs_on(host):
        pytest.skip(f"the host ({host.cpu}) cannot run x86-64-v3 code")
    path = sample_dir["lenet_bn"]
    x, expected = _reference(path)
    artifact = tmp_path / "lenet_bn.aot"
    result = compile_model(path, artifact, cpu="x86-64-v3,neoverse-n1")
    assert [c["arch"] for c in result.manifest["cpu"]] == ["x86_64", "aarch64"]
    session = Session(str(artifact))
    assert session.cpu_variant == "x86-64-v3"
    (on_host,) = session.run(None, {"x": x})
    _assert_matches(on_host, expected)
    got = _run_under_qemu(run_model, artifact, x, expected.shape, "neoverse-n1")
    assert isinstance(got, np.ndarray), f"run_model under qemu failed ({got.returncode}): {got.stderr}"
    _assert_matches(got, expected)


def _variant_under_qemu(run_model: Path, artifact: Path, qemu_cpu: str) -> str:
    """The CPU variant the aarch64 runtime loads from `artifact` on qemu's `qemu_cpu`."""
    done = subprocess.run([QEMU, "-cpu", qemu_cpu, str(run_model), str(artifact)], capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("cpu variant ")]
    assert len(lines) == 1, done.stdout
    return lines[0].removeprefix("cpu variant ")


def test_portable_aarch64_runs_the_best_variant_each_cpu_has(sample_dir, run_model, tmp_path):
    """--cpu portable-aarch64 (built on this x86 host): neoverse-v1, neoverse-n1 and generic code
    in one artifact; an SVE CPU loads the first, a Neoverse N1 the second, a Cortex-A57 (Armv8.0)
    the third, each matching onnxruntime."""
    path = sample_dir["lenet"]
    x, expected = _reference(path)
    artifact = tmp_path / "lenet.aot"
    result = compile_model(path, artifact, cpu="portable-aarch64")
    assert [c["cpu"] for c in result.manifest["cpu"]] == ["neoverse-v1", "neoverse-n1", "generic"]
    for qemu_cpu, variant in (("max,sve-default-vector-length=32", "neoverse-v1"), ("neoverse-n1", "neoverse-n1"),
                              ("cortex-a57", "generic")):
        assert _variant_under_qemu(run_model, artifact, qemu_cpu) == variant, qemu_cpu
        got = _run_under_qemu(run_model, artifact, x, expected.shape, qemu_cpu)
        assert isinstance(got, np.ndarray), f"run_model under -cpu {qemu_cpu} failed ({got.returncode}): {got.stderr}"
        _assert_matches(got, expected)
