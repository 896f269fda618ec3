"""A persistent cache of per-kernel object files, so recompiling after a small change is fast.

    cache = ObjectCache.from_environment()        # None when caching is off
    key = object_key(ir_text, target)
    obj = cache.get(key)                          # bytes, or None (missing or damaged)
    cache.put(key, obj)
    cache.evict_if_due()                          # after a compile that wrote: the size bound

Where: $AOT_CACHE_DIR, else $XDG_CACHE_HOME/aot, else ~/.cache/aot; AOT_NO_CACHE=1 turns
it off. An object is one file, `objects/<key[:2]>/<key>.o`, holding a magic, the SHA-256 of
the object and the object: an entry that is short, foreign or whose digest does not match
(a crash mid-write on a file system without atomic rename, a disk error, an edit) reads as
missing and the next compile rewrites it. Writes go to a temporary file in the same folder
and are renamed into place, so a reader never sees half an entry and two compiles writing
the same key at once both leave a whole one.

A second, smaller kind of entry, `aliases/<fp[:2]>/<fp>.txt`, maps a kernel's fingerprint
(fingerprint.py: its nodes, types and the compiler's sources, known before any IR is
emitted) to its body's symbol and object key, so an unchanged kernel is not even emitted.

The key is the SHA-256 of everything the object depends on: the kernel's LLVM assembly
(with its data layout and triple), the target's CPU and features, the LLVM and llvmlite
versions, the compiler's version and the pipeline's own version (bumped when the passes
or the object checks change). The cache is bounded: past `max_bytes` (1 GiB unless
AOT_CACHE_MAX_BYTES says otherwise) `evict` removes the least recently used entries (a hit
touches its entry's mtime). It stats every entry (0.3 s over 17,000), so a compile calls
`evict_if_due`, which evicts only where the last eviction is EVICT_INTERVAL_S old: the
cache may outgrow its bound by what compiles write in between.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from aot.codegen.cpu.target import CpuTarget
from aot.version import __version__

# bump when the optimization pipeline, the object checks or the entry format change
PIPELINE_VERSION = 1
MAGIC = b"AOTOBJ1\n"
# an alias: the body's symbol and object key, then those of each helper function it calls
_ALIAS = re.compile(r"AOTALIAS2 (aot_body_[0-9a-f]{24}) ([0-9a-f]{64})((?: aot_helper_[0-9a-f]{24} [0-9a-f]{64})*)\n")
DEFAULT_MAX_BYTES = 1 << 30
EVICT_INTERVAL_S = 600
_DIGEST = 32


@dataclass(frozen=True)
class Alias:
    """What a kernel's fingerprint names: its body's symbol and object key, and the (symbol,
    object key) of each helper function the body calls (cpu/body.py: new_helper)."""

    symbol: str
    key: str
    helpers: tuple[tuple[str, str], ...] = ()


def object_key(ir_text: str, target: CpuTarget) -> str:
    """The cache key of the object compiled from `ir_text` for `target`."""
    llvm_version = ".".join(str(part) for part in llvm.llvm_version_info)
    header = f"aot {__version__} pipeline {PIPELINE_VERSION} llvmlite {llvmlite.__version__} llvm {llvm_version}\n" \
             f"{target.triple}\n{target.cpu}\n{target.features}\n"
    digest = hashlib.sha256(header.encode())
    digest.update(ir_text.encode())
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """$AOT_CACHE_DIR, else $XDG_CACHE_HOME/aot, else ~/.cache/aot."""
    explicit = os.environ.get("AOT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "aot" if xdg else Path.home() / ".cache" / "aot"


def cache_disabled() -> bool:
    return os.environ.get("AOT_NO_CACHE", "") not in ("", "0")


@dataclass(frozen=True)
class ObjectCache:
    """Per-kernel objects on disk under `root`; never raises on a broken or read-only cache:
    a cache that cannot be read or written only makes the compile slower."""

    root: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    @staticmethod
    def from_environment() -> ObjectCache | None:
        """The cache the environment asks for, or None when AOT_NO_CACHE is set."""
        if cache_disabled():
            return None
        limit = os.environ.get("AOT_CACHE_MAX_BYTES", "")
        return ObjectCache(default_cache_dir(), int(limit) if limit.isdigit() else DEFAULT_MAX_BYTES)

    @property
    def objects(self) -> Path:
        return self.root / "objects"

    @property
    def aliases(self) -> Path:
        return self.root / "aliases"

    def path(self, key: str) -> Path:
        return self.objects / key[:2] / f"{key}.o"

    def get_alias(self, fingerprint: str) -> Alias | None:
        """The body of the kernel with this fingerprint (fingerprint.py), or None."""
        try:
            text = (self.aliases / fingerprint[:2] / f"{fingerprint}.txt").read_text()
        except (OSError, UnicodeDecodeError):
            return None
        match = _ALIAS.fullmatch(text)
        if not match:
            return None
        pairs = match.group(3).split()
        return Alias(match.group(1), match.group(2), tuple(zip(pairs[::2], pairs[1::2])))

    def put_alias(self, fingerprint: str, alias: Alias) -> None:
        helpers = "".join(f" {symbol} {key}" for symbol, key in alias.helpers)
        self._write(self.aliases / fingerprint[:2] / f"{fingerprint}.txt",
                    f"AOTALIAS2 {alias.symbol} {alias.key}{helpers}\n".encode())

    def get(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head = len(MAGIC) + _DIGEST
        if len(data) < head or not data.startswith(MAGIC):
            return None
        obj = data[head:]
        if hashlib.sha256(obj).digest() != data[len(MAGIC):head]:
            return None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        return obj

    def put(self, key: str, obj: bytes) -> None:
        self._write(self.path(key), MAGIC + hashlib.sha256(obj).digest() + obj)

    def _write(self, path: Path, data: bytes) -> None:
        """Write through a temporary file in the same folder and a rename; errors are ignored."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:16]}-", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                _unlink(Path(tmp))
                raise
        except OSError:
            return

    def evict_if_due(self) -> None:
        """evict, unless the last eviction (the `evicted` stamp's mtime) is less than
        EVICT_INTERVAL_S old."""
        stamp = self.root / "evicted"
        try:
            if time.time() - stamp.stat().st_mtime < EVICT_INTERVAL_S:
                return
        except OSError:
            pass  # no stamp yet: evict
        self.evict()
        self._write(stamp, b"")

    def evict(self) -> None:
        """Remove the least recently used entries until the cache holds at most max_bytes."""
        entries = []
        for kind in (self.objects, self.aliases):
            try:
                for folder in kind.iterdir():
                    for entry in folder.iterdir():
                        stat = entry.stat()
                        entries.append((stat.st_mtime_ns, entry.name, stat.st_size, entry))
            except OSError:
                continue
        total = sum(size for _, _, size, _ in entries)
        for _, _, size, entry in sorted(entries):
            if total <= self.max_bytes:
                break
            _unlink(entry)
            total -= size


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
