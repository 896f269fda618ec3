from aot.rewrite.cse import CommonSubexprElim
from passes_util import ir, run_pass


def test_merges_identical_nodes_and_commutative_operands():
    p = CommonSubexprElim()
    changed, out = run_pass(p, """
        graph @g(%x: f32[4], %y: f32[4]) {
          %a = exp(%x) : f32[4]
          %b = exp(%x) : f32[4]
          %s = add(%a, %y) : f32[4]
          %t = add(%y, %b) : f32[4]
          %m = mul(%s, %t) : f32[4]
          return %m as "m"
        }""")
    assert changed and p.summary == "2 duplicate node(s) merged"
    assert out == ir("""
        graph @g(%x: f32[4], %y: f32[4]) {
          %a = exp(%x) : f32[4]
          %s = add(%a, %y) : f32[4]
          %m = mul(%s, %s) : f32[4]
          return %m as "m"
        }""")


def test_merges_constants_with_equal_content():
    changed, out = run_pass(CommonSubexprElim(), """
        graph @g(%x: f32[3]) {
          %c1 = constant() {value = dense<[1.0, 2.0, 3.0]>} : f32[3]
          %c2 = constant() {value = dense<[1.0, 2.0, 3.0]>} : f32[3]
          %a = add(%x, %c1) : f32[3]
          %b = add(%a, %c2) : f32[3]
          return %b as "b"
        }""")
    assert changed and "%c2" not in out and "%b = add(%a, %c1)" in out


def test_does_not_merge_when_attributes_differ():
    text = """
        graph @g(%x: f32[2,3]) {
          %a = reduce(%x) {axes = [0], kind = "sum"} : f32[3]
          %b = reduce(%x) {axes = [0], kind = "max"} : f32[3]
          %c = add(%a, %b) : f32[3]
          %s = sub(%x, %x) : f32[2,3]
          %t = sub(%s, %s) : f32[2,3]
          return %c as "c", %t as "t"
        }"""
    changed, out = run_pass(CommonSubexprElim(), text)
    assert not changed and out == ir(text)


def test_does_not_merge_non_commutative_operands_swapped():
    text = """
        graph @g(%x: f32[4], %y: f32[4]) {
          %a = sub(%x, %y) : f32[4]
          %b = sub(%y, %x) : f32[4]
          %c = add(%a, %b) : f32[4]
          return %c as "c"
        }"""
    changed, out = run_pass(CommonSubexprElim(), text)
    assert not changed and out == ir(text)


def test_check_reads_the_merged_value_and_equal_checks_merge():
    changed, out = run_pass(CommonSubexprElim(), """
        graph @g(%x: f32[], %t: f32[]) {
          %a = compare(%x, %t) {direction = "lt"} : i1[]
          %b = compare(%x, %t) {direction = "lt"} : i1[]
          %c1 = check(%b) {message = "x < t"} : i1[]
          %c2 = check(%a) {message = "x < t"} : i1[]
          %c3 = check(%a) {message = "another reason"} : i1[]
          %y = abs(%x) : f32[]
          return %y as "y"
        }""")
    assert changed
    assert out == ir("""
        graph @g(%x: f32[], %t: f32[]) {
          %a = compare(%x, %t) {direction = "lt"} : i1[]
          %c1 = check(%a) {message = "x < t"} : i1[]
          %c3 = check(%a) {message = "another reason"} : i1[]
          %y = abs(%x) : f32[]
          return %y as "y"
        }""")


def test_large_constants_merge_by_their_whole_content():
    """Constants whose first and last 64 elements match but whose middles differ stay apart
    (the key hashes only the ends); equal ones merge."""
    import numpy as np

    from aot.ir import Builder, DType, Graph, TensorType

    graph = Graph()
    x = graph.add_input("x", TensorType(DType.F32, (1000,)))
    b = Builder(graph)
    base = np.arange(1000, dtype=np.float32)
    middle = base.copy()
    middle[500] = -1.0
    total = x
    for values in (base, middle, base.copy()):
        total = b.op("add", [total, b.constant(values)])
    graph.add_output(total, "y")
    assert CommonSubexprElim().run(graph)
    constants = [n for n in graph.nodes if n.op == "constant"]
    assert len(constants) == 2
    assert sorted(float(n.attrs["value"][500]) for n in constants) == [-1.0, 500.0]
