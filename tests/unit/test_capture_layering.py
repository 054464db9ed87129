"""The capture package's structure, read from its modules' own source (no import, no TF)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CAPTURE = Path(__file__).resolve().parents[2] / "rnndoctor" / "capture"
# What capture may import from the rest of rnndoctor (its package docstring says why).
# rnndoctor.paired (the paired timer) and rnndoctor.machine (the load sampler) are pure and
# meant for the capture (DESIGN.md, Trust: every probe's comparison, each phase's load).
ALLOWED = {
    "rnndoctor",
    "rnndoctor.facts",
    "rnndoctor.stats",
    "rnndoctor.options",
    "rnndoctor.paired",
    "rnndoctor.machine",
    "rnndoctor.cluster",  # pure: the --workers environment the launcher and the capture share
    "rnndoctor.dispatch",  # pure: RD403's share arithmetic, for the probe's second stage
}
# The modules below every hook: they import no hook module, so every hook may import them.
# heap (the process's own memory: resident size, malloc_trim) imports no capture module either.
BASE = {
    "session": {"sites", "budget", "step_window", "heap", "ending"},
    "step_window": {"heap"},
    "budget": set(),
    "heap": set(),
    "ending": set(),  # how the child ends: imports no capture module
}


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(CAPTURE.glob("*.py"))}


def _imports(tree: ast.Module) -> set[str]:
    """Every module a file imports, at any level (``TYPE_CHECKING`` and function bodies too)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module in ("rnndoctor", "rnndoctor.capture"):  # from PACKAGE import module
                names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _capture_deps(tree: ast.Module, modules: set[str]) -> set[str]:
    prefix = "rnndoctor.capture."
    return {n[len(prefix) :] for n in _imports(tree) if n.startswith(prefix)} & modules


def test_capture_imports_only_facts_stats_and_options_from_rnndoctor():
    for name, tree in _modules().items():
        outside = {
            n
            for n in _imports(tree)
            if n.startswith("rnndoctor") and not n.startswith("rnndoctor.capture")
        }
        assert outside <= ALLOWED | {"rnndoctor.__version__"}, (name, outside - ALLOWED)


def test_no_import_cycle_in_capture():
    modules = _modules()
    graph = {name: _capture_deps(tree, set(modules)) - {name} for name, tree in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(name) :], name]))
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_session_and_step_window_sit_below_the_hooks():
    modules = _modules()
    for name, allowed in BASE.items():
        assert _capture_deps(modules[name], set(modules)) - {name} <= allowed, name


def test_no_module_global_state_and_short_functions():
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            assert not isinstance(node, ast.Global), f"{name}.py:{node.lineno} global"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= 80, f"{name}.py:{node.lineno} {node.name} is {length} lines"
