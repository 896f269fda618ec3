"""C identifiers for a model's names, and the header compiling on its own (aot/c_header.py)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from aot.c_header import CTensor, HeaderSpec, c_identifier, c_string, check_prefix, header_text, unique_identifiers
from aot.errors import ArgumentError
from emit_c_util import CFLAGS, cc


@pytest.mark.parametrize("name, ident", [
    ("x", "x"),
    ("input.1", "input_1"),
    ("a:0", "a_0"),
    ("serving_default/dense-2", "serving_default_dense_2"),
    ("0", "t_0"),           # a digit cannot begin an identifier
    ("1x", "t_1x"),
    ("", "t_"),
    ("__x", "x"),           # leading underscores are the implementation's
    ("_Bool", "Bool"),
    ("int", "int_"),        # C keyword
    ("class", "class_"),    # C++ keyword: the header is usable from C++
    ("bool", "bool_"),      # C23
    ("int32_t", "int32_t_"),  # a type the header uses
    ("NULL", "NULL_"),
    ("héllo", "h_llo"),
])
def test_c_identifier(name, ident):
    assert c_identifier(name) == ident


def test_identifiers_are_unique_ignoring_case_and_avoid_the_headers_own():
    # the macros uppercase them: x and X would both define <P>_X_SHAPE
    assert unique_identifiers(["x", "X", "x.", "x_2", "arena", "Weights"]) == [
        "x", "X_2", "x_", "x_2_2", "arena_2", "Weights_2"]
    assert unique_identifiers(["a-b", "a_b", "a.b"], reserved=()) == ["a_b", "a_b_2", "a_b_3"]


def test_a_given_prefix_must_be_an_identifier_already():
    assert check_prefix("lenet_v2") == "lenet_v2"
    for bad, hint in [("lenet-v2", "lenet_v2"), ("2x", "model_2x"), ("_x", "x"), ("while", "while_"), ("", "model_")]:
        with pytest.raises(ArgumentError, match=f"e.g. --name {hint}$"):
            check_prefix(bad)


def test_c_string_escapes_quotes_backslashes_trigraphs_and_non_ascii():
    assert c_string("node 'a' (If): \"b\" \\ ??= é\n") == \
        '"node \'a\' (If): \\"b\\" \\\\ \\?\\?= \\303\\251\\012"'


def _spec(**changes) -> HeaderSpec:
    base = dict(prefix="m", source="weird */ name.onnx", cpu="x86-64-v3", arch="x86_64", features=("avx2", "fma"),
                inputs=[CTensor("x/*", "x", "float32", (2, 3), 24), CTensor("s", "s", "int64", (), 8)],
                outputs=[CTensor("y", "y", "float16", (0, 4), 0), CTensor("b", "b", "bool", (3,), 3)],
                arena_bytes=0, arena_align=64, weights_bytes=0, donations=[], checks=['bad "x" ??/'],
                version="0.0")
    base.update(changes)
    return HeaderSpec(**base)


def test_the_header_compiles_alone_and_its_macros_have_the_sizes(tmp_path):
    text = header_text(_spec())
    assert "int32_t m_run(const float* x, const int64_t* s, uint16_t* y, uint8_t* b, void* arena);" in text
    assert "#define M_X_SHAPE {2, 3}" in text and "#define M_X_SIZE 6" in text and "#define M_S_RANK 0" in text
    assert "M_S_SHAPE" not in text  # a scalar: `{}` is no initializer in C11
    assert "#define M_Y_SIZE 0" in text and "#define M_ARENA_BYTES 0" in text
    (tmp_path / "m.h").write_text(text)
    (tmp_path / "use.c").write_text(
        '#include "m.h"\n#include "m.h"\n'  # twice: the include guard
        "_Static_assert(M_X_SIZE * sizeof(float) == M_X_BYTES, \"size\");\n"
        "int use(void) { static const int64_t shape[] = M_X_SHAPE;\n"
        "  return (int)shape[1] + (m_status_message(1)[0] == 'b') + (m_status_message(0) == 0); }\n")
    result = subprocess.run([cc(), *CFLAGS, "-c", "use.c", "-o", "use.o"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_comments_cannot_be_closed_by_a_models_names():
    text = header_text(_spec())
    body = text.split("*/", 1)[1]  # after the leading comment, only whole comments and code
    assert "weird *\\/ name.onnx" in text and "'x/\\*'" in text
    assert body.count("/*") == body.count("*/")


def test_the_header_compiles_as_cpp(tmp_path):
    """extern "C" and no C++ keyword among the names: C++ programs link the object too."""
    cxx = shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "m.h").write_text(header_text(_spec(inputs=[CTensor("new", "new_", "float32", (2,), 8)])))
    (tmp_path / "use.cc").write_text('#include "m.h"\nint use(uint16_t* y, uint8_t* b) { const float x[M_NEW__SIZE] = {1, 2};'
                                     " return m_run(x, y, b, nullptr); }\n")
    result = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-c", "use.cc", "-o", "use.o"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
