"""Helpers for pass tests: IR text in, IR text out; sample graphs that several test modules share."""
import textwrap

from aot.ir.parser import parse_graph
from aot.ir.printer import print_graph
from aot.ir.verifier import verify_graph


def run_pass(p, text: str) -> tuple[bool, str]:
    graph = parse_graph(textwrap.dedent(text).strip() + "\n")
    changed = p.run(graph)
    verify_graph(graph)
    return changed, print_graph(graph)


def ir(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


# a dot feeding a layer norm: fusion keeps the dot a kernel of its own (planning/test_fusion); its root never
# reads the reduced square, so the row cache declines it (codegen/cpu/test_row_cache)
LAYER_NORM = """
    graph @g(%x: f32[3,8], %w: f32[8,8]) {
      %h = dot(%x, %w) {lhs_batch = [], lhs_contract = [1], rhs_batch = [], rhs_contract = [0]} : f32[3,8]
      %n = constant() {value = dense<8.0>} : f32[]
      %nb = broadcast(%n) {dims = [], shape = [3]} : f32[3]
      %s = reduce(%h) {axes = [1], kind = "sum"} : f32[3]
      %mean = div(%s, %nb) : f32[3]
      %mb = broadcast(%mean) {dims = [0], shape = [3, 8]} : f32[3,8]
      %c = sub(%h, %mb) : f32[3,8]
      %sq = mul(%c, %c) : f32[3,8]
      %v = reduce(%sq) {axes = [1], kind = "sum"} : f32[3]
      %r = rsqrt(%v) : f32[3]
      %rb = broadcast(%r) {dims = [0], shape = [3, 8]} : f32[3,8]
      %y = mul(%c, %rb) : f32[3,8]
      return %y as "y"
    }"""
