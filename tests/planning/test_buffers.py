import numpy as np

from aot.ir.parser import parse_graph
from aot.planning.buffers import assign_buffers, layout_weights
from aot.planning.fusion import fuse
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


IN_PLACE = """
    graph @g(%x: f32[64,64]) {
      %a = exp(%x) : f32[64,64]
      %m = reduce(%a) {axes = [0], kind = "max"} : f32[64]
      %mb = broadcast(%m) {dims = [1], shape = [64, 64]} : f32[64,64]
      %c = sub(%a, %mb) : f32[64,64]
      %d1 = reduce(%c) {axes = [0], kind = "sum"} : f32[64]
      %d2 = reduce(%c) {axes = [0], kind = "max"} : f32[64]
      return %d1 as "d1", %d2 as "d2"
    }"""


def test_elementwise_result_reuses_dead_operand_in_place():
    graph = parse_graph(ir(IN_PLACE))
    kernels = fuse(graph)
    assert [k.root.name for k in kernels] == ["a", "m", "c", "d1", "d2"]
    plan = assign_buffers(graph, kernels)
    assert plan.slices["c"] == plan.slices["a"]
    assert plan.notes["in_place"] == 1
    assert plan.arena_bytes == plan.arena_lower_bound == 16384 + 256
    (shared,) = [b for b in plan.notes["memory_plan"] if len(b["values"]) == 2]
    assert shared["values"] == ["a", "c"] and shared["shared"] == {"c": "in place of %a"}
    assert (shared["start"], shared["end"]) == (0, 4)  # from a's write to c's last read


def test_does_not_reuse_in_place_when_disabled_or_operand_read_later():
    graph = parse_graph(ir(IN_PLACE))
    plan = assign_buffers(graph, fuse(graph), in_place=False)
    assert plan.slices["c"].offset != plan.slices["a"].offset
    later = IN_PLACE.replace('%d2 = reduce(%c)', '%d2 = reduce(%a)')
    graph = parse_graph(ir(later))
    plan = assign_buffers(graph, fuse(graph))
    assert plan.notes["in_place"] == 0


def test_does_not_reuse_in_place_when_operand_is_read_at_another_index():
    transposed = IN_PLACE.replace(
        "%c = sub(%a, %mb) : f32[64,64]",
        "%at = transpose(%a) {perm = [1, 0]} : f32[64,64]\n      %c = sub(%at, %mb) : f32[64,64]")
    graph = parse_graph(ir(transposed))
    plan = assign_buffers(graph, fuse(graph))
    assert plan.notes["in_place"] == 0
    assert plan.slices["c"].offset != plan.slices["a"].offset


def test_reshape_kernel_becomes_an_alias_that_extends_the_interval():
    from aot.plan import Kernel

    graph = parse_graph(ir("""
        graph @g(%x: f32[2,8]) {
          %e = exp(%x) : f32[2,8]
          %r = reshape(%e) {shape = [16]} : f32[16]
          %n = neg(%x) : f32[2,8]
          %s = reduce(%r) {axes = [0], kind = "sum"} : f32[]
          return %s as "s", %n as "n"
        }"""))
    e, r, n, s = graph.nodes
    kernels = [
        Kernel("k0", e.out, [e], [graph.inputs[0]]),
        Kernel("k1", r.out, [r], [e.out]),
        Kernel("k2", n.out, [n], [graph.inputs[0]]),
        Kernel("k3", s.out, [s], [r.out]),
    ]
    plan = assign_buffers(graph, kernels, reorder=False)
    assert [k.name for k in plan.kernels] == ["k0", "k2", "k3"]  # the copy is gone
    assert plan.slices["r"] == plan.slices["e"] and plan.slices["e"].kind == "arena"
    (buffer,) = plan.notes["memory_plan"]
    assert buffer["values"] == ["e", "r"] and (buffer["start"], buffer["end"]) == (0, 2)


def test_does_not_alias_a_reshape_that_is_a_graph_output():
    graph = parse_graph(ir("""
        graph @g(%x: f32[2,8]) {
          %e = exp(%x) : f32[2,8]
          %f = neg(%e) : f32[2,8]
          %r = reshape(%e) {shape = [16]} : f32[16]
          return %r as "r", %f as "f"
        }"""))
    plan = assign_buffers(graph, fuse(graph))
    assert plan.slices["r"].kind == "output" and plan.notes["aliases"] == 0


def test_a_scatter_writes_over_its_dead_operand_in_place():
    """A cache updated twice in the arena: the second update overwrites the first's buffer
    (its reader ran before), writing only its windows."""
    text = """
        graph @g(%past: f32[2,16,8], %at0: i64[3], %at1: i64[3], %u: f32[1,1,8]) {
          %p1 = scatter(%past, %at0, %u) SCATTER : f32[2,16,8]
          %r0 = reduce(%p1) {axes = [0, 1, 2], kind = "sum"} : f32[]
          %p2 = scatter(%p1, %at1, %u) SCATTER : f32[2,16,8]
          %r1 = reduce(%p2) {axes = [0, 1, 2], kind = "max"} : f32[]
          return %r1 as "r1", %r0 as "r0"
        }""".replace("SCATTER", '{index_vector_dim = 0, inserted_window_dims = [], kind = "assign", '
                                 'scatter_dims_to_operand_dims = [0, 1, 2], update_window_dims = [0, 1, 2]}')
    graph = parse_graph(ir(text))
    plan = assign_buffers(graph, fuse(graph))
    assert plan.slices["p2"] == plan.slices["p1"] and plan.slices["p1"].kind == "arena"
    assert plan.notes["in_place"] == 1 and plan.arena_bytes == 2 * 16 * 8 * 4
    read_late = text.replace('return %r1 as "r1", %r0 as "r0"', 'return %r1 as "r1", %r0 as "r0", %p1 as "p1"')
    graph = parse_graph(ir(read_late))
    assert assign_buffers(graph, fuse(graph)).notes["in_place"] == 0  # p1 lives on as an output
