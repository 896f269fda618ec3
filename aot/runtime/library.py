"""Finding, building and loading the C runtime library (libaot_runtime.so).

- ``AOT_RUNTIME_LIB`` (path to ``libaot_runtime.so``) wins when set;
- then the library a wheel ships, built when the wheel was (setup.py), at
  ``aot/_runtime_c/prebuilt/libaot_runtime.so``: no compiler needed. Should it not
  load here (another platform, an older glibc), the sources are built as below;
- otherwise the C sources (``aot/_runtime_c`` in an installed wheel,
  ``runtime_c/`` in a source checkout) are built with
  ``make -C <sources> BUILD_DIR=...`` into
  ``$XDG_CACHE_HOME/aot/runtime-<hash of the C sources>`` (default
  ``~/.cache/aot``), under a file lock so parallel processes do not race;
  the build goes to a temporary directory that is renamed into place, so a
  half-built library is never picked up.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from aot.errors import RunError
from aot.runtime.abi import ABI_VERSION, declare


def _runtime_sources() -> Path:
    """runtime_c/ as installed inside the package (wheel), else beside it (source checkout)."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_runtime_c"
    return packaged if (packaged / "Makefile").is_file() else package.parent / "runtime_c"


RUNTIME_DIR = _runtime_sources()
LIB_NAME = "libaot_runtime.so"
# where setup.py puts the library in a wheel; a source checkout has none
PREBUILT_DIR = RUNTIME_DIR / "prebuilt"


def _source_files(root: Path) -> list[Path]:
    files = [root / "Makefile"]
    for sub in ("include", "src"):
        files.extend(sorted((root / sub).glob("*.[ch]")))
    return files


def source_hash(root: Path = RUNTIME_DIR) -> str:
    """Hash of the files the library is built from (names and contents)."""
    h = hashlib.sha256()
    for f in _source_files(root):
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def server_source_hash(root: Path = RUNTIME_DIR) -> str:
    """Hash of the files the inference server is built from: the runtime's and servers/."""
    h = hashlib.sha256(source_hash(root).encode())
    for f in sorted((root / "servers").glob("*.[ch]")):
        h.update(f.name.encode() + b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aot"


def build_runtime(root: Path = RUNTIME_DIR, cache: Optional[Path] = None) -> Path:
    """Build the C runtime into the cache (once per source hash); return the .so path."""
    if not (root / "Makefile").is_file():
        raise RunError(f"C runtime sources not found at {root}")
    return build_cached(root, "all", f"runtime-{source_hash(root)}", LIB_NAME, "the C runtime", cache)


def build_server(root: Path = RUNTIME_DIR, cache: Optional[Path] = None) -> Path:
    """Build the KServe v2 HTTP server (runtime_c/servers, `make server`) into the cache, once
    per source hash; return the aot_server executable's path."""
    if not (root / "servers").is_dir():
        raise RunError(f"inference server sources not found at {root / 'servers'}")
    return build_cached(root, "server", f"server-{server_source_hash(root)}", "aot_server",
                        "the inference server", cache)


def build_cached(root: Path, make_target: str, name: str, product: str, what: str,
                 cache: Optional[Path] = None) -> Path:
    """`make -C root BUILD_DIR=<cache>/<name> make_target`, once: returns <cache>/<name>/<product>.
    Built under a file lock (parallel processes do not race) in a temporary directory renamed
    into place, so a half-built result is never picked up. `name` carries the sources' hash."""
    cache = cache or cache_dir()
    out_dir = cache / name
    built = out_dir / product
    if built.is_file():
        return built
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built.is_file():  # another process built it while we waited
            return built
        tmp = Path(tempfile.mkdtemp(prefix=f"{name}.tmp-", dir=cache))
        try:
            proc = subprocess.run(
                ["make", "-C", str(root), f"BUILD_DIR={tmp}", make_target],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            if proc.returncode != 0:
                tail = proc.stdout[-4000:]
                raise RunError(f"building {what} failed (make exit {proc.returncode}):\n{tail}")
            shutil.rmtree(out_dir, ignore_errors=True)
            os.replace(tmp, out_dir)
        except FileNotFoundError as e:
            raise RunError(f"building {what} failed: {e}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return built


def prebuilt_library() -> Optional[Path]:
    """The library a wheel ships, if this install has one."""
    path = PREBUILT_DIR / LIB_NAME
    return path if path.is_file() else None


def library_path() -> Path:
    """AOT_RUNTIME_LIB, else the wheel's prebuilt library, else one built from the sources."""
    env = os.environ.get("AOT_RUNTIME_LIB")
    if env:
        return Path(env)
    return prebuilt_library() or build_runtime()


@functools.lru_cache(maxsize=None)
def _load(path: str) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise RunError(f"cannot load the C runtime {path}: {e}") from None
    declare(lib)
    abi = lib.aot_abi_version()
    if abi < ABI_VERSION:  # the ABI is append-only: a newer runtime serves this binding too
        raise RunError(f"C runtime {path} has ABI version {abi}, this binding needs {ABI_VERSION} or later")
    return lib


def load_library() -> ctypes.CDLL:
    """The C runtime, declared for ctypes (found or built on first use)."""
    path = library_path()
    try:
        return _load(str(path))
    except RunError as prebuilt_error:
        if path != prebuilt_library() or os.environ.get("AOT_RUNTIME_LIB"):
            raise
        # a wheel built elsewhere (another glibc, another ABI): fall back to the sources it ships
        try:
            return _load(str(build_runtime()))
        except RunError as e:
            raise RunError(f"{prebuilt_error}\nand building it from source failed: {e}") from None
