"""aot diff (aot/gates/diff.py): two artifacts compiled differently, identical ones, damaged ones."""
import json

import pytest
from click.testing import CliRunner

from aot.cli import main
from aot.gates.diff import Change, diff_artifacts, format_diff
from gates_util import compile_samples, damaged_copies


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    # AOT_CPU=native in the suite (tests/conftest.py): lenet and lenet_again are this host's code
    return compile_samples(tmp_path_factory, {"lenet": {}, "lenet_again": {}, "lenet_v3": {"cpu": "x86-64-v3"},
                                              "lenet_logits": {}, "mlp": {}})


def test_identical_artifacts_print_no_differences(samples):
    for other in ("lenet", "lenet_again"):  # the same file, and a second compile (deterministic)
        diff = diff_artifacts(samples["lenet"], samples[other])
        assert diff.empty and format_diff(diff) == "no differences"
        assert diff.to_json()["identical"] is True


def test_another_cpu_changes_the_code_sections_and_the_targets(samples):
    diff = diff_artifacts(samples["lenet"], samples["lenet_v3"])
    sections = {c.name: c for c in diff.groups["sections"]}
    code = [name for name in sections if name.startswith("cpu.")]
    assert "cpu.x86_64.x86-64-v3" in code and sections["cpu.x86_64.x86-64-v3"].before is None
    assert any(sections[name].after is None for name in code)  # the native section is gone
    assert "weights" not in sections  # the same model: the same weights
    targets = next(c for c in diff.groups["manifest"] if c.name == "targets")
    assert targets.after == "x86_64 x86-64-v3"
    # the two variants pair up, so kernels compare one by one: every name on both sides
    assert all(c.before is not None and c.after is not None for c in diff.groups["kernels"])
    assert not diff.groups["plan"]  # one plan for every CPU


def test_a_changed_model_shows_its_kernels_plan_and_manifest(samples):
    diff = diff_artifacts(samples["lenet"], samples["lenet_logits"])
    names = [c.name for c in diff.groups["sections"]]
    assert "manifest" in names and "weights" not in names  # the same weights: only the softmax went
    plan = {(c.name, c.before, c.after) for c in diff.groups["plan"]}
    assert ("kernel count", 9, 8) in plan
    assert any(name == "kernel removed" and "exp" in before for name, before, _ in plan)
    kernels = diff.groups["kernels"]
    assert any(c.after is None and "mul" in c.name for c in kernels)  # the softmax kernel's code is gone
    manifest = {c.name: c for c in diff.groups["manifest"]}
    assert manifest["output y"].before == "float32[1, 10]" and manifest["output y"].after is None
    assert manifest["model sha256"].before != manifest["model sha256"].after


def test_input_shape_changes_are_named(samples):
    diff = diff_artifacts(samples["lenet"], samples["mlp"])
    change = next(c for c in diff.groups["manifest"] if c.name == "input x")
    assert (change.before, change.after) == ("float32[1, 1, 28, 28]", "float32[1, 784]")


def test_changes_sort_by_absolute_size_change(samples):
    diff = diff_artifacts(samples["lenet"], samples["lenet_logits"])
    for group in ("sections", "kernels"):
        deltas = [abs(c.delta) for c in diff.groups[group] if c.delta is not None]
        assert deltas == sorted(deltas, reverse=True) and deltas
    plan = diff.groups["plan"]
    sized = [c for c in plan if c.delta is not None]
    assert plan[:len(sized)] == sized  # kernel lists follow the sizes


def test_the_text_has_a_headline_and_a_block_per_group(samples):
    text = format_diff(diff_artifacts(samples["lenet"], samples["lenet_logits"]))
    lines = text.splitlines()
    assert lines[0].startswith(f"{samples['lenet']} -> {samples['lenet_logits']}: ")
    for title in ("sections (stored bytes)", "kernel code (bytes, per CPU variant)", "manifest", "plan"):
        assert title in lines
    manifest = next(line for line in lines if line.strip().startswith("manifest "))
    assert "->" in manifest and "raw" in manifest
    assert "  output y      removed: float32[1, 10]" in lines
    assert "  output fc3    added: float32[1, 10]" in lines
    assert any(line.startswith("  kernel removed  k8_mul (") and line.endswith("+mul)") for line in lines)


def test_change_sizes():
    assert Change("s", 100, 150).delta == 50
    assert Change("s", None, 70).delta == 70 and Change("s", 70, None).delta == -70
    assert Change("kernel added", None, "k0 (pad)").delta is None
    assert Change("targets", "a", "b").delta is None


def test_cli_text_and_json(samples):
    text = CliRunner().invoke(main, ["diff", str(samples["lenet"]), str(samples["lenet_v3"])])
    assert text.exit_code == 0, text.output
    assert "cpu.x86_64.x86-64-v3" in text.stdout
    same = CliRunner().invoke(main, ["diff", str(samples["lenet"]), str(samples["lenet_again"])])
    assert same.exit_code == 0 and same.stdout == "no differences\n"
    raw = CliRunner().invoke(main, ["diff", "--json", str(samples["lenet"]), str(samples["lenet_logits"])])
    data = json.loads(raw.stdout)
    assert data["identical"] is False and data["delta_bytes"] == data["b_bytes"] - data["a_bytes"]
    assert {"sections", "kernels", "manifest", "plan"} <= set(data)
    assert all({"name", "before", "after", "delta", "note"} == set(c) for c in data["sections"])


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage"])
def test_cli_damaged_artifact_exits_2_naming_it(samples, tmp_path, damage):
    path = damaged_copies(samples["lenet"], tmp_path)[damage]
    result = CliRunner().invoke(main, ["diff", str(samples["lenet"]), str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: ") and "Traceback" not in result.output


def test_cli_missing_file_exits_2(samples, tmp_path):
    result = CliRunner().invoke(main, ["diff", str(samples["lenet"]), str(tmp_path / "gone.aot")])
    assert result.exit_code == 2 and "gone.aot' does not exist" in result.stderr
