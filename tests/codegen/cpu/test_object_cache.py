"""The per-kernel object cache (aot/codegen/cpu/cache.py) and compiles through it."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from aot.codegen.cpu import emit_cpu
from aot.codegen.cpu.cache import EVICT_INTERVAL_S, MAGIC, ObjectCache, default_cache_dir, object_key
from aot.codegen.cpu.target import CpuTarget
from aot.ir import DType
from codegen_util import HOST, count_calls, graph_with_inputs, simple_plan

KEY = "ab" + "0" * 62


def _plan(shape=(3, 17)):
    g, b, (x, y) = graph_with_inputs(("x", DType.F32, shape), ("y", DType.F32, shape))
    g.add_output(b.op("exp", [b.op("add", [x, y])]), "out")
    return simple_plan(g)


def test_put_then_get_round_trips(tmp_path):
    cache = ObjectCache(tmp_path)
    assert cache.get(KEY) is None
    cache.put(KEY, b"\x7fELF object")
    assert cache.get(KEY) == b"\x7fELF object"
    assert [p.name for p in (tmp_path / "objects" / "ab").iterdir()] == [f"{KEY}.o"]  # no temporary left


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_damaged_entry_reads_as_missing_and_is_rewritten(tmp_path, damage):
    cache = ObjectCache(tmp_path)
    cache.put(KEY, b"object bytes")
    path = cache.path(KEY)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[:len(MAGIC) + 5])
    elif damage == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    else:
        path.write_bytes(b"not a cache entry at all, but long enough to hold a digest")
    assert cache.get(KEY) is None
    cache.put(KEY, b"object bytes")
    assert cache.get(KEY) == b"object bytes"


def test_evict_removes_least_recently_used_past_the_bound(tmp_path):
    cache = ObjectCache(tmp_path, max_bytes=3 * (len(MAGIC) + 32 + 100))
    keys = [f"{i:02x}" + "1" * 62 for i in range(5)]
    for age, key in enumerate(keys):
        cache.put(key, bytes(100))
        os.utime(cache.path(key), ns=(age * 10**9, age * 10**9))
    os.utime(cache.path(keys[0]), ns=(10**12, 10**12))  # used last
    cache.evict()
    assert [cache.get(k) is not None for k in keys] == [True, False, False, True, True]


def test_evict_if_due_scans_once_per_interval(tmp_path):
    cache = ObjectCache(tmp_path, max_bytes=len(MAGIC) + 32 + 100)
    keys = [f"{i:02x}" + "1" * 62 for i in range(3)]
    cache.put(keys[0], bytes(100))
    cache.put(keys[1], bytes(100))
    os.utime(cache.path(keys[0]), ns=(10**9, 10**9))
    cache.evict_if_due()  # no stamp: evicts, then stamps
    assert [cache.get(k) is not None for k in keys[:2]] == [False, True]
    cache.put(keys[2], bytes(100))
    cache.evict_if_due()  # stamped just now: left over its bound
    assert all(cache.get(k) is not None for k in keys[1:])
    old = time.time() - EVICT_INTERVAL_S - 1
    os.utime(tmp_path / "evicted", (old, old))
    os.utime(cache.path(keys[1]), ns=(10**9, 10**9))
    cache.evict_if_due()
    assert [cache.get(k) is not None for k in keys[1:]] == [False, True]


def test_unwritable_cache_only_misses(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    cache = ObjectCache(blocker)
    cache.put(KEY, b"x")  # no error
    assert cache.get(KEY) is None


def test_cache_folder_and_switch_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("AOT_CACHE_DIR", raising=False)
    monkeypatch.delenv("AOT_NO_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "aot"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "aot"
    monkeypatch.setenv("AOT_CACHE_DIR", str(tmp_path / "mine"))
    assert ObjectCache.from_environment() == ObjectCache(tmp_path / "mine")
    monkeypatch.setenv("AOT_NO_CACHE", "1")
    assert ObjectCache.from_environment() is None


def test_key_depends_on_text_and_target():
    v3, v4 = CpuTarget.from_name("x86-64-v3"), CpuTarget.from_name("x86-64-v4")
    assert object_key("define void @f() { ret void }", v3) == object_key("define void @f() { ret void }", v3)
    assert object_key("define void @f() { ret void }", v3) != object_key("define void @g() { ret void }", v3)
    assert object_key("define void @f() { ret void }", v3) != object_key("define void @f() { ret void }", v4)


def test_warm_compile_builds_and_emits_nothing_and_gives_the_same_bytes(tmp_path, monkeypatch):
    import llvmlite.binding
    import llvmlite.ir

    cache = ObjectCache(tmp_path)
    plan = _plan()
    cold = emit_cpu(plan, HOST, jobs=1, cache=cache)
    assert list((tmp_path / "objects").iterdir()) and list((tmp_path / "aliases").iterdir())
    parsed = count_calls(monkeypatch, llvmlite.binding, "parse_assembly")
    printed = count_calls(monkeypatch, llvmlite.ir.Module, "__repr__")
    warm = emit_cpu(plan, HOST, jobs=1, cache=cache)
    assert warm.shared_object == cold.shared_object
    assert parsed == [0]  # nothing compiled
    assert printed == [1]  # only the entry module printed: every body found by its kernel's fingerprint


def test_a_compile_with_moved_buffers_reuses_the_bodies(tmp_path, monkeypatch):
    import llvmlite.binding

    cache = ObjectCache(tmp_path)
    plan = _plan()
    first = emit_cpu(plan, HOST, jobs=1, cache=cache)
    # the same kernels over buffers elsewhere in the arena: only the entry changes
    moved = type(plan)(plan.graph, plan.kernels, {name: _shifted(s) for name, s in plan.slices.items()},
                       plan.arena_bytes + 4096, 0, plan.weights)
    parsed = count_calls(monkeypatch, llvmlite.binding, "parse_assembly")
    second = emit_cpu(moved, HOST, jobs=1, cache=cache)
    assert parsed == [1]  # the entry
    assert second.shared_object != first.shared_object


def test_a_replaced_emitter_misses_the_fingerprints(tmp_path, monkeypatch):
    from aot.codegen import math as cpu_math
    from aot.codegen.cpu.fingerprint import compiler_digest

    before = compiler_digest()
    monkeypatch.setattr(cpu_math.MathLib, "exp", lambda lib, b, x: x)
    assert compiler_digest() != before
    monkeypatch.undo()
    assert compiler_digest() == before


def _shifted(where):
    from dataclasses import replace

    return replace(where, offset=where.offset + 4096) if where.kind == "arena" else where


def test_compiled_code_from_the_cache_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_CACHE_DIR", str(tmp_path))
    from codegen_util import Compiled

    plan = _plan((5, 33))
    feeds = {"x": np.linspace(-2, 2, 165, dtype=np.float32).reshape(5, 33), "y": np.full((5, 33), 0.5, np.float32)}
    want = np.exp(feeds["x"] + feeds["y"])
    for _ in range(2):  # cold, then every object from the cache
        (got,) = Compiled(plan).run(feeds)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert any(Path(tmp_path, "objects").iterdir())
