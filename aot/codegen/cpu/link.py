"""Object files -> one shared object, linked against nothing (`cc -shared -nostdlib`).

Undefined symbols LLVM may emit (memcpy, memset, memmove) resolve at dlopen
time from the process's libc; symbols.py fails the compile on any other.
Paths are relative inside a temporary directory, named by position, and the
build id is off, so the same objects in the same order always link to the same
bytes. Codegen builds one object per kernel (in parallel) plus one for the
entry; -Bsymbolic binds the entry's calls of the kernels inside the library.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from aot.codegen.cpu.target import CpuTarget
from aot.errors import CodegenError


def _linker(target: CpuTarget) -> list[str]:
    host = platform.machine().lower().replace("arm64", "aarch64").replace("amd64", "x86_64")
    if target.arch == host:
        cc = os.environ.get("CC", "cc")
        return [cc]
    cross = shutil.which(f"{target.arch}-linux-gnu-gcc")
    if cross:
        return [cross]
    clang = shutil.which("clang")
    if clang and shutil.which("ld.lld"):
        return [clang, f"--target={target.triple}", "-fuse-ld=lld"]
    raise CodegenError(f"no linker for {target.arch} on this {host} host (install {target.arch}-linux-gnu-gcc or clang with ld.lld)")


def link_shared(objects: bytes | Sequence[bytes], target: CpuTarget) -> bytes:
    """Link one object, or several in the order given, into a shared object."""
    command = _linker(target)
    objects = [objects] if isinstance(objects, bytes) else list(objects)
    with tempfile.TemporaryDirectory(prefix="aot-link-") as tmp:
        names = [f"k{i:05d}.o" for i in range(len(objects))]
        for name, obj in zip(names, objects):
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(obj)
        args = [*command, "-shared", "-nostdlib", "-Wl,--build-id=none", "-Wl,-z,noexecstack", "-Wl,-Bsymbolic",
                "-o", "kernels.so", *names]
        result = subprocess.run(args, cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:
            raise CodegenError(f"linking the CPU shared object failed ({' '.join(args)}): {result.stderr.strip()}")
        with open(os.path.join(tmp, "kernels.so"), "rb") as f:
            return f.read()
