"""Every test carries its tier (unit, integration or e2e), from the file's ``pytestmark`` or
its own decorator, so ``-m unit`` and friends select what they say (markers: pyproject)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parent
TIERS = {"unit", "integration", "e2e"}


def _tiers(node: ast.AST | None) -> set[str]:
    """Tier names in a marker expression: ``pytest.mark.unit``, a list of them, calls too."""
    found = set()
    for sub in ast.walk(node) if node is not None else []:
        if isinstance(sub, ast.Attribute) and sub.attr in TIERS:
            found.add(sub.attr)
    return found


def untiered(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module |= _tiers(node.value)
    if module:
        return []
    missing = []
    for node in tree.body:
        scopes = [(node, set())]
        if isinstance(node, ast.ClassDef):
            marks = set().union(*(_tiers(d) for d in node.decorator_list))
            scopes = [(n, marks) for n in node.body]
        for fn, inherited in scopes:
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            own = set().union(*(_tiers(d) for d in fn.decorator_list))
            if fn.name.startswith("test") and not (inherited | own):
                missing.append(f"{path.relative_to(TESTS)}::{fn.name}")
    return missing


def test_every_test_has_a_tier() -> None:
    missing = [m for p in sorted(TESTS.rglob("test_*.py")) for m in untiered(p)]
    assert not missing, "tests without a tier marker: " + ", ".join(missing)
