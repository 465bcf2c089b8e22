"""No import cycles between the project's modules, function-level imports included.

A cycle hidden in a function (``swarm.calibrate`` calling ``swarm.develop.main``, which
imported ``swarm.calibrate`` back) works until someone moves an import to the top; this
walks the AST of every module, so such a cycle fails here first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("strategies", "backtest", "gate", "swarm", "experiments", "altdata")
# Cycles that exist in modules other work owns, listed so that no new one can join them
# unnoticed; each entry must be removed when its cycle is broken (the test says so).
KNOWN_CYCLES: list[list[str]] = []


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imported(node: ast.AST, module: str, is_pkg: bool) -> list[str]:
    """Fully qualified names one import statement asks for (modules or module.attribute)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_pkg else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{a.name}" for a in node.names] + [base]


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _imported(node, module, is_pkg)
            for name in names:
                # The longest project module the name starts with: `from a.b import c` is
                # a.b.c when c is a module, else a.b.
                target = name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                # A package's own submodules are not a cycle with their package's __init__.
                if target and target != module and not module.startswith(target + "."):
                    graph[module].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_walker_sees_function_level_imports_and_cycles() -> None:
    src = "def f():\n    from swarm.develop import main\n"
    node = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom))
    assert "swarm.develop" in _imported(node, "swarm.calibrate", False)
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    new = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not new, "import cycles: " + "; ".join(" <-> ".join(c) for c in new)
    gone = [c for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"broken cycles still listed in KNOWN_CYCLES, remove them: {gone}"
