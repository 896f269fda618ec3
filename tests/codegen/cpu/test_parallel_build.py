"""CPU code built over worker processes (aot/codegen/cpu/build.py): the same bytes as one process."""
from __future__ import annotations

import numpy as np
import pytest

from aot.codegen.cpu import emit_cpu_variants
from aot.codegen.cpu.target import CpuTarget
from aot.errors import CodegenError
from aot.ir import DType
from codegen_util import graph_with_inputs, simple_plan

VARIANTS = [CpuTarget.from_name("x86-64-v4"), CpuTarget.from_name("x86-64-v3")]


def _plan():
    g, b, (x, y) = graph_with_inputs(("x", DType.F32, (4, 40)), ("y", DType.F32, (4, 40)))
    s = b.op("add", [x, y])
    t = b.op("tanh", [s])
    g.add_output(b.op("mul", [t, b.op("exp", [y])]), "out")
    g.add_output(b.op("logistic", [s]), "gate")
    return simple_plan(g)


def test_parallel_and_serial_builds_give_the_same_bytes():
    plan = _plan()
    serial = emit_cpu_variants(plan, VARIANTS, jobs=1, cache=None)
    parallel = emit_cpu_variants(plan, VARIANTS, jobs=2, cache=None)
    again = emit_cpu_variants(plan, VARIANTS, jobs=3, cache=None)
    assert [c.shared_object for c in serial] == [c.shared_object for c in parallel] == [c.shared_object for c in again]
    assert [c.target for c in parallel] == VARIANTS
    assert serial[0].shared_object != serial[1].shared_object  # AVX-512 and AVX2 code
    assert [c.kernels for c in serial] == [c.kernels for c in parallel]


def test_parallel_build_through_a_cache_gives_the_same_bytes(tmp_path):
    from aot.codegen.cpu.cache import ObjectCache

    plan = _plan()
    serial = emit_cpu_variants(plan, VARIANTS, jobs=1, cache=None)
    cold = emit_cpu_variants(plan, VARIANTS, jobs=2, cache=ObjectCache(tmp_path))
    warm = emit_cpu_variants(plan, VARIANTS, jobs=2, cache=ObjectCache(tmp_path))
    assert [c.shared_object for c in serial] == [c.shared_object for c in cold] == [c.shared_object for c in warm]


def test_an_error_in_a_worker_reaches_the_caller(monkeypatch):
    from aot.codegen.cpu import build

    def broken(self, variant, text, linked):
        raise CodegenError("LLVM rejected the generated CPU module: on purpose")
    monkeypatch.setattr(build.ObjectBuilder, "compile", broken)  # the forked workers inherit it
    with pytest.raises(CodegenError, match="on purpose"):
        emit_cpu_variants(_plan(), VARIANTS, jobs=2, cache=None)


def test_variant_code_runs_like_the_reference():
    from codegen_util import Compiled

    plan = _plan()
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 40)).astype(np.float32), "y": rng.standard_normal((4, 40)).astype(np.float32)}
    out, gate = Compiled(plan, VARIANTS[1]).run(feeds)
    s = feeds["x"] + feeds["y"]
    np.testing.assert_allclose(out, np.tanh(s) * np.exp(feeds["y"]), rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(gate, 1 / (1 + np.exp(-s)), rtol=2e-6, atol=1e-6)
