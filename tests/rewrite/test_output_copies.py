from aot.rewrite.output_copies import OutputCopies
from passes_util import ir, run_pass


def test_copies_input_constant_and_repeated_outputs():
    changed, out = run_pass(OutputCopies(), """
        graph @g(%x: f32[2]) {
          %c = constant() {value = dense<[1.0, 2.0]>} : f32[2]
          %y = exp(%x) : f32[2]
          return %x as "x", %c as "c", %y as "y", %y as "y2"
        }""")
    assert changed
    assert out == ir("""
        graph @g(%x: f32[2]) {
          %c = constant() {value = dense<[1.0, 2.0]>} : f32[2]
          %y = exp(%x) : f32[2]
          %0 = copy(%x) : f32[2] loc("output x")
          %1 = copy(%c) : f32[2] loc("output c")
          %2 = copy(%y) : f32[2] loc("output y2")
          return %0 as "x", %1 as "c", %y as "y", %2 as "y2"
        }""")


def test_does_not_copy_computed_outputs():
    text = """
        graph @g(%x: f32[2]) {
          %y = exp(%x) : f32[2]
          return %y as "y"
        }"""
    changed, out = run_pass(OutputCopies(), text)
    assert not changed and out == ir(text)
