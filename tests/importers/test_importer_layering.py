"""The importers' layering: no import cycles among their modules (deferred imports inside
functions count too), and no pass run by an importer (the pipeline owns the passes)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paths_util import ROOT

IMPORTERS = ROOT / "importers"
PATHS = sorted(IMPORTERS.rglob("*.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(IMPORTERS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["aot", "importers", *parts])


def _imported(path: Path) -> set[str]:
    """Absolute names `path` imports anywhere in its body: `from .context import Ctx` gives
    aot.importers.onnx.context and aot.importers.onnx.context.Ctx (one of them a module)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[:len(parts) - node.level + 1] if node.level else []
            origin = ".".join(base + ([node.module] if node.module else []))
            found.add(origin)
            found.update(f"{origin}.{alias.name}" for alias in node.names)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """Importer module -> the importer modules it imports, less its own parent packages
    (a package is imported before its modules run: not a cycle)."""
    modules = {_module_name(p) for p in PATHS}
    edges = {}
    for path in PATHS:
        name = _module_name(path)
        edges[name] = {t for t in _imported(path) & modules if t != name and not name.startswith(t + ".")}
    return edges


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A path start -> ... -> start, if there is one."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph[node]):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_the_module_graph_is_read(graph):
    assert "aot.importers.onnx.ops_index" in graph["aot.importers.onnx.ops_shape"]
    assert "aot.importers.onnx.ops_control" in graph["aot.importers.onnx.lower"]  # from . import ops_control
    assert "aot.importers.onnx.loader" in graph["aot.importers.onnx.context"]
    assert "aot.importers.onnx" not in graph["aot.importers.onnx.lower"]  # its package: not an edge
    assert _cycle_through({"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a") == ["a", "b", "c", "a"]


@pytest.mark.parametrize("module", sorted(_module_name(p) for p in PATHS))
def test_no_import_cycle(graph, module):
    cycle = _cycle_through(graph, module)
    assert cycle is None, " -> ".join(cycle)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: str(p.relative_to(IMPORTERS)))
def test_importers_run_no_pass(path):
    assert not sorted(n for n in _imported(path) if n.startswith(("aot.rewrite", "aot.planning")))
