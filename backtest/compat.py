"""Make backtrader 1.9.78 work on Python 3.11+ and headless machines.

backtrader still references ``collections.Iterable`` & co (removed in 3.10) and
its plotting forces an interactive matplotlib backend. We patch at runtime and
never edit site-packages.
"""

from __future__ import annotations

import collections
import collections.abc
import os
import sys
from types import ModuleType
from typing import Any

_ABC_NAMES = ("Iterable", "Mapping", "MutableMapping", "Sequence", "Callable", "OrderedDict")
_patched = False


def patch_backtrader() -> None:
    """Idempotently alias the removed ``collections`` ABCs and make plotting headless.

    Matplotlib is not imported here: backtests never plot, and a worker without it is
    ~100 MB smaller, which makes every sandbox fork cheaper.
    """
    global _patched
    if _patched:
        return
    for name in _ABC_NAMES:
        if not hasattr(collections, name) and hasattr(collections.abc, name):
            setattr(collections, name, getattr(collections.abc, name))
    # Headless: any later pyplot import (backtrader.plot included) starts on Agg.
    os.environ.setdefault("MPLBACKEND", "Agg")
    if "matplotlib" in sys.modules:
        _force_agg()
    _patched = True


def _force_agg() -> None:
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
    except ImportError:  # plotting is optional for backtests
        pass


def import_backtrader() -> Any:  # Any: its classes are subclassed (a module type would not be)
    """Return the ``backtrader`` module, patched first (``backtrader.plot`` not imported)."""
    patch_backtrader()
    import backtrader

    return backtrader


def enable_plotting() -> ModuleType:
    """Import ``backtrader.plot`` for ``cerebro.plot()`` on a headless machine.

    ``backtrader.plot`` calls ``matplotlib.use("TkAgg")`` at import time, so force Agg
    again right after; then save ``cerebro.plot(iplot=False)[0][0]``.
    """
    bt = import_backtrader()
    import backtrader.plot  # noqa: F401

    _force_agg()
    return bt
