"""The package's import structure (docs/architecture.md), checked by reading the source (AST), not by importing.

* no import cycle among the modules of ``model/`` (``flashschnet``) and ``plugin/`` (``flashschnet.openmm``),
  counting every import, also those inside functions (a late import still ties two modules together), except
  those under ``if TYPE_CHECKING:`` (never run);
* ``model/`` never imports openmm (or anything of ``flashschnet.openmm``);
* ``flashschnet.names`` (the names the command-line tools offer) imports nothing heavy.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

from tests.conftest import ROOT

PACKAGES = {"model": "flashschnet", "plugin": "flashschnet.openmm", "scripts": "flashschnet.scripts"}


def _module_names() -> Dict[str, Path]:
    """Module name -> file, for every .py file of the source folders (a package is its ``__init__``)."""
    found = {}
    for folder, pkg in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([pkg] + parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> List[ast.AST]:
    """Every Import/ImportFrom node, skipping ``if TYPE_CHECKING:`` bodies."""
    out = []

    def visit(node):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def import_graph() -> Dict[str, Set[str]]:
    """module -> the modules of the project it imports (``from pkg import name`` counts as importing
    ``pkg.name`` when that is a module, else ``pkg``)."""
    modules = _module_names()
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        base = name if is_pkg else name.rsplit(".", 1)[0]
        edges: Set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    anchor = base.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    mod = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
            for t in targets:
                # the nearest project module named by the import (import a.b.c -> a.b.c, or its package)
                while t and t not in modules:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t != name:
                    edges.add(t)
        graph[name] = edges
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One import cycle (its modules, the first repeated at the end), or []."""
    state: Dict[str, int] = {}
    stack: List[str] = []

    def dfs(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = dfs(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return []

    for n in sorted(graph):
        if n not in state:
            found = dfs(n)
            if found:
                return found
    return []


def test_no_import_cycle_in_model_or_plugin():
    graph = {k: v for k, v in import_graph().items() if not k.startswith("flashschnet.scripts")}
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


#: the two façades (``flashschnet``, ``flashschnet.openmm``: names re-exported for users), left out of the package
#: graph: every package is below them
FACADES = ("flashschnet", "flashschnet.openmm")


def package_of(module: str) -> str:
    """The unit of the package graph a module belongs to: ``flashschnet.X`` for ``model/`` and
    ``flashschnet.openmm.X`` for ``plugin/`` (X a subpackage or a top-level module)."""
    parts = module.split(".")
    return ".".join(parts[:3] if module.startswith("flashschnet.openmm.") else parts[:2])


def package_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """The import graph between packages (:func:`package_of`), the façades and the command-line scripts left out."""
    out: Dict[str, Set[str]] = {}
    for name, edges in graph.items():
        if name in FACADES or name.startswith("flashschnet.scripts"):
            continue
        unit = package_of(name)
        out.setdefault(unit, set()).update(package_of(e) for e in edges if e not in FACADES
                                           and package_of(e) != unit)
    return out


def test_no_import_cycle_between_packages():
    """One direction between packages too (e.g. ``fused`` imports ``nn``, never the reverse; ``config`` is a leaf
    of ``nn``; the readers of run directories import ``ensemble``, never the reverse)."""
    cycle = find_cycle(package_graph(import_graph()))
    assert not cycle, "import cycle between packages: " + " -> ".join(cycle)
    assert package_graph({"flashschnet.nn.schnet": {"flashschnet.fused.op"}, "flashschnet.fused.op": {
        "flashschnet.nn.layout"}}) == {"flashschnet.nn": {"flashschnet.fused"}, "flashschnet.fused": {"flashschnet.nn"}}


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_late_and_relative_imports(tmp_path):
    # the scan reads imports inside functions and resolves relative ones: a known late import is an edge
    graph = import_graph()
    assert "flashschnet.fused.triton_engine" in graph["flashschnet.fused.engine"]  # imported inside a function
    assert "flashschnet.errors" in graph["flashschnet.backends"]                    # from .errors import ...


def test_model_never_imports_openmm():
    offenders = []
    for name, path in _module_names().items():
        if not name.startswith("flashschnet.") or name.startswith(("flashschnet.openmm", "flashschnet.scripts")):
            continue
        for node in _imports(ast.parse(path.read_text(), str(path))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if node.__class__ is ast.ImportFrom and node.level:
                depth = len(name.split(".")) - (0 if path.name == "__init__.py" else 1) - (node.level - 1)
                mods = [".".join(name.split(".")[:depth] + ([node.module] if node.module else []))]
            for m in mods:
                if m.split(".")[0] in ("openmm", "simtk", "openmmtorch", "openmmml") or m.startswith("flashschnet.openmm"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {m}")
    assert not offenders, "; ".join(offenders)


def test_names_module_imports_nothing_heavy():
    tree = ast.parse((ROOT / "model" / "names.py").read_text())
    assert not _imports(tree), "flashschnet.names must stay plain data (the CLIs build their parsers from it)"


#: a module's size limit (lines): over it, a file usually does two jobs
MAX_MODULE_LINES = 450


def test_no_module_is_over_the_size_limit():
    too_long = [f"{path.relative_to(ROOT)}: {n} lines" for path in _module_names().values()
                for n in [len(path.read_text().splitlines())] if n > MAX_MODULE_LINES]
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them by job): " + "; ".join(too_long)


def tools_imports_by_path(source: str) -> List[str]:
    """What in a test file's ``source`` imports a ``tools/`` script by its path: ``sys.path`` made to hold a tools
    folder, ``spec_from_file_location`` / ``SourceFileLoader`` / ``runpy.run_path`` on one (named in the call or
    by a variable assigned a tools path, ``SCRIPT = ROOT / "tools" / "x.py"``), or ``helpers.tools.tool(...)``.
    Running a tool as a program (``subprocess``) is fine: that is how users run it."""
    found = []
    tree = ast.parse(source)
    tool_paths = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and "tools" in ast.unparse(node.value)
                  for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            text = ast.unparse(node)
            named = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & tool_paths
            if name in ("spec_from_file_location", "SourceFileLoader", "run_path") and ("tools" in text or named):
                found.append(f"line {node.lineno}: {text[:80]}")
            elif name in ("insert", "append") and "sys.path" in ast.unparse(f) and "tools" in text.lower():
                found.append(f"line {node.lineno}: {text[:80]}")
            elif name == "tool" and isinstance(f, ast.Name):
                found.append(f"line {node.lineno}: {text[:80]}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("helpers.tools", "tests.helpers.tools"):
            found.append(f"line {node.lineno}: from {node.module} import ...")
    return found


def test_tests_do_not_import_tools_by_path():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "test_architecture.py":
            continue
        offenders += [f"{path.relative_to(ROOT)} {hit}" for hit in tools_imports_by_path(path.read_text())]
    assert not offenders, ("tests import tools/ scripts by path (move what they need into the package or "
                           "tests/helpers, or run the tool as a program): " + "; ".join(offenders))


def test_the_tools_import_finder_finds_them():
    assert tools_imports_by_path("import importlib.util\nspec = importlib.util.spec_from_file_location("
                                 "'m', ROOT / 'tools' / 'x.py')\n")
    assert tools_imports_by_path("import sys\nsys.path.insert(0, str(ROOT / 'tools'))\n")
    assert tools_imports_by_path("from helpers.tools import tool\nm = tool('x')\n")
    assert tools_imports_by_path("SCRIPT = ROOT / 'tools' / 'x.py'\n"
                                 "spec = importlib.util.spec_from_file_location('x', SCRIPT)\n")
    assert not tools_imports_by_path("import subprocess\nsubprocess.run(['python', 'tools/x.py'])\n")


#: where a source folder's tests live (tests mirror the tree)
TEST_FOLDERS = {"model": "tests/model", "plugin": "tests/openmm", "scripts": "tests/scripts"}


def unmirrored_modules() -> List[str]:
    """Source modules (``model/x/y.py`` ...) with a function or class but no ``tests/<mirror>/x/test_y.py``."""
    missing = []
    for folder, tests in TEST_FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder)
            if path.name == "__init__.py" or (ROOT / tests / rel.parent / f"test_{path.name}").exists():
                continue
            if any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.parse(path.read_text()).body):
                missing.append(str(path.relative_to(ROOT)))
    return missing


def test_every_module_has_a_mirrored_test_module():
    missing = unmirrored_modules()
    assert not missing, ("modules without a mirrored test module (tests/model|openmm|scripts/<same path>/test_<name>.py): "
                         + ", ".join(missing))

