"""The compiler's layering: no import cycle among the modules of aot/ and the importers
(installed as aot.importers), deferred imports inside functions included, and the layers
of the middle: the IR at the bottom, graph rewrites above it, planning above that (a rewrite
never reads a plan, planning never rewrites)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from paths_util import ROOT

PACKAGES = {"aot": ROOT / "aot", "aot.importers": ROOT / "importers"}
PATHS = {f"{prefix}/{p.relative_to(folder)}": p for prefix, folder in PACKAGES.items() for p in sorted(folder.rglob("*.py"))}


def _module_name(key: str) -> str:
    prefix, _, rest = key.partition("/")
    parts = [prefix, *Path(rest).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(key): path for key, path in PATHS.items()}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, in functions too, less those under `if TYPE_CHECKING:` (never run)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))
    return found


def _imports(name: str, path: Path) -> set[str]:
    """The aot modules `name` imports. `from aot.ir import ops` is the module aot.ir.ops;
    `from aot import Session` is the package aot itself (its __init__ runs for the name);
    the parents a module's import runs first are not edges (they run before the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        parts = package.split(".")
        base = parts[:len(parts) - node.level + 1] if node.level else []
        origin = ".".join(base + ([node.module] if node.module else []))
        names = [f"{origin}.{alias.name}" for alias in node.names]
        found.update(n for n in names if n in MODULES)
        if any(n not in MODULES for n in names):
            found.add(origin)
    return {m for m in found if m in MODULES and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in MODULES.items()}


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
    assert "aot.ir.ops" in graph["aot.ir.builder"]
    assert "aot.ir.types" in graph["aot.ir.ops.registry"]
    assert "aot.ir" not in graph["aot.ir.ops.registry"]  # a parent package: not an edge
    assert "aot.importers.onnx" in graph["aot.driver"]  # imported inside a function
    assert "aot.importers.onnx.ops_control" in graph["aot.importers.onnx.lower"]  # from . import ops_control
    assert "aot.ir.graph" not in graph["aot.ir.printer"]  # under `if TYPE_CHECKING:`
    assert _cycle_through({"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a") == ["a", "b", "c", "a"]


def test_a_name_from_a_package_is_an_edge_to_it(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from aot import compile\n    from aot.ir import ops\n")
    assert _imports("aot.probe", probe) == {"aot", "aot.ir.ops"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_cycle(graph, module):
    cycle = _cycle_through(graph, module)
    assert cycle is None, " -> ".join(cycle)


# layer -> the aot modules (and packages) it may import besides its own; aot.errors and
# aot.arith import nothing of aot
LAYERS = {
    "aot.ir": ("aot.errors", "aot.arith"),
    "aot.rewrite": ("aot.errors", "aot.arith", "aot.ir"),
    "aot.planning": ("aot.errors", "aot.arith", "aot.ir", "aot.plan"),
}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if any(_within(m, layer) for layer in LAYERS)))
def test_layers_import_only_below(graph, module):
    layer = next(layer for layer in LAYERS if _within(module, layer))
    allowed = (layer, *LAYERS[layer])
    outside = sorted(m for m in graph[module] if not any(_within(m, a) for a in allowed))
    assert not outside, f"{module} imports {outside}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, "aot.importers")))
def test_importers_run_no_pass(graph, module):
    # the pipeline owns the passes, DCE of the imported graph included
    assert not sorted(m for m in graph[module] if _within(m, "aot.rewrite") or _within(m, "aot.planning"))


# the back ends: what both emit from (aot/codegen/*.py: the elemental emitter, the math
# library, loops, the work item, epilogue and operand-view analysis) imports neither; the
# NVPTX back end imports the CPU one only to run its kernels on the host (emulate.py, host_library.py)
SHARED_CODEGEN = sorted(m for m in MODULES if m.startswith("aot.codegen.") and m.count(".") == 2
                        and m not in ("aot.codegen.cpu", "aot.codegen.nvptx"))
BACK_END_USES = {"aot.codegen.nvptx.emulate": ("aot.codegen.cpu.target",),
                 # the emulated kernels as a shared object for the test stand-in CUDA driver
                 "aot.codegen.nvptx.host_library": ("aot.codegen.cpu.target",)}


@pytest.mark.parametrize("module", SHARED_CODEGEN)
def test_shared_codegen_imports_no_back_end(graph, module):
    assert not sorted(m for m in graph[module] if _within(m, "aot.codegen.cpu") or _within(m, "aot.codegen.nvptx"))


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, "aot.codegen.nvptx")))
def test_the_gpu_back_end_uses_the_cpu_one_only_to_emulate(graph, module):
    used = sorted(m for m in graph[module] if _within(m, "aot.codegen.cpu"))
    assert used == sorted(BACK_END_USES.get(module, ())), f"{module} imports {used}"
