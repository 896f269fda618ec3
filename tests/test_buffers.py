import numpy as np

from aot.ir.parser import parse_graph
from aot.passes.buffers import assign_buffers, layout_weights
from aot.passes.fusion import fuse
from passes_util import ir

CHAIN = """
    graph @g(%x: f32[4,64]) {
      %w = constant() {value = dense<2.0>} : f32[4,64]
      %w2 = constant() {value = dense<2.0>} : f32[4,64]
      %a = mul(%x, %w) : f32[4,64]
      %s1 = reduce(%a) {axes = [0], kind = "sum"} : f32[64]
      %b = broadcast(%s1) {dims = [1], shape = [4, 64]} : f32[4,64]
      %c = mul(%b, %w2) : f32[4,64]
      %s2 = reduce(%c) {axes = [0], kind = "max"} : f32[64]
      %d = broadcast(%s2) {dims = [1], shape = [4, 64]} : f32[4,64]
      %y = add(%d, %x) : f32[4,64]
      return %y as "y"
    }"""


def test_slices_for_inputs_outputs_weights_and_arena():
    graph = parse_graph(ir(CHAIN))
    plan = assign_buffers(graph, fuse(graph))
    assert plan.slices["x"].kind == "input" and plan.slices["y"].kind == "output"
    # identical constant data is stored once
    assert plan.slices["w"].kind == "weights" and plan.slices["w"].offset == plan.slices["w2"].offset
    assert len(plan.weights) == 1024
    temps = [k.root.name for k in plan.kernels if plan.slices[k.root.name].kind == "arena"]
    assert temps == ["s1", "s2"]
    assert plan.arena_bytes == plan.arena_lower_bound == 512  # s1 is still read by the kernel that writes s2
    assert plan.notes["temporaries_bytes"] == 512


def test_weights_are_aligned_and_deduplicated():
    a = np.arange(3, dtype=np.float32)
    b = np.arange(5, dtype=np.int64)
    offsets, blob = layout_weights([("a", a), ("b", b), ("a2", a.copy()), ("a_as_int", a.view(np.int32))])
    assert offsets == {"a": 0, "b": 64, "a2": 0, "a_as_int": 128}
    assert blob[64:104] == b.tobytes()
