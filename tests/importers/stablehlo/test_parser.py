"""StableHLO text parser and lowering errors: syntax features JAX emits, and clear messages
(file:line:column, op name, Python source) for malformed or unsupported input."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import ModelError, UnsupportedError
from aot.importers.stablehlo import import_stablehlo, parse_module
from aot.importers.stablehlo import import_text
from aot.interpreter import interpret

GENERIC_AND_PRETTY = """\
#loc1 = loc("model.py":12:4)
#loc2 = loc("jit(f)/max"(#loc1))
module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {jax.arg_info = "x"}, %arg1: tensor<3xf32> loc("bias")) -> (tensor<2x3xf32> {jax.result_info = "y"}, tensor<2xf32>) {
    %w = stablehlo.constant dense<"0x0000803F0000004000004040000080400000A0400000C040"> : tensor<2x3xf32>
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %n = stablehlo.constant dense<[[1.0, -2.5, 3.0], [0.5, 0.0, -1.0]]> : tensor<2x3xf32>
    %0 = "stablehlo.add"(%arg0, %w) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc(#loc2)
    %1:2 = call @pair(%0, %n) : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
    %2 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %3 = stablehlo.multiply %1#1, %2 : tensor<2x3xf32>
    %4 = stablehlo.reduce(%3 init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    return %1#0, %4 : tensor<2x3xf32>, tensor<2xf32>
  }
  func.func private @pair(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
    %0 = stablehlo.subtract %a, %b : tensor<2x3xf32>
    return %0, %b : tensor<2x3xf32>, tensor<2x3xf32>
  }
}
"""


def test_generic_pretty_hex_blobs_multi_results_and_calls():
    graph = import_text(GENERIC_AND_PRETTY, "m.mlir")
    assert graph.input_names == ["x", "bias"] and graph.output_names == ["y", "out1"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    bias = np.array([1.0, -1.0, 2.0], np.float32)
    w = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    n = np.array([[1.0, -2.5, 3.0], [0.5, 0.0, -1.0]], np.float32)
    y, m = interpret(graph, {"x": x, "bias": bias})
    np.testing.assert_array_equal(y, x + w - n)
    np.testing.assert_array_equal(m, np.max(n * bias, axis=1))


def test_locations_resolve_through_aliases():
    module = parse_module(GENERIC_AND_PRETTY, "m.mlir")
    add = module.funcs["main"].body.ops[3]
    assert add.name == "stablehlo.add" and add.pos.line == 8 and add.pos.loc == ("#loc2",)
    from aot.importers.stablehlo.locations import describe

    assert describe(add.pos.loc, module.loc_aliases) == "model.py:12:4 (jit(f)/max)"


@pytest.mark.parametrize("text, where, what", [
    ("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.add %a, %a : tensor<2xf32\n}",
     "2:31", "no closing '>'"),
    ("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  %0 = stablehlo.add %a %a : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}",
     "2:25", "expected ':'"),
    ("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %a : tensor<2xf32>\n", "3:1", "unterminated region"),
    ("module {\n  func.func @main(%a tensor<2xf32>) {\n  }\n}", "2:22", "expected ':'"),
    ("func.func @main() -> tensor<f32> {\n  %0 = stablehlo.constant dense<[1.0, 2.0> : tensor<2xf32>\n}", "2:42", "expected ',' or ']'"),
    ("func.func @main() -> tensor<f32> {\n  %0 = stablehlo.constant dense<\"0x00\"> : tensor<2xf32>\n}", "2:27", "hex data holds"),
    ("func.func @main() {\n  %0 = stablehlo.constant dense<1> : \"oops\n}", "2:38", "unterminated string"),
    ("%0 = stablehlo.add", "1:1", "expected 'module', 'func.func'"),
])
def test_malformed_text_reports_line_and_column(text, where, what):
    with pytest.raises(ModelError) as info:
        parse_module(text, "bad.mlir")
    message = str(info.value)
    assert message.startswith(f"bad.mlir:{where}:"), message
    assert what in message


def test_unsupported_op_names_op_and_source_location():
    text = """\
#loc1 = loc("net.py":7:3)
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.cbrt %a : tensor<4xf32> loc(#loc1)
  return %0 : tensor<4xf32>
}
"""
    with pytest.raises(UnsupportedError, match=r"^cbrt.mlir:3:3: stablehlo.cbrt \(from net.py:7:3\): op stablehlo.cbrt is not supported"):
        import_text(text, "cbrt.mlir")


def test_unsupported_custom_call_names_its_target():
    text = """\
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @lapack_sgesvd(%a) {api_version = 2 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
    with pytest.raises(UnsupportedError, match=r"2:3: stablehlo.custom_call: custom_call target 'lapack_sgesvd'"):
        import_text(text)


def test_while_with_dynamic_trip_count_is_a_clear_error():
    text = """\
func.func @main(%n: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c, %acc = %x) : tensor<i32>, tensor<f32>
  cond {
    %1 = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.add %i, %one : tensor<i32>
    %2 = stablehlo.add %acc, %acc : tensor<f32>
    stablehlo.return %1, %2 : tensor<i32>, tensor<f32>
  }
  return %0#1 : tensor<f32>
}
"""
    with pytest.raises(UnsupportedError, match=r"3:3: stablehlo.while: while loop condition does not fold .* static trip count"):
        import_text(text)
    fixed = text.replace("%n, SIGNED", "%three, SIGNED").replace("cond {\n", "cond {\n    %three = stablehlo.constant dense<3> : tensor<i32>\n")
    graph = import_text(fixed)
    (y,) = interpret(graph, {"arg0": np.array(0, np.int32), "arg1": np.array(1.5, np.float32)})
    assert float(y) == 12.0  # doubled three times


def test_declared_type_mismatch_is_a_model_error():
    text = """\
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  return %a : tensor<4xf32>
}
"""
    with pytest.raises(ModelError, match=r"2:3: stablehlo.add: result 0 is declared tensor<5xf32> but computes to f32\[4\]"):
        import_text(text)


def test_unsupported_element_type_and_undefined_value():
    with pytest.raises(UnsupportedError, match=r"input 'arg0' .* element type ui32 is not supported"):
        import_text("func.func @main(%a: tensor<4xui32>) -> tensor<4xui32> {\n  return %a : tensor<4xui32>\n}")
    with pytest.raises(ModelError, match=r"2:3: stablehlo.negate: use of undefined value %b"):
        import_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.negate %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}")


def test_missing_file_and_bytecode_are_model_errors(tmp_path):
    with pytest.raises(ModelError, match="cannot read"):
        import_stablehlo(tmp_path / "none.mlir")
    bytecode = tmp_path / "m.mlir"
    bytecode.write_bytes(b"ML\xefR\xff\x00")
    with pytest.raises(ModelError, match="not UTF-8"):
        import_stablehlo(bytecode)


def test_input_and_output_names_are_jax_names_exactly():
    text = """\
func.func public @main(%arg0: tensor<2xf32> {jax.arg_info = "params['w']"}, %arg1: tensor<2xf32> {jax.arg_info = "x"},
                       %arg2: tensor<2xf32> {jax.arg_info = "x"}) -> (tensor<2xf32> {jax.result_info = "result[0]"}) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<2xf32>
  %1 = stablehlo.add %0, %arg2 : tensor<2xf32>
  return %1 : tensor<2xf32>
}
"""
    graph = import_text(text, shapes={"params['w']": (2,)})
    assert graph.input_names == ["params['w']", "x", "arg2"]  # a repeated name falls back to argN: feeds need distinct names
    assert graph.output_names == ["result[0]"]
