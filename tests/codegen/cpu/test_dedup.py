"""Identical kernels built once (aot/codegen/cpu/build.py, canonical.py)."""
from __future__ import annotations

import re

import numpy as np
from llvmlite import ir

from aot.codegen.cpu import CpuTarget, emit_cpu
from aot.codegen.cpu.build import ObjectBuilder
from aot.codegen.cpu.canonical import number_locals, numbered_constants
from aot.ir import DType
from codegen_util import HOST, Compiled, graph_with_inputs, simple_plan


def _module_with_constants(names: list[str]) -> tuple[ir.Module, str]:
    """A module whose body loads from a private constant global per name, then its text."""
    module = ir.Module("m")
    fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [ir.FloatType()]), "f")
    number_locals(fn)
    b = ir.IRBuilder(fn.append_basic_block("k3_max"))
    total = fn.args[0]
    for name in names:
        glob = ir.GlobalVariable(module, ir.FloatType(), name=name)
        glob.linkage, glob.global_constant, glob.initializer = "private", True, ir.Constant(ir.FloatType(), 1.0)
        total = b.fadd(total, b.load(glob, name=f"{name}.value"), name="x.sum")
    b.ret(total)
    return module, str(module)


def test_locals_are_numbered_as_made_whatever_their_names():
    _, text = _module_with_constants(["const.w1"])
    body = text[text.index("define"):]
    assert re.findall(r'%"([^"]*)"', body) == ["v0", "v2", "v3", "v0", "v2", "v3"]  # arg; load; add of both; ret
    assert "\nv1:" in body  # the block, made between the argument and the load
    assert "k3_max" not in body and "x.sum" not in body


def test_constants_are_numbered_in_the_order_made_in_one_pass():
    # "const.1" is renamed to const.0 while another global still bears that name: one pass
    # keeps the renaming one-to-one
    module, text = _module_with_constants(["const.1", "const.0", 'const.odd"name'])
    renamed = numbered_constants(text, module)
    assert re.findall(r'@"(const[^"]*)" = private', renamed) == ["const.0", "const.1", "const.2"]
    assert re.findall(r'load float, float\* @"(const[^"]*)"', renamed) == ["const.0", "const.1", "const.2"]
    llvm_module = __import__("llvmlite.binding", fromlist=["parse_assembly"]).parse_assembly(renamed)
    llvm_module.verify()


def test_a_module_without_constants_prints_as_it_was():
    module, text = _module_with_constants([])
    assert numbered_constants(text, module) is text


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
