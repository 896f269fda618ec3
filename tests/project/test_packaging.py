"""pyproject.toml lists its packages by hand (importers/ installs as aot.importers), so a
new subpackage must be added there: a wheel would silently leave it out."""
from __future__ import annotations

import tomllib

from paths_util import ROOT

import aot
from aot.version import __version__


def _config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_every_python_package_in_the_tree_is_installed():
    tool = _config()["tool"]["setuptools"]
    listed = set(tool["packages"])
    found = set()
    for prefix, folder in tool["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            found.add(".".join((prefix, *parts)))
    missing = found - listed
    assert not missing, f"pyproject.toml's packages lack {sorted(missing)}"


def test_the_version_has_one_definition():
    config = _config()
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "aot.version.__version__"}
    assert aot.__version__ == __version__
