"""docs/ci/github-actions.yml, the README's CI recipe: a job a CI can run, whose aot commands
and options exist. Parsed with PyYAML where it is installed; its commands are checked either way."""
import re
import shlex

import click
import pytest
from click.testing import CliRunner

from aot.cli import compile_main, main
from paths_util import ROOT

RECIPE = ROOT / "docs" / "ci" / "github-actions.yml"


def _run_lines() -> list[str]:
    """The shell commands of the recipe's `run:` steps (one line each here)."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*run:\s*(.+)$", RECIPE.read_text(), re.MULTILINE)]


def _aot_commands() -> list[list[str]]:
    """Each aot or aot-compile invocation of the recipe as argv, shell redirections dropped."""
    commands = []
    for line in _run_lines():
        for part in re.split(r"&&|\|\|", line):
            argv = shlex.split(part.split(">")[0])
            if argv and argv[0] in ("aot", "aot-compile"):
                commands.append(argv)
    return commands


def _command(argv: list[str]) -> tuple[click.Command, list[str]]:
    """The click command an argv runs, and the argv prefix that reaches it."""
    if argv[0] == "aot-compile":
        return compile_main, []
    return main.commands[argv[1]], [argv[1]]


def test_parses_as_a_workflow():
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(RECIPE.read_text())
    steps = workflow["jobs"]["gates"]["steps"]
    uses = [step.get("uses", "") for step in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    assert any(u.startswith("actions/setup-python@") for u in uses)
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert "build/lenet.aot" in upload["with"]["path"]


def test_the_job_compiles_checks_and_keeps_the_artifact():
    text = RECIPE.read_text()
    names = [argv[:2] for argv in _aot_commands()]
    assert ["aot-compile", "build/lenet.onnx"] in names and ["aot", "check"] in names
    assert "actions/upload-artifact@" in text and "build/lenet.aot" in text
    assert "pip install" in text and "actions/checkout@" in text and "actions/setup-python@" in text


@pytest.mark.parametrize("argv", _aot_commands(), ids=lambda argv: " ".join(argv[:2]))
def test_every_aot_command_and_option_exists(argv):
    command, prefix = _command(argv)
    runner_root = compile_main if argv[0] == "aot-compile" else main
    helped = CliRunner().invoke(runner_root, [*prefix, "--help"])
    assert helped.exit_code == 0, helped.output
    known = {opt for param in command.params for opt in param.opts}
    used = {token.split("=")[0] for token in argv if token.startswith("--")}
    assert used <= known, f"{' '.join(argv)}: no such option {sorted(used - known)}"


def test_the_model_step_writes_what_the_compile_reads():
    make = next(line for line in _run_lines() if "make_samples.py" in line)
    assert "--out build" in make and (ROOT / "models" / "make_samples.py").is_file()


def test_the_readme_shows_the_recipe_as_it_is():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("### A CI recipe", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    recipe = [line.strip() for line in RECIPE.read_text().splitlines()]
    missing = [line for line in block.splitlines() if line.strip() and line.strip() not in recipe]
    assert not missing, f"README lines not in {RECIPE.name}: {missing}"
