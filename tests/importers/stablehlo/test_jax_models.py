"""StableHLO models written by JAX (models/make_stablehlo.py): aot-compile, run through the
C runtime, match JAX's stored outputs. The .mlir/.npz files are committed; JAX is not needed."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import aot
from aot.cli import compile_main
from aot.driver import import_model
from aot.errors import ModelError
from aot.interpreter import interpret
from paths_util import TEST_DATA

DATA = TEST_DATA / "stablehlo"
CASES = ["mlp", "cnn", "transformer", "argmax", "gather_scatter", "fori", "bf16"]


def _load(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = np.load(DATA / f"{name}.npz")
    count = lambda prefix: sum(k.startswith(prefix) for k in data)  # noqa: E731
    return [data[f"in_{i}"] for i in range(count("in_"))], [data[f"out_{i}"] for i in range(count("out_"))]


def _assert_matches(got: np.ndarray, want: np.ndarray, bf16: bool) -> None:
    assert got.shape == want.shape
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
        return
    scale = max(1.0, float(np.max(np.abs(want))))
    # bf16 keeps 8 bits of mantissa: JAX and aot may round intermediates differently, so allow a few ulps
    tol = 3 * 2.0 ** -8 if bf16 else 1e-4
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol * scale)


def _run(artifact: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = aot.Session(artifact)
    infos = session.get_inputs()
    assert len(infos) == len(inputs)
    return session.run(None, {info.name: x.astype(info.dtype) for info, x in zip(infos, inputs)})


@pytest.mark.parametrize("name", CASES)
def test_compiled_model_matches_jax(name: str, tmp_path: Path) -> None:
    inputs, expected = _load(name)
    artifact = tmp_path / f"{name}.aot"
    aot.compile(DATA / f"{name}.mlir", artifact)
    got = _run(artifact, inputs)
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        _assert_matches(g, w, bf16=name == "bf16")


@pytest.mark.parametrize("name", ["argmax", "gather_scatter", "fori"])
def test_interpreter_matches_jax(name: str) -> None:
    """The reference interpreter is the oracle of the other tests: it must agree with JAX too."""
    inputs, expected = _load(name)
    graph, _, _ = import_model(DATA / f"{name}.mlir")
    outs = interpret(graph, {v.name: x.astype(v.type.dtype.to_numpy()) for v, x in zip(graph.inputs, inputs)})
    for g, w in zip(outs, expected):
        _assert_matches(g, w, bf16=False)


def test_fori_loop_is_unrolled_and_argmax_has_no_regions() -> None:
    graph, _, _ = import_model(DATA / "fori.mlir")
    assert [n.op for n in graph.nodes].count("dot") == 4  # fori_loop(0, 4, ...)
    graph, _, _ = import_model(DATA / "argmax.mlir")
    assert graph.output_names == ["result[0]", "result[1]"]  # as jax.result_info spells them
    assert {n.op for n in graph.nodes} <= {"iota", "reduce", "broadcast", "compare", "or", "constant", "select"}


def test_shape_polymorphic_export_takes_shape_on_the_command_line(tmp_path: Path) -> None:
    inputs, expected = _load("mlp_poly")
    artifact = tmp_path / "poly.aot"
    result = CliRunner().invoke(compile_main, [str(DATA / "mlp_poly.mlir"), "-o", str(artifact), "--shape", "x=4x32"])
    assert result.exit_code == 0, result.output
    (got,) = _run(artifact, inputs)
    _assert_matches(got, expected[0], bf16=False)


def test_shape_polymorphic_export_without_shape_says_which_flag(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"input 'x' .* has dynamic dims; give its shape with shapes=\{'x': \(N, 32\)\}") as info:
        aot.compile(DATA / "mlp_poly.mlir", tmp_path / "poly.aot")
    assert info.value.cli_message.endswith("give its shape with --shape x=Nx32")
    with pytest.raises(ModelError, match=r"shapes\['x'\] = \(4, 33\) does not fit its type"):
        import_model(DATA / "mlp_poly.mlir", {"x": (4, 33)})
    result = CliRunner().invoke(compile_main, [str(DATA / "mlp_poly.mlir"), "-o", str(tmp_path / "p.aot"), "--shape", "x=4x33"])
    assert result.exit_code == 1 and "error: " in result.output and "--shape x=4x33 does not fit its type" in result.output
