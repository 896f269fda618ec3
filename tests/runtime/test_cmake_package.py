"""`make -C runtime_c install` into a temporary prefix gives a CMake package: a tiny
CMakeLists.txt finds it with find_package(aot_runtime 0.1) and builds
runtime_c/examples/run_model.c against aot_runtime::aot_runtime (shared) and
aot_runtime::aot_runtime_static; both run lenet and write what aot.Session gives. A request
for a newer version than installed is refused. pkg-config's file carries the same version.
Skips without cmake (apt: cmake)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import aot
import make_samples
from aot.version import __version__
from paths_util import RUNTIME_C

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("make") is None,
                                reason="cmake (and make) are needed to test the CMake package (apt: cmake)")

CONSUMER = """cmake_minimum_required(VERSION 3.16)
project(aot_consumer C)
find_package(aot_runtime {version} REQUIRED)
add_executable(run_model "{example}")
target_link_libraries(run_model PRIVATE aot_runtime::aot_runtime)
add_executable(run_model_static "{example}")
target_link_libraries(run_model_static PRIVATE aot_runtime::aot_runtime_static)
"""


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{' '.join(map(str, args))}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _consumer(tmp: Path, name: str, version: str) -> Path:
    src = tmp / name
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CONSUMER.format(version=version,
                                                        example=(RUNTIME_C / "examples" / "run_model.c").as_posix()))
    return src


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("install")
    # a build folder of its own: never the checkout's runtime_c/build, which other runs use
    _run(["make", "-s", "-C", RUNTIME_C, "install", f"PREFIX={tmp / 'prefix'}", f"BUILD_DIR={tmp / 'build'}"])
    return tmp / "prefix"


def test_installed_files(prefix):
    cmake = prefix / "lib" / "cmake" / "aot_runtime"
    for path in ("include/aot_runtime.h", "lib/libaot_runtime.so.1", "lib/libaot_runtime.a",
                 "lib/pkgconfig/aot_runtime.pc"):
        assert (prefix / path).is_file(), path
    # the link -laot_runtime finds, to the file named by the SONAME binaries record
    link = prefix / "lib" / "libaot_runtime.so"
    assert link.is_symlink() and os.readlink(link) == "libaot_runtime.so.1"
    if shutil.which("readelf"):
        dynamic = _run(["readelf", "-d", prefix / "lib" / "libaot_runtime.so.1"]).stdout
        assert "Library soname: [libaot_runtime.so.1]" in dynamic, dynamic
    assert (cmake / "aot_runtimeConfig.cmake").is_file()
    assert f'set(PACKAGE_VERSION "{__version__}")' in (cmake / "aot_runtimeConfigVersion.cmake").read_text()
    pc = (prefix / "lib" / "pkgconfig" / "aot_runtime.pc").read_text()
    assert f"Version: {__version__}" in pc and f"prefix={prefix}" in pc


def test_find_package_builds_and_runs_the_example(prefix, tmp_path):
    src = _consumer(tmp_path, "consumer", ".".join(__version__.split(".")[:2]))
    build = tmp_path / "build"
    _run(["cmake", "-S", src, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"])
    _run(["cmake", "--build", build])

    model = make_samples.make_sample("lenet")
    x = make_samples.make_input("lenet")
    aot.compile(model, tmp_path / "lenet.aot")
    x.tofile(tmp_path / "x.bin")
    with aot.Session(tmp_path / "lenet.aot") as s:
        (want,) = s.run(None, {"x": x})
    for exe in ("run_model", "run_model_static"):
        out = tmp_path / f"{exe}.y.bin"
        _run([build / exe, tmp_path / "lenet.aot", "-i", tmp_path / "x.bin", "-o", out])
        np.testing.assert_array_equal(np.fromfile(out, np.float32).reshape(want.shape), want)
    if shutil.which("ldd"):
        # the shared build found its library through the build tree's RPATH, by its SONAME
        needed = _run(["ldd", build / "run_model"]).stdout
        assert f"libaot_runtime.so.1 => {prefix / 'lib' / 'libaot_runtime.so.1'}" in needed, needed


def test_a_program_linked_against_the_build_folder_runs(prefix, tmp_path):
    """-L<build> -laot_runtime records the SONAME, and the build folder holds a file of that
    name (libaot_runtime.so is the link to it), so the program finds the library at run time."""
    build = prefix.parent / "build"
    assert os.readlink(build / "libaot_runtime.so") == "libaot_runtime.so.1"
    exe = tmp_path / "run_model"
    _run(["cc", "-std=c11", "-O2", f"-I{RUNTIME_C / 'include'}", RUNTIME_C / "examples" / "run_model.c",
          f"-L{build}", "-laot_runtime", f"-Wl,-rpath,{build}", "-o", exe])
    model = make_samples.make_sample("lenet")
    aot.compile(model, tmp_path / "lenet.aot")
    out = _run([exe, tmp_path / "lenet.aot"]).stdout
    assert "output" in out, out


def test_a_newer_version_than_installed_is_not_found(prefix, tmp_path):
    major = int(__version__.split(".")[0])
    src = _consumer(tmp_path, "newer", f"{major + 1}.0")
    proc = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "build"), f"-DCMAKE_PREFIX_PATH={prefix}"],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "aot_runtime" in proc.stderr and __version__ in proc.stderr, proc.stderr
