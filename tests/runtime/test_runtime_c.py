"""The C runtime: its own C tests, and the Python Session over it.

The artifact used here is hand-built: runtime_c/tests/testmodel.c compiled
like compiler output (-shared -nostdlib), packed by aot.artifact, so these
tests also check that the Python writer and the C reader agree.
"""

import os
import platform
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from aot.artifact import FORMAT_VERSION, pack_artifact, read_artifact
from aot.errors import ArtifactError, RunError
from aot.runtime.library import build_runtime
from aot.runtime.session import Session
from paths_util import RUNTIME_C as RUNTIME_DIR
CC = shutil.which(os.environ.get("CC", "cc"))
ARCH = platform.machine()

pytestmark = pytest.mark.skipif(CC is None or ARCH not in ("x86_64", "aarch64"),
                                reason="needs a C compiler on x86_64/aarch64 Linux")

W = (0.5 + 0.25 * np.arange(37)).astype(np.float32)


def _manifest(symbol1: str = "aot_kernel_1") -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "model": {"name": "axpb"},
        "inputs": [{"name": "x", "dtype": "float32", "shape": [4, 37]}],
        "outputs": [{"name": "y", "dtype": "float32", "shape": [4, 37]},
                    {"name": "s", "dtype": "float32", "shape": []}],
        "arena": {"bytes": 592, "alignment": 64},
        "weights": {"section": "weights", "bytes": 148, "alignment": 64},
        "cpu": [{"section": f"cpu.{ARCH}", "arch": ARCH, "entry": "aot_model_entry"}],
        "kernels": [{"name": "k0", "symbol": "aot_kernel_0", "work": 148},
                    {"name": "k1", "symbol": symbol1, "work": 148},
                    {"name": "k2", "symbol": "aot_kernel_2", "work": 1}],
    }


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    path = build_runtime(cache=cache)
    assert build_runtime(cache=cache) == path  # cached: no second build
    return path


@pytest.fixture(autouse=True)
def _use_lib(lib_path, monkeypatch):
    monkeypatch.setenv("AOT_RUNTIME_LIB", str(lib_path))


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> bytes:
    out = tmp_path_factory.mktemp("code") / "testmodel.so"
    subprocess.run([CC, "-O2", "-fPIC", "-ffreestanding", "-fno-builtin", "-nostdlib", "-shared",
                    "-o", str(out), str(RUNTIME_DIR / "tests" / "testmodel.c")], check=True)
    return out.read_bytes()


@pytest.fixture(scope="module")
def blob(code) -> bytes:
    return pack_artifact(_manifest(), [("weights", W.tobytes()), (f"cpu.{ARCH}", code)])


def _expected(x: np.ndarray):
    y = x * np.tile(W, 4).reshape(4, 37) + np.float32(1)
    s = np.float32(0)
    for v in y.ravel():  # same order as the kernel
        s = np.float32(s + v)
    return y, s


def test_c_suite(tmp_path):
    proc = subprocess.run(["make", "-C", str(RUNTIME_DIR), f"BUILD_DIR={tmp_path}", "test"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "C tests passed" in proc.stdout


@pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="needs gcc sanitizers")
def test_c_suite_asan(tmp_path):
    proc = subprocess.run(["make", "-C", str(RUNTIME_DIR), f"BUILD_DIR={tmp_path}", "CC=gcc", "asan-test"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "C tests passed" in proc.stdout


def test_session_runs(blob, tmp_path):
    path = tmp_path / "m.aot"
    path.write_bytes(blob)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 37)).astype(np.float32)
    want_y, want_s = _expected(x)
    for src in (path, str(path), blob):
        for threads in (None, 1, 3):
            with Session(src, threads=threads) as s:
                ins, outs = s.get_inputs(), s.get_outputs()
                assert [(i.name, i.shape, i.dtype, i.type) for i in ins] == [("x", [4, 37], np.float32, "tensor(float)")]
                assert [(o.name, o.shape) for o in outs] == [("y", [4, 37]), ("s", [])]
                assert s.model_name == "axpb"
                y, sc = s.run(None, {"x": x})
                np.testing.assert_array_equal(y, want_y)
                assert sc.shape == () and sc == want_s
                (only_s,) = s.run(["s"], {"x": x})
                assert only_s == want_s


def test_session_threads_match(blob):
    x = np.arange(148, dtype=np.float32).reshape(4, 37)[:, ::-1] * -1.5  # not contiguous
    with Session(blob, threads=1) as s1, Session(blob, threads=4) as s4:
        a = s1.run(None, {"x": x})
        for _ in range(20):
            b = s4.run(None, {"x": x})
            np.testing.assert_array_equal(a[0], b[0])
            assert a[1] == b[1]


def test_plain_and_checked_feeds_give_the_same_run(blob):
    # a C-contiguous float32 array of the input's shape in a dict goes straight to the runtime;
    # every other feed (read-only, a view to copy, a mapping that is not a dict) through
    # the checks: all the same outputs, and new arrays on every run
    x = np.random.default_rng(1).standard_normal((4, 37)).astype(np.float32)
    want_y, want_s = _expected(x)
    read_only = x.copy()
    read_only.flags.writeable = False
    strided = np.asfortranarray(x)
    from types import MappingProxyType
    with Session(blob) as s:
        first = s.run(None, {"x": x})
        for feeds in ({"x": x}, {"x": read_only}, {"x": strided}, MappingProxyType({"x": x})):
            y, sc = s.run(None, feeds)
            np.testing.assert_array_equal(y, want_y)
            assert sc == want_s and y is not first[0]
        with pytest.raises(RunError, match="unknown input 'z'"):
            s.run(None, {"z": x})


def test_sessions_in_parallel_threads(blob):
    errors = []

    def work(seed):
        try:
            with Session(blob, threads=2) as s:
                rng = np.random.default_rng(seed)
                for _ in range(50):
                    x = rng.standard_normal((4, 37)).astype(np.float32)
                    y, sc = s.run(None, {"x": x})
                    np.testing.assert_array_equal(y, _expected(x)[0])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_session_input_errors(blob):
    x = np.zeros((4, 37), np.float32)
    with Session(blob) as s:
        with pytest.raises(RunError, match=r"input 'x': expected shape \[4,37\], got \[4,36\]"):
            s.run(None, {"x": np.zeros((4, 36), np.float32)})
        with pytest.raises(RunError, match="input 'x': expected dtype float32, got float64"):
            s.run(None, {"x": x.astype(np.float64)})
        with pytest.raises(RunError, match="missing input 'x'"):
            s.run(None, {})
        with pytest.raises(RunError, match="unknown input 'z'"):
            s.run(None, {"x": x, "z": x})
        with pytest.raises(RunError, match="unknown output 'q'"):
            s.run(["q"], {"x": x})
    with pytest.raises(RunError, match="closed"):
        s.run(None, {"x": x})
    s.close()  # idempotent


def test_session_open_errors(code, tmp_path):
    with pytest.raises(ArtifactError, match="cannot open"):
        Session(tmp_path / "missing.aot")
    bad = pack_artifact(_manifest("aot_kernel_7"), [("weights", W.tobytes()), (f"cpu.{ARCH}", code)])
    with pytest.raises(ArtifactError, match="missing symbol 'aot_kernel_7'"):
        Session(bad)
    with pytest.raises(RunError, match="threads"):
        Session(pack_artifact(_manifest(), [("weights", W.tobytes()), (f"cpu.{ARCH}", code)]), threads=0)


def test_python_and_c_readers_agree(blob):
    read_artifact(blob)  # the Python reader accepts what the C runtime runs


_CORRUPTION_SCRIPT = textwrap.dedent("""
    import sys
    from aot.artifact import read_artifact
    from aot.runtime.session import Session
    from aot.errors import ArtifactError
    blob = open(sys.argv[1], "rb").read()
    table = read_artifact(blob).table
    def owner(i):
        for t in table:
            if t.offset <= i < t.offset + t.stored_size:
                return "section '%s'" % t.name
        return None
    checked = 0
    for n in range(len(blob)):
        try:
            Session(blob[:n])
        except ArtifactError as e:
            assert "truncated" in str(e), (n, str(e))
            checked += 1
        else:
            raise SystemExit("truncated to %d opened" % n)
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0xFF
        try:
            Session(bytes(bad))
        except ArtifactError as e:
            who = owner(i)
            assert who is None or who in str(e), (i, who, str(e))
            checked += 1
        else:
            raise SystemExit("flip at %d opened" % i)
    print("checked", checked)
""")


def test_corrupted_artifacts_through_c_loader(blob, tmp_path, lib_path):
    """Every truncation and a flipped byte at every offset: ArtifactError, never a crash.

    Runs in a subprocess so a crash would fail this test instead of pytest."""
    path = tmp_path / "m.aot"
    path.write_bytes(blob)
    script = tmp_path / "corrupt.py"
    script.write_text(_CORRUPTION_SCRIPT)
    env = dict(os.environ, AOT_RUNTIME_LIB=str(lib_path),
               PYTHONPATH=str(RUNTIME_DIR.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script), str(path)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert f"checked {2 * len(blob)}" in proc.stdout


def test_build_failure_is_run_error(tmp_path):
    fake = tmp_path / "runtime_c"
    (fake / "src").mkdir(parents=True)
    (fake / "include").mkdir()
    (fake / "Makefile").write_text("all:\n\t@echo broken-build-output; exit 3\n")
    with pytest.raises(RunError, match="broken-build-output"):
        build_runtime(root=fake, cache=tmp_path / "cache")


def test_bool_bfloat16_int64_and_empty_inputs_are_typed_and_checked(code):
    """Inputs the kernels ignore: an empty bool tensor and a bfloat16 vector."""
    m = _manifest()
    m["inputs"] += [{"name": "e", "dtype": "bool", "shape": [0, 3]},
                    {"name": "b", "dtype": "bfloat16", "shape": [2]},
                    {"name": "i", "dtype": "int64", "shape": []}]
    m["cpu"][0]["code_info"] = "aot_code_info_extra_inputs"  # testmodel.c's record of these inputs
    blob = pack_artifact(m, [("weights", W.tobytes()), (f"cpu.{ARCH}", code)])
    x = np.ones((4, 37), np.float32)
    with Session(blob) as s:
        types = [i.type for i in s.get_inputs()]
        assert types == ["tensor(float)", "tensor(bool)", "tensor(bfloat16)", "tensor(int64)"]
        feeds = {"x": x, "e": np.zeros((0, 3), bool), "b": np.zeros(2, np.uint16), "i": np.int64(3)}
        y, _ = s.run(None, feeds)
        np.testing.assert_array_equal(y, _expected(x)[0])
        bf16 = s.get_inputs()[2].dtype
        feeds["b"] = np.zeros(2, bf16)
        s.run(None, feeds)
        with pytest.raises(RunError, match="input 'b': expected dtype bfloat16, got float32"):
            s.run(None, dict(feeds, b=np.zeros(2, np.float32)))
        with pytest.raises(RunError, match=r"input 'e': expected shape \[0,3\], got \[3\]"):
            s.run(None, dict(feeds, e=np.zeros(3, bool)))
