"""benchmarks/compare_artifacts.py: two builds of one model, interleaved."""

import pytest

import aot
import compare_artifacts
import make_samples


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    paths = make_samples.write_samples(out)
    artifacts = {}
    for name in ("lenet", "mlp"):
        artifacts[name] = out / f"{name}.aot"
        aot.compile(paths[name], artifacts[name])
    return artifacts


def test_prints_medians_and_speedup(builds, capsys):
    assert compare_artifacts.main([str(builds["lenet"]), str(builds["lenet"]), "--runs", "3"]) == 0
    out = capsys.readouterr().out
    assert "before" in out and "after" in out and "speedup" in out


def test_refuses_two_different_models(builds):
    with pytest.raises(SystemExit, match="take different inputs"):
        compare_artifacts.main([str(builds["lenet"]), str(builds["mlp"]), "--runs", "1"])
