"""Buffer donation on the command line: `--donate INPUT=OUTPUT` and `--no-infer-donation` in
`aot-compile` and `aot verify`; the pairs in `-v` output and in `aot inspect`; a pair the model
cannot have is a usage error (exit 2)."""
import json

import onnx
import pytest
from click.testing import CliRunner

from aot.artifact import read_artifact
from aot.cli import EXIT_USAGE, compile_main, main
from donation_util import cache_model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("donation")
    onnx.save(cache_model(), folder / "cache.onnx")
    onnx.save(cache_model(names=("cache", "cache_out")), folder / "named.onnx")
    return folder


def _run(command, args, status=0):
    result = CliRunner().invoke(command, [str(a) for a in args])
    assert result.exit_code == status, result.output
    return result


def _pairs(path) -> list[dict]:
    return read_artifact(path).manifest.get("donations", [])


def test_inferred_by_default_explained_with_v_and_in_inspect(models, tmp_path):
    out = tmp_path / "c.aot"
    result = _run(compile_main, [models / "cache.onnx", "-o", out, "-v"])
    assert "past_keys -> present_keys (inferred from the names)" in result.stderr
    assert "donation       past_keys -> present_keys: in place, k3_scatter (scatter)" in result.stderr
    assert _pairs(out) == [{"input": 0, "output": 0}]
    shown = _run(main, ["inspect", out]).output
    assert ("donated: past_keys -> present_keys (inferred from the names): in place, k3_scatter (scatter) "
            "writes only the updated windows over it") in shown
    info = json.loads(_run(main, ["inspect", out, "--json"]).output)
    assert info["donations"] == [{"input": 0, "output": 0, "how": "in place", "inferred": True,
                                  "why": "k3_scatter (scatter) writes only the updated windows over it"}]


def test_no_infer_donation_and_an_explicit_pair(models, tmp_path):
    _run(compile_main, [models / "cache.onnx", "-o", tmp_path / "a.aot", "--no-infer-donation"])
    assert _pairs(tmp_path / "a.aot") == []
    _run(main, ["compile", models / "named.onnx", "-o", tmp_path / "b.aot", "--donate", "cache=cache_out"])
    assert _pairs(tmp_path / "b.aot") == [{"input": 0, "output": 0}]
    assert "donated: cache -> cache_out (asked for)" in _run(main, ["inspect", tmp_path / "b.aot"]).output


@pytest.mark.parametrize("pair, message", [
    ("nope=present_keys", "--donate nope=present_keys: the model has no input 'nope'"),
    ("past_keys=nope", "--donate past_keys=nope: the model has no output 'nope'"),
    ("position=present_keys", "--donate position=present_keys: the input is int64, the output float32"),
    ("past_keys", "'past_keys' is not INPUT=OUTPUT"),
])
def test_a_pair_the_model_cannot_have_is_a_usage_error(models, tmp_path, pair, message):
    result = _run(compile_main, [models / "cache.onnx", "-o", tmp_path / "x.aot", "--donate", pair], EXIT_USAGE)
    assert message in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "x.aot").exists()


def test_verify_compiles_with_the_pairs(models):
    result = _run(main, ["verify", models / "named.onnx", "--donate", "cache=cache_out"])
    assert "PASS: 2 output(s) match onnxruntime" in result.output
    result = _run(main, ["verify", models / "cache.onnx", "--donate", "q=present_keys"], EXIT_USAGE)
    assert "--donate q=present_keys: the input's shape is [1, 2, 1, 8]" in result.stderr
