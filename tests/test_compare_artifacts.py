"""benchmarks/compare_artifacts.py: two builds of one model, interleaved."""
import sys
from pathlib import Path

import pytest

import aot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "models"))
import compare_artifacts  # noqa: E402
import make_samples  # noqa: E402


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
