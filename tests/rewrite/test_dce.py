from aot.rewrite.dce import DeadCodeElim
from passes_util import ir, run_pass


def test_removes_unused_chain():
    changed, out = run_pass(DeadCodeElim(), """
        graph @g(%x: f32[2]) {
          %a = exp(%x) : f32[2]
          %b = neg(%a) : f32[2]
          %y = abs(%x) : f32[2]
          return %y as "y"
        }""")
    assert changed
    assert out == ir("""
        graph @g(%x: f32[2]) {
          %y = abs(%x) : f32[2]
          return %y as "y"
        }""")


def test_keeps_everything_live():
    text = """
        graph @g(%x: f32[2]) {
          %a = exp(%x) : f32[2]
          %y = add(%a, %x) : f32[2]
          return %y as "y", %a as "a"
        }"""
    changed, out = run_pass(DeadCodeElim(), text)
    assert not changed and out == ir(text)


def test_keeps_a_check_and_what_it_reads():
    # nothing reads a check's result; it is kept for its effect (failing the run)
    text = """
        graph @g(%x: f32[2], %t: f32[2]) {
          %lt = compare(%x, %t) {direction = "lt"} : i1[2]
          %all = reduce(%lt) {axes = [0], kind = "min"} : i1[]
          %c = check(%all) {message = "x must stay below t"} : i1[] loc("If_0")
          %y = abs(%x) : f32[2]
          return %y as "y"
        }"""
    changed, out = run_pass(DeadCodeElim(), text)
    assert not changed and out == ir(text)
