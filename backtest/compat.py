"""Make backtrader 1.9.78 work on Python 3.11+ and headless machines.

backtrader still references ``collections.Iterable`` & co (removed in 3.10) and
its plotting forces an interactive matplotlib backend. We patch at runtime and
never edit site-packages.
"""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import os
from types import ModuleType

_ABC_NAMES = ("Iterable", "Mapping", "MutableMapping", "Sequence", "Callable", "OrderedDict")
_patched = False


def patch_backtrader() -> None:
    """Idempotently alias the removed ``collections`` ABCs and select the Agg backend."""
    global _patched
    if _patched:
        return
    for name in _ABC_NAMES:
        if not hasattr(collections, name) and hasattr(collections.abc, name):
            setattr(collections, name, getattr(collections.abc, name))
    # Headless: choose Agg before anything (backtrader.plot included) imports pyplot.
    os.environ.setdefault("MPLBACKEND", "Agg")
    _force_agg()
    _patched = True


def _force_agg() -> None:
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
    except ImportError:  # plotting is optional for backtests
        pass


def import_backtrader() -> ModuleType:
    """Return the ``backtrader`` module, patched first.

    ``backtrader.plot`` calls ``matplotlib.use("TkAgg")`` at import time, so we
    import it here once and force Agg again right after: ``cerebro.plot()`` then
    works headless (save ``cerebro.plot(iplot=False)[0][0]``).
    """
    patch_backtrader()
    import backtrader

    with contextlib.suppress(ImportError):  # matplotlib missing: backtests still work
        import backtrader.plot  # noqa: F401
    _force_agg()
    return backtrader
