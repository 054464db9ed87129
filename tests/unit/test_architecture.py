"""The package's structure, read from its own source (ast): no import cycle, layers that import
only downward, no function over 80 lines, no citation of a file outside the repository, and no
``global`` statement in the capture layer. Pure: imports nothing it checks."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
# folder -> the package it is installed as (pyproject.toml's package-dir mapping)
_PACKAGES = {"rnndoctor": "rnndoctor", "rules": "rnndoctor.rules", "reports": "rnndoctor.reports"}
_MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in _PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the file (lazy ones too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                if path.name != "__init__.py":
                    parts = parts[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        for target in _imports(name, path):
            # an import of a package's own __init__ from inside it re-exports: not a cycle
            if target in MODULES and target != name and not name.startswith(target + "."):
                graph.add_edge(name, target)
    return graph


def test_there_are_modules_to_check():
    assert "rnndoctor.engine" in MODULES and "rnndoctor.rules" in MODULES
    assert any(m.startswith("rnndoctor.capture.") for m in MODULES)


def test_no_import_cycle():
    cycles = [sorted(c) for c in nx.strongly_connected_components(_graph()) if len(c) > 1]
    assert cycles == []


# Each layer may not import these (DESIGN: capture -> Facts -> rules -> reports; the CLI on top).
_FORBIDDEN = {
    "rnndoctor.capture": ("rnndoctor.rules", "rnndoctor.reports", "rnndoctor.cli"),
    "rnndoctor.rules": ("rnndoctor.capture", "rnndoctor.reports", "rnndoctor.cli"),
    "rnndoctor.reports": ("rnndoctor.capture", "rnndoctor.cli"),
    "rnndoctor.engine": ("rnndoctor.capture", "rnndoctor.reports", "rnndoctor.cli"),
    "rnndoctor.facts": ("rnndoctor.capture", "rnndoctor.rules", "rnndoctor.reports"),
    "rnndoctor.stats": ("rnndoctor.capture", "rnndoctor.rules", "rnndoctor.reports"),
    # --verify: the CLI passes in its runner, so verify never imports the CLI
    "rnndoctor.verify": (
        "rnndoctor.capture",
        "rnndoctor.rules",
        "rnndoctor.reports",
        "rnndoctor.cli",
    ),
}
# Only the capture layer (and the in-process entry points that call it) import TensorFlow.
_TF_ALLOWED = ("rnndoctor.capture", "rnndoctor.api", "rnndoctor.keras")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layers_import_downward_only(name: str):
    imports = _imports(name, MODULES[name])
    for layer, forbidden in _FORBIDDEN.items():
        if name == layer or name.startswith(layer + "."):
            bad = sorted(i for i in imports if i.startswith(forbidden))
            assert bad == [], f"{name} imports {bad}"
    if not name.startswith(_TF_ALLOWED):
        heavy = sorted(i for i in imports if i.split(".")[0] in ("tensorflow", "keras", "tf_keras"))
        assert heavy == [], f"{name} imports {heavy}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_functions_are_short(name: str):
    tree = ast.parse(MODULES[name].read_text())
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > _MAX_FUNCTION_LINES
    ]
    assert long == []


def test_no_citation_outside_the_repository():
    files = [*MODULES.values(), ROOT / "README.md", *sorted((ROOT / "tests").rglob("*.py"))]
    outside = ("../shared", "shared/RULES.md", "shared/DESIGN.md", "shared/STYLE.md")
    citing = [
        str(p.relative_to(ROOT))
        for p in files
        if p != Path(__file__).resolve() and any(o in p.read_text() for o in outside)
    ]
    assert citing == []


def test_no_global_statement_in_the_capture_layer():
    found = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        if name.startswith("rnndoctor.capture")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Global)
    ]
    assert found == []
