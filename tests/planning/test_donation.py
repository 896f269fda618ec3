from aot.ir.parser import parse_graph
from aot.ir.verifier import verify_graph
from aot.plan import Donation, Slice
from aot.planning.buffers import assign_buffers
from aot.planning.fusion import fuse
from passes_util import ir

# a cache updated at a run-time position (dynamic_update_slice's scatter) and read whole after
UPDATE = """
    graph @g(%past: f32[2,16,8], %at: i64[3], %new: f32[2,1,8]) {
      %present = scatter(%past, %at, %new) {index_vector_dim = 0, inserted_window_dims = [], kind = "assign", scatter_dims_to_operand_dims = [0, 1, 2], update_window_dims = [0, 1, 2]} : f32[2,16,8]
      %e = exp(%present) : f32[2,16,8]
      %s = reduce(%e) {axes = [0, 1, 2], kind = "sum"} : f32[]
      return %present as "present", %s as "s"
    }"""
# the old cache is also read, by a kernel that comes after the update in graph order
OLD_READ_LATE = UPDATE.replace('''      return %present as "present", %s as "s"''', '''      %old = reduce(%past) {axes = [0, 1, 2], kind = "max"} : f32[]
      return %present as "present", %s as "s", %old as "old"''')
# a kernel reads the old and the new cache: nothing can overwrite the old one before it runs
OLD_AND_NEW = UPDATE.replace('''      return %present as "present", %s as "s"''', '''      %delta = sub(%present, %past) : f32[2,16,8]
      return %present as "present", %s as "s", %delta as "delta"''')
DONATED = [Donation(0, 0)]


def plan_of(text: str, donations=DONATED, **options):
    graph = parse_graph(ir(text))
    plan = assign_buffers(graph, fuse(graph), donations=donations, **options)
    verify_graph(graph)
    return plan


def order(plan) -> list[str]:
    return [k.root.name for k in plan.kernels]


def test_a_scatter_update_writes_over_the_donated_input_in_place():
    plan = plan_of(UPDATE)
    home = Slice("output", 0, 0, 2 * 16 * 8 * 4)
    assert plan.slices["past"] == plan.slices["present"] == home
    assert plan.donations == DONATED
    (note,) = plan.notes["donations"]
    assert (note["input"], note["output"], note["how"]) == ("past", "present", "in place")
    assert "(scatter) writes only the updated windows" in note["why"]
    assert order(plan) == ["present", "s"]  # no copy kernel


def test_without_donations_the_input_keeps_its_own_buffer():
    plan = plan_of(UPDATE, donations=())
    assert plan.slices["past"] == Slice("input", 0, 0, 2 * 16 * 8 * 4)
    assert plan.donations == [] and plan.notes["donations"] == []


def test_readers_of_the_old_value_run_before_the_update():
    plain = plan_of(OLD_READ_LATE, donations=())
    assert order(plain).index("old") > order(plain).index("present")
    plan = plan_of(OLD_READ_LATE)
    assert order(plan).index("old") < order(plan).index("present")
    assert plan.slices["past"].kind == "output"
    (note,) = plan.notes["donations"]
    assert note["how"] == "in place"
    reader = next(k.name for k in plan.kernels if k.root.name == "old")
    assert note["why"].endswith(f"; {reader} read it first")  # the kernel's name after scheduling


def test_readers_come_first_without_the_scheduler_too():
    plan = plan_of(OLD_READ_LATE, reorder=False)
    assert order(plan).index("old") < order(plan).index("present")
    assert [k.name for k in plan.kernels][0].startswith("k0_")


def test_copies_the_input_first_when_a_kernel_reads_old_and_new():
    plan = plan_of(OLD_AND_NEW)
    copy = plan.kernels[0]
    assert copy.ops == ["copy"] and [p.name for p in copy.params] == ["past"]
    assert plan.slices["past"].kind == "output" and plan.slices[copy.root.name].kind == "arena"
    readers = [k for k in plan.kernels if any(p.name == "past" for p in k.params)]
    assert readers == [copy]  # every other reader reads the copy
    (note,) = plan.notes["donations"]
    assert note["how"] == "copied" and "needs the output %present first" in note["why"]
    assert "is copied" in copy.reason


def test_an_elementwise_update_reads_each_element_where_it_writes_it():
    text = """
        graph @g(%past: f32[16,8], %new: f32[16,8]) {
          %present = add(%past, %new) : f32[16,8]
          return %present as "present"
        }"""
    plan = plan_of(text)
    assert plan.slices["past"] == plan.slices["present"]
    assert plan.notes["donations"][0]["how"] == "in place"
    assert len(plan.kernels) == 1


def test_copies_when_the_writer_reads_the_input_at_other_indices():
    text = """
        graph @g(%past: f32[8,8]) {
          %present = transpose(%past) {perm = [1, 0]} : f32[8,8]
          return %present as "present"
        }"""
    plan = plan_of(text)
    (note,) = plan.notes["donations"]
    assert note["how"] == "copied" and "reads it at other indices" in note["why"]
    assert plan.kernels[0].ops == ["copy"]


def test_copies_when_a_run_time_check_reads_the_input():
    text = """
        graph @g(%past: i1[], %new: i1[]) {
          %present = and(%past, %new) : i1[]
          %ok = check(%past) {message = "past must hold"} : i1[]
          return %present as "present"
        }"""
    plan = plan_of(text)
    assert plan.notes["donations"][0]["why"] == "a run-time check reads it after the last kernel"
    assert plan.checks[0].ok.name != "past" and plan.slices[plan.checks[0].ok.name].kind == "arena"


# the cache updated layer by layer (JAX's dynamic_update_slice per layer), read between the updates
LAYERS = """
    graph @g(%past: f32[2,16,8], %at0: i64[3], %at1: i64[3], %u0: f32[1,1,8], %u1: f32[1,1,8]) {
      %p1 = scatter(%past, %at0, %u0) {index_vector_dim = 0, inserted_window_dims = [], kind = "assign", scatter_dims_to_operand_dims = [0, 1, 2], update_window_dims = [0, 1, 2]} : f32[2,16,8]
      %r0 = reduce(%p1) {axes = [0, 1, 2], kind = "sum"} : f32[]
      %present = scatter(%p1, %at1, %u1) {index_vector_dim = 0, inserted_window_dims = [], kind = "assign", scatter_dims_to_operand_dims = [0, 1, 2], update_window_dims = [0, 1, 2]} : f32[2,16,8]
      return %present as "present", %r0 as "r0"
    }"""


def test_a_chain_of_updates_is_in_place_link_by_link():
    plan = plan_of(LAYERS)
    home = Slice("output", 0, 0, 2 * 16 * 8 * 4)
    assert plan.slices["past"] == plan.slices["p1"] == plan.slices["present"] == home
    assert order(plan) == ["p1", "r0", "present"] and plan.arena_bytes == 0
    (note,) = plan.notes["donations"]
    assert note["how"] == "in place"
    assert note["why"] == ("k0_scatter (scatter), k2_scatter (scatter) write only their updated windows, in turn, "
                           "over it; k1_reduce read it first")


def test_a_chain_whose_value_is_needed_after_the_next_link_is_overwritten_instead():
    text = LAYERS.replace('''      return %present as "present", %r0 as "r0"''', '''      %d = sub(%present, %p1) : f32[2,16,8]
      return %present as "present", %r0 as "r0", %d as "d"''')
    plan = plan_of(text)
    (note,) = plan.notes["donations"]
    assert note["how"] == "overwritten" and note["why"].startswith("k2_scatter writes the whole output without")
    assert plan.slices["p1"].kind == "arena" and plan.slices["past"] == plan.slices["present"]
    assert order(plan).index("p1") < order(plan).index("present")
