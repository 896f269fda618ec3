"""The ordered table of kernel body emitters (codegen/cpu/bodies.py)."""
from __future__ import annotations

import subprocess
import sys

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.bodies import BODIES, body_emitter, body_of
from aot.codegen.cpu.conv1x1 import POINTWISE_EMITTER
from aot.codegen.cpu.depthwise import DEPTHWISE_EMITTER
from aot.ir import Builder, DType, Graph, TensorType
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from aot.plan import ExecutionPlan

HOST = CpuTarget.host()


# A 1x1 conv over 8 channels + ReLU: pointwise, and narrow enough for the depthwise body too
# (a script, so that a fresh interpreter can build it after importing modules in any order).
POINTWISE = """
import numpy as np
from aot.ir import Builder, DType, Graph, TensorType
graph = Graph()
x = graph.add_input("x", TensorType(DType.F32, (1, 8, 5, 6)))
b = Builder(graph)
w = b.constant(np.random.default_rng(0).standard_normal((12, 8, 1, 1)).astype(np.float32))
y = b.op("conv", [x, w], strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1)
zero = b.op("broadcast", [b.constant(np.float32(0))], dims=(), shape=y.type.shape)
graph.add_output(b.op("max", [y, zero]), "y")
"""


def pointwise_plan() -> ExecutionPlan:
    scope: dict = {}
    exec(POINTWISE, scope)
    return run_pipeline(scope["graph"], PipelineOptions(passes=default_passes(HOST.vector_lanes)))


def test_bodies_have_one_row_each():
    assert len({b.name for b in BODIES}) == len(BODIES)
    assert len({id(b.emitter) for b in BODIES}) == len(BODIES)


def test_pointwise_conv_comes_before_depthwise_where_both_apply():
    (kernel,) = pointwise_plan().kernels
    assert POINTWISE_EMITTER.applies(kernel, HOST) and DEPTHWISE_EMITTER.applies(kernel, HOST)
    assert body_of(kernel, HOST).name == "pointwise conv"
    assert body_emitter(kernel, HOST) is POINTWISE_EMITTER
    names = [b.name for b in BODIES]
    assert names.index("pointwise conv") < names.index("depthwise conv")


def test_the_choice_does_not_depend_on_import_order():
    # once each module registered its body on import: importing depthwise first made it win
    script = "import aot.codegen.cpu.depthwise, aot.codegen.cpu.pool, aot.codegen.cpu.conv1x1\n" + POINTWISE + """
from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.bodies import body_of
from aot.pipeline import run_pipeline
print(body_of(run_pipeline(graph).kernels[0], CpuTarget.host()).name)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "pointwise conv"


def test_a_kernel_rooted_at_data_movement_gets_the_elemental_loop():
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, (4, 6)))
    g.add_output(Builder(g).op("transpose", [x], perm=(1, 0)), "y")
    (kernel,) = run_pipeline(g).kernels
    assert body_of(kernel, HOST) is None


def test_only_bodies_with_an_epilogue_take_elementwise_roots():
    by_name = {b.name: b for b in BODIES}
    assert by_name["packed dot"].may_take("add") and by_name["packed dot"].may_take("packed_dot")
    assert not by_name["packed dot"].may_take("dot") and not by_name["packed dot"].may_take("reshape")
    assert by_name["sort"].may_take("argsort") and not by_name["sort"].may_take("add")
