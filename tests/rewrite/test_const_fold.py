from aot.rewrite.const_fold import ConstFold
from passes_util import ir, run_pass


def test_folds_scalar_arithmetic():
    changed, out = run_pass(ConstFold(), """
        graph @g(%x: f32[]) {
          %a = constant() {value = dense<1.5>} : f32[]
          %b = constant() {value = dense<2.0>} : f32[]
          %c = add(%a, %b) : f32[]
          %y = mul(%x, %c) : f32[]
          return %y as "y"
        }""")
    assert changed
    assert out == ir("""
        graph @g(%x: f32[]) {
          %a = constant() {value = dense<1.5>} : f32[]
          %b = constant() {value = dense<2.0>} : f32[]
          %c.c = constant() {value = dense<3.5>} : f32[]
          %y = mul(%x, %c.c) : f32[]
          return %y as "y"
        }""")


def test_folds_transpose_of_weights():
    changed, out = run_pass(ConstFold(), """
        graph @g(%x: f32[1,2]) {
          %w = constant() {value = dense<[[1.0, 2.0], [3.0, 4.0]]>} : f32[2,2]
          %t = transpose(%w) {perm = [1, 0]} : f32[2,2]
          %y = dot(%x, %t) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[1,2]
          return %y as "y"
        }""")
    assert changed
    assert "%t.c = constant() {value = dense<[[1.0, 3.0], [2.0, 4.0]]>} : f32[2,2]" in out


def test_does_not_fold_when_result_outgrows_inputs():
    text = """
        graph @g(%x: f32[64,64]) {
          %z = constant() {value = dense<0.0>} : f32[]
          %b = broadcast(%z) {dims = [], shape = [64, 64]} : f32[64,64]
          %y = max(%x, %b) : f32[64,64]
          return %y as "y"
        }"""
    changed, out = run_pass(ConstFold(), text)
    assert not changed and out == ir(text)


def test_does_not_fold_non_constant_inputs():
    text = """
        graph @g(%x: f32[2]) {
          %y = exp(%x) : f32[2]
          return %y as "y"
        }"""
    changed, out = run_pass(ConstFold(), text)
    assert not changed and out == ir(text)


def test_folds_weight_normalization_through_the_broadcast_of_its_norm():
    # v / broadcast(norm): the broadcast alone outgrows its operand, but the division
    # costs no more than v, so it folds into one weight (a packable conv weight)
    changed, out = run_pass(ConstFold(), """
        graph @g(%x: f32[2,3]) {
          %v = constant() {value = dense<[[3.0, 4.0, 0.0], [4.0, 3.0, 5.0]]>} : f32[2,3]
          %n = constant() {value = dense<[5.0, 5.0]>} : f32[2]
          %nb = broadcast(%n) {dims = [0], shape = [2, 3]} : f32[2,3]
          %w = div(%v, %nb) : f32[2,3]
          %y = mul(%x, %w) : f32[2,3]
          return %y as "y"
        }""")
    assert changed
    assert "%y = mul(%x, %w.c)" in out
    assert "%w.c = constant() {value = dense<[[0.6000000238418579, 0.800000011920929, 0.0], " in out
