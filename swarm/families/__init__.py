"""The lab's strategy families, each a plugin behind one registry (``strategies.family_api``).

``registry()`` holds, in proposal order: the decision pipeline (``decision.py``), the portfolio
families (``portfolio.py``), any other family module in this folder (discovered, alphabetical),
then the block families (``blocks.py``), which take the slots the others leave.

A new family is one new module in this folder: a class with the ``FamilyPlugin`` attributes and
methods, registered at import with ``REGISTRY.register(MyFamily())``. Nothing else changes: the
strategy node, the backtest fan-out, the holdout and ``--families`` ask the registry.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager

from strategies.family_api import FamilyPlugin, FamilyRegistry

REGISTRY = FamilyRegistry()
BUILT_IN = ("decision", "portfolio", "blocks")
_loaded = False


def registry() -> FamilyRegistry:
    """The registry with the built-in plugins and every family module of this folder."""
    global _loaded
    if not _loaded:
        _loaded = True
        for name in BUILT_IN:
            importlib.import_module(f"{__name__}.{name}")
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if info.name not in BUILT_IN and not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
    return REGISTRY


@contextmanager
def registered(plugin: FamilyPlugin) -> Iterator[FamilyPlugin]:
    """``plugin`` registered for the block's duration (tests; a notebook's experiment)."""
    reg = registry()
    reg.register(plugin)
    try:
        yield plugin
    finally:
        reg.unregister(plugin.name)
