from aot.passes.dce import DeadCodeElim
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
