"""Helper functions a kernel body calls (cpu/body.py: new_helper; build.py): each distinct one
printed in a module of its own and compiled once, whichever bodies call it; through the object
cache too. The packed conv's band items take one for their accumulation (packed_conv.py)."""
from __future__ import annotations

import re

import llvmlite.binding
import llvmlite.ir
import numpy as np
import pytest

from aot.codegen.cpu import CpuTarget, emit_cpu
from aot.codegen.cpu.build import ObjectBuilder, kernel_body
from aot.codegen.cpu.cache import Alias, ObjectCache
from aot.codegen.llvm_pipeline import OWN_VECTORS
from aot.interpreter import interpret
from aot.ir import Builder, DType, Graph, TensorType
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from bodies_util import bias_relu, compile_and_run, feeds_for, seeded_constant
from codegen_util import count_calls
from targets_util import cpus_to_check

# AVX2: a block's 3x3 weights over 64 channels (36 KB) outgrow L1, so the conv runs in band
# items (the whole 14x14 plane), whose accumulation is a helper
V3 = CpuTarget.from_name("x86-64-v3")
SHAPE = (1, 64, 14, 14)
PAD = ((1, 1), (1, 1))


def _two_convs_one_shape() -> Graph:
    """Two 3x3 convs of one shape over one input, with other weights and other epilogues:
    a = relu(conv(x, wa) + bias), b = tanh(conv(x, wb) + r)."""
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, SHAPE))
    r = g.add_input("r", TensorType(DType.F32, SHAPE))
    b = Builder(g)
    conv = dict(strides=(1, 1), padding=PAD, dilation=(1, 1), groups=1)
    a = bias_relu(b, b.op("conv", [x, seeded_constant(b, (64, 64, 3, 3), 3)], **conv), 1, 4)
    y = b.op("tanh", [b.op("add", [b.op("conv", [x, seeded_constant(b, (64, 64, 3, 3), 5)], **conv), r])])
    g.add_output(a, "a")
    g.add_output(y, "b")
    return g


def _plan(target: CpuTarget):
    return run_pipeline(_two_convs_one_shape(), PipelineOptions(passes=default_passes(target.vector_lanes)))


def test_convs_of_one_shape_share_their_accumulation():
    plan = _plan(V3)
    machine = V3.target_machine()
    bodies = [kernel_body(plan, V3, k, machine) for k in range(len(plan.kernels))]
    convs = [body for body in bodies if body.helpers]
    assert len(convs) == 2
    (first,), (second,) = (body.helpers for body in convs)
    assert convs[0].symbol != convs[1].symbol  # other epilogues, other weights: two bodies
    assert first == second  # one accumulation: the same helper, named after its text
    symbol, text = first
    assert symbol.startswith("aot_helper_") and text.startswith(OWN_VECTORS)
    assert f'define hidden void @"{symbol}"(' in text
    for body in convs:  # the body calls it by that name, and defines no such work itself
        assert f'call void @"{symbol}"(' in body.text and "aot_helper0" not in body.text
    # built once: two bodies, one helper
    ir_text = emit_cpu(plan, V3, jobs=1, cache=None).llvm_ir
    assert len(re.findall(r'^define hidden void @"?aot_helper_', ir_text, re.MULTILINE)) == 1
    assert len(re.findall(r'^define hidden void @"?aot_body_', ir_text, re.MULTILINE)) == 2


@pytest.mark.parametrize("target", cpus_to_check(), ids=str)
@pytest.mark.parametrize("pieces", [1, 3])
def test_bodies_calling_a_helper_compute_the_convs(target, pieces):
    feeds = feeds_for(_two_convs_one_shape)
    got, _ = compile_and_run(_two_convs_one_shape(), feeds, pieces, target)
    for g, e in zip(got, interpret(_two_convs_one_shape(), feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)  # 576 products a sum, in another order


def test_a_warm_compile_finds_the_helpers_by_the_fingerprints(tmp_path, monkeypatch):
    cache = ObjectCache(tmp_path)
    plan = _plan(V3)
    cold = emit_cpu(plan, V3, jobs=1, cache=cache)
    aliases = [p.read_text() for p in (tmp_path / "aliases").rglob("*.txt")]
    assert sum(" aot_helper_" in alias for alias in aliases) == 2  # each conv's alias names the helper
    parsed = count_calls(monkeypatch, llvmlite.binding, "parse_assembly")
    printed = count_calls(monkeypatch, llvmlite.ir.Module, "__repr__")
    warm = emit_cpu(plan, V3, jobs=1, cache=cache)
    assert warm.shared_object == cold.shared_object
    assert parsed == [0] and printed == [1]  # only the entry printed, nothing compiled


def test_an_alias_whose_helper_object_is_gone_prints_the_body_again(tmp_path):
    cache = ObjectCache(tmp_path)
    plan = _plan(V3)
    builder = ObjectBuilder(plan, [V3], cache)
    conv = next(k for k in range(len(plan.kernels)) if kernel_body(plan, V3, k, V3.target_machine()).helpers)
    first = builder.print_body(0, conv)
    fingerprint = builder.fingerprints[0][conv]
    alias = cache.get_alias(fingerprint)
    assert alias is not None and [symbol for symbol, _ in alias.helpers] == [first.helpers[0].symbol]
    for _, key in alias.helpers:  # the body's object cached, its helper's not
        cache.put(alias.key, b"body object")
        assert not cache.path(key).exists()
    again = builder.print_body(0, conv)
    assert again.text == first.text and again.helpers == first.helpers  # printed, not half found


def test_aliases_round_trip_and_old_ones_read_as_missing(tmp_path):
    cache = ObjectCache(tmp_path)
    alias = Alias("aot_body_" + "1" * 24, "a" * 64, (("aot_helper_" + "2" * 24, "b" * 64),))
    cache.put_alias("f" * 64, alias)
    assert cache.get_alias("f" * 64) == alias
    cache.put_alias("e" * 64, Alias("aot_body_" + "3" * 24, "c" * 64))
    assert cache.get_alias("e" * 64) == Alias("aot_body_" + "3" * 24, "c" * 64, ())
    old = tmp_path / "aliases" / "dd" / f"{'d' * 64}.txt"  # the format before helpers
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text(f"AOTALIAS1 aot_body_{'4' * 24} {'e' * 64}\n")
    assert cache.get_alias("d" * 64) is None
