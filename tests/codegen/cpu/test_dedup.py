"""Identical kernels built once (aot/codegen/cpu/build.py, canonical.py)."""
from __future__ import annotations

import re

import numpy as np

from aot.codegen.cpu import CpuTarget, emit_cpu
from aot.codegen.cpu.build import ObjectBuilder
from aot.codegen.cpu.canonical import canonical
from aot.ir import DType
from codegen_util import HOST, Compiled, graph_with_inputs, simple_plan


def test_canonical_numbers_locals_and_constants_in_order():
    before = ('define void @"f"(i8* %"x.base", i64 %"begin") {\n'
              '"k3_max":\n'
              '  %"x.ptr" = bitcast i8* %"x.base" to float*\n'
              '  %.5 = load float, float* @"const.w1"\n'
              '  br label %"k3_max"\n'
              '}\n')
    after = ('define void @"f"(i8* %v0, i64 %v1) {\n'
             'v2:\n'
             '  %v3 = bitcast i8* %v0 to float*\n'
             '  %v4 = load float, float* @"const.0"\n'
             '  br label %v2\n'
             '}\n')
    assert canonical(before) == after


def test_canonical_keeps_byte_strings_and_other_globals():
    text = '@"const.t" = private constant [4 x i8] c"%ab:"\n  %x = call float @"aot.exp.f32"(float %y)\n'
    assert canonical(text) == '@"const.0" = private constant [4 x i8] c"%ab:"\n  %v0 = call float @"aot.exp.f32"(float %v1)\n'


def _two_alike_one_not():
    g, b, (x, y, z) = graph_with_inputs(("x", DType.F32, (6, 24)), ("y", DType.F32, (6, 24)), ("z", DType.F32, (6, 25)))
    g.add_output(b.op("exp", [x]), "ex")
    g.add_output(b.op("exp", [y]), "ey")  # the same work on other buffers
    g.add_output(b.op("exp", [z]), "ez")  # other rows: other work (the number of rows is the caller's)
    return simple_plan(g)


def test_kernels_doing_the_same_work_share_one_body():
    plan = _two_alike_one_not()
    builder = ObjectBuilder(plan, [HOST], None)
    symbols = [builder.print_body(0, k).symbol for k in range(3)]
    assert symbols[0] == symbols[1] != symbols[2]
    code = emit_cpu(plan, HOST, jobs=1, cache=None)
    assert len(re.findall(r"^define hidden void @\"?aot_body_", code.llvm_ir, re.MULTILINE)) == 2
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in (("x", (6, 24)), ("y", (6, 24)), ("z", (6, 25)))}
    got = Compiled(plan).run(feeds)
    for out, name in zip(got, "xyz"):
        np.testing.assert_allclose(out, np.exp(feeds[name]), rtol=2e-6)


def test_one_body_text_gives_one_object_per_target():
    from aot.codegen.cpu.cache import object_key

    plan = _two_alike_one_not()
    v3, v4 = CpuTarget.from_name("x86-64-v3"), CpuTarget.from_name("x86-64-v4")
    body3 = ObjectBuilder(plan, [v3], None).print_body(0, 0)
    body4 = ObjectBuilder(plan, [v4], None).print_body(0, 0)
    assert body3.text is not None and body4.text is not None
    # an elemental row loop prints alike for both; LLVM vectorizes it for each CPU's registers
    assert object_key(body3.text, v3) != object_key(body4.text, v4)
