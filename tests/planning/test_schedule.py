from aot.ir.parser import parse_graph
from aot.plan import Kernel
from aot.planning.fusion import fuse
from aot.planning.schedule import list_schedule, peak_live_bytes, schedule, stable_order
from passes_util import ir

# two independent branches; the input order computes both big temporaries first
# (a1, b1 live together; the reductions are outputs), the greedy order finishes one branch before the next
BRANCHES = """
    graph @g(%x: f32[1024]) {
      %a1 = exp(%x) : f32[1024]
      %b1 = tanh(%x) : f32[1024]
      %sa = reduce(%a1) {axes = [0], kind = "sum"} : f32[]
      %sa2 = reduce(%a1) {axes = [0], kind = "max"} : f32[]
      %sb = reduce(%b1) {axes = [0], kind = "sum"} : f32[]
      %sb2 = reduce(%b1) {axes = [0], kind = "max"} : f32[]
      return %sa as "sa", %sa2 as "sa2", %sb as "sb", %sb2 as "sb2"
    }"""


def temporaries(kernels):
    return {k.root.name for k in kernels if k.root.name in ("a1", "b1", "a", "s")}


def roots(kernels):
    return [k.root.name for k in kernels]


def test_greedy_order_lowers_peak_and_stays_topological():
    kernels = fuse(parse_graph(ir(BRANCHES)))
    temps = temporaries(kernels)
    assert roots(kernels) == ["a1", "b1", "sa", "sa2", "sb", "sb2"]
    ordered = schedule(kernels, temps)
    assert roots(ordered) == ["a1", "sa", "sa2", "b1", "sb", "sb2"]
    assert peak_live_bytes(ordered, temps) < peak_live_bytes(kernels, temps)
    position = {k.root.name: i for i, k in enumerate(ordered)}
    for k in ordered:
        for p in k.params:
            assert p.name not in position or position[p.name] < position[k.root.name]
    assert [k.name for k in ordered][:2] == ["k0_exp", "k1_reduce"]


def test_does_not_reorder_when_greedy_is_no_better():
    text = """
        graph @g(%x: f32[1024]) {
          %a = exp(%x) : f32[1024]
          %r1 = reduce(%a) {axes = [0], kind = "sum"} : f32[]
          %r2 = reduce(%a) {axes = [0], kind = "max"} : f32[]
          return %r2 as "r2", %r1 as "r1"
        }"""
    kernels = fuse(parse_graph(ir(text)))
    assert roots(kernels) == ["a", "r1", "r2"]
    assert schedule(kernels, temporaries(kernels)) is kernels


def test_peak_counts_values_until_their_last_reader():
    kernels = fuse(parse_graph(ir(BRANCHES)))
    # a1 and b1 (4 KiB each) are both live while sa..sb2 run in the input order
    assert peak_live_bytes(kernels, temporaries(kernels)) == 2 * 4096
    assert peak_live_bytes(list_schedule(kernels, temporaries(kernels)), temporaries(kernels)) == 4096


def test_orderings_beyond_the_data_are_honoured_with_the_fewest_moves():
    kernels = fuse(parse_graph(ir(BRANCHES)))
    assert roots(kernels) == ["a1", "b1", "sa", "sa2", "sb", "sb2"]
    # sb2 must run before a1 (as a donated input's reader must before its writer)
    moved = stable_order(kernels, [("sb2", "a1")])
    assert roots(moved) == ["b1", "sb", "sb2", "a1", "sa", "sa2"]
    assert stable_order(kernels, [("a1", "sb2")]) is kernels  # already honoured: nothing moves
    ordered = schedule(kernels, temporaries(kernels), [("sb2", "a1")])
    assert roots(ordered).index("sb2") < roots(ordered).index("a1")
    assert [k.name for k in ordered] == [f"k{i}_{k.root.producer.op}" for i, k in enumerate(ordered)]


def test_a_read_through_a_reshape_alias_waits_for_the_kernel_writing_its_bytes():
    # the buffer pass drops a reshape's kernel and makes its result an alias of its operand;
    # a kernel reading the alias must still follow the one writing the operand (fuzz seed
    # 35945: a conv on an unsqueezed concat ran before the concat and read stale bytes)
    graph = parse_graph(ir("""
        graph @g(%x: f32[6,7]) {
          %t = concat(%x, %x) {axis = 1} : f32[6,14]
          %r = reshape(%t) {shape = [1, 6, 14]} : f32[1,6,14]
          %e = exp(%r) : f32[1,6,14]
          return %e as "e"
        }"""))
    values = {n.out.name: n for n in graph.nodes}
    concat = Kernel("k0_concat", values["t"].out, [values["t"]], [graph.inputs[0]])
    exp = Kernel("k1_exp", values["e"].out, [values["e"]], [values["r"].out])
    aliases = {"r": values["t"].out}  # as assign_buffers records the dropped reshape
    consumer_first = [exp, concat]
    assert roots(stable_order(consumer_first, ())) == ["e", "t"]  # no data edge seen: kept
    assert roots(stable_order(consumer_first, (), aliases)) == ["t", "e"]
    assert roots(list_schedule(consumer_first, {"t"}, (), aliases)) == ["t", "e"]
    assert roots(schedule(consumer_first, {"t"}, (), aliases)) == ["t", "e"]
