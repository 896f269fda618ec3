"""The one build step pyproject.toml cannot declare: a wheel ships the C runtime compiled.

`build_py` builds runtime_c/ with make into the wheel as
aot/_runtime_c/prebuilt/libaot_runtime.so (aot/runtime/library.py loads it before it would
build from source), so installing the wheel needs no compiler, make or zstd headers. libzstd
is linked in statically when the compiler finds libzstd.a (Debian's libzstd-dev has it);
otherwise the library needs libzstd.so.1 where it runs, and the build says so. Debug info is
stripped. An editable install (`pip install -e .`) builds nothing here: the binding builds
the checkout's sources on first use, as before.

The wheel is tagged py3-none-<platform>: the library is native code for the build machine's
platform, reached through ctypes, so no Python ABI is involved. The tag is the plain
platform's (linux_x86_64); `auditwheel repair` then checks that the library needs nothing
beyond glibc and retags it manylinux_2_<glibc>_<arch> (manylinux_2_34 from Debian 12: the
glibc symbols it uses are 2.34's), the tag PyPI and pip take.
Metadata stays in pyproject.toml.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LIB = "libaot_runtime.so"
PREBUILT = Path("aot", "_runtime_c", "prebuilt")  # under build_lib; library.py's PREBUILT_DIR


def _static_zstd(cc: str) -> bool:
    """Whether the compiler finds libzstd.a (it prints the bare name when it does not)."""
    try:
        found = subprocess.run([cc, "-print-file-name=libzstd.a"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return False
    return os.path.isabs(found) and os.path.isfile(found)


class BuildPyWithRuntime(build_py):
    """build_py, then the C runtime into build_lib (not in editable mode)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        cc = os.environ.get("CC", "cc")
        static = _static_zstd(cc)
        with tempfile.TemporaryDirectory(prefix="aot-runtime-") as tmp:
            args = ["make", "-C", str(ROOT / "runtime_c"), f"BUILD_DIR={tmp}", f"CC={cc}", "CFLAGS=-O2",
                    f"STATIC_ZSTD={1 if static else 0}", f"{tmp}/{LIB}"]
            self.announce(f"building the C runtime: {' '.join(args)}", level=2)
            subprocess.run(args, check=True)
            built = Path(tmp) / LIB
            if shutil.which("strip"):
                subprocess.run(["strip", "--strip-unneeded", str(built)], check=True)
            dest = Path(self.build_lib) / PREBUILT
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, dest / LIB)
        if not static:
            self.warn(f"libzstd.a not found by {cc}: the wheel's {LIB} links libzstd.so.1 dynamically, "
                      "so the machines that install it need libzstd (apt: libzstd1)")


class PlatformWheel(bdist_wheel):
    """A wheel for this platform and any Python 3: ctypes loads the library, no Python ABI."""

    def finalize_options(self) -> None:
        # the distribution holds native code, though no extension module: a platform wheel whose
        # files install into platlib (install asks has_ext_modules)
        self.distribution.has_ext_modules = lambda: True
        super().finalize_options()

    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(cmdclass={"build_py": BuildPyWithRuntime, "bdist_wheel": PlatformWheel})
