"""The shape of ``backtest/``: four wings, each a package whose ``__init__`` is its public face.

The wings (``backtest.data``, ``backtest.sandbox``, ``backtest.executors``,
``backtest.screen``) were once prefixes in one flat folder that imported each other's private
helpers, so nothing said which names another wing could rely on. This walks the AST of every
module and holds the line:

- nobody imports a private name (``_x``) from a wing's module, and no module of ``backtest``
  imports a private name from another module (a helper another module needs is public);
- package code outside a wing imports only the wing's face (``from backtest.screen import
  Sweep``, not ``backtest.screen.sweep``), and only names in the face's ``__all__``;
- a wing's own modules import their siblings directly, never a name through their own face
  (its ``__init__`` may still be running), only a submodule (``from backtest.screen import
  blocks``);
- every name a face exports is bound in it.

Tests, benchmarks and scripts are exempt from the face rule only: they test or measure a
wing's parts (the indicator kernels, the pool's in-flight table), so they may import its
submodules, but never its private names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("strategies", "backtest", "gate", "swarm", "experiments", "altdata")
EXEMPT_FROM_FACES = ("tests", "benchmarks", "scripts")  # they test or measure the parts
WINGS = ("backtest.data", "backtest.sandbox", "backtest.executors", "backtest.screen")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _files() -> list[Path]:
    out = []
    for top in (*PACKAGES, *EXEMPT_FROM_FACES):
        out += sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else []
    return out


def _wing(module: str) -> str | None:
    """The wing a dotted module name belongs to (the face itself included), if any."""
    return next((w for w in WINGS if module == w or module.startswith(w + ".")), None)


def _face_exports(wing: str) -> set[str]:
    tree = ast.parse((ROOT / wing.replace(".", "/") / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def _submodules(wing: str) -> set[str]:
    folder = ROOT / wing.replace(".", "/")
    return {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}


def _absolute(node: ast.ImportFrom, module: str, is_pkg: bool) -> str:
    """The module a ``from ... import`` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    anchor = module.split(".") if is_pkg else module.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def violations(
    source: str, module: str, *, is_pkg: bool = False, exempt: bool = False
) -> list[str]:
    """What one module's imports break, as ``module: import`` lines (empty when it is clean).

    ``module`` is the importer's dotted name; ``exempt`` lifts the face rule (tests,
    benchmarks, scripts)."""
    own_wing = _wing(module)
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                wing = _wing(alias.name)
                if wing and wing != own_wing and alias.name != wing and not exempt:
                    out.append(f"{module}: import {alias.name} (import {wing} instead)")
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        source_module = _absolute(node, module, is_pkg)
        names = [a.name for a in node.names]
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        wing = _wing(source_module)
        line = f"{module}: from {source_module} import {', '.join(names)}"
        if private and (
            wing or (module.startswith("backtest.") and source_module.startswith("backtest"))
        ):
            out.append(f"{line} (private: {', '.join(private)}; make it public in its module)")
        if wing is None:
            continue
        if wing == own_wing:
            if source_module == wing:  # a sibling through the face: only a submodule
                faced = [n for n in names if n not in _submodules(wing)]
                if faced:
                    out.append(f"{line} (inside {wing}, import the sibling module itself)")
            continue
        if exempt:
            continue
        if source_module != wing:
            out.append(f"{line} (outside {wing}, import from its face: from {wing} import ...)")
        else:
            hidden = [n for n in names if n not in _face_exports(wing)]
            if hidden:
                out.append(f"{line} (not in {wing}.__all__: {', '.join(hidden)})")
    return out


def test_the_checker_sees_each_kind_of_breach() -> None:
    assert violations("from backtest.screen.blocks import _x\n", "tests.t", exempt=True)
    assert violations("from backtest.screen.blocks import Unsupported\n", "swarm.nodes.x")
    assert violations("from backtest.screen import blocks\n", "gate.judge")  # a back door
    assert violations("import backtest.executors.pool\n", "gate.judge")
    assert violations("from backtest.engine import _compile\n", "backtest.sandbox.child")
    assert violations("from .result import _claim\n", "backtest.sandbox.process")
    assert violations("from backtest.sandbox import SandboxPolicy\n", "backtest.sandbox.child")
    assert not violations("from backtest.screen import Sweep\n", "swarm.nodes.strategy")
    assert not violations(
        "from backtest.screen.blocks import check_supported\n", "tests.t", exempt=True
    )
    assert not violations("from backtest.screen import blocks\n", "backtest.screen.screening")
    assert not violations("from backtest.sandbox import SandboxPolicy\n", "backtest.executors.pool")
    assert not violations("from backtest.lookahead import _failed_apart\n", "tests.t", exempt=True)


def test_the_wings_show_only_their_faces() -> None:
    found = []
    for path in _files():
        module = _module_name(path)
        exempt = path.relative_to(ROOT).parts[0] in EXEMPT_FROM_FACES
        found += violations(
            path.read_text(encoding="utf-8"),
            module,
            is_pkg=path.name == "__init__.py",
            exempt=exempt,
        )
    assert not found, "imports that reach past a wing's face:\n" + "\n".join(found)


@pytest.mark.parametrize("wing", WINGS)
def test_each_face_binds_what_it_exports(wing: str) -> None:
    tree = ast.parse((ROOT / wing.replace(".", "/") / "__init__.py").read_text())
    bound = {
        a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names
    }
    exports = _face_exports(wing)
    assert exports, f"{wing}/__init__.py has no __all__"
    assert exports <= bound, f"{wing}.__all__ names nothing bound: {sorted(exports - bound)}"
