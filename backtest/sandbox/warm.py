"""The warm worker: import everything a job needs once, so each job's fork is cheap.

A fresh interpreter per job costs ~1-2 s of imports, more than most backtests. A worker (a
pool process, a Ray worker, or the CLI itself) imports backtrader/pandas once here; every job
then runs in a ``fork()`` of it (``backtest.sandbox``).
"""

from __future__ import annotations

import gc

from backtest.sandbox.kernel_guards import libc
from backtest.sandbox.python_guards import read_roots

_warm = False


def warm_worker() -> None:
    """Import everything a job needs once, then freeze the heap for cheap forks.

    ``gc.freeze`` moves the imported objects out of the collector's reach, so the
    child's garbage collections don't touch (and copy) the parent's pages.
    """
    global _warm
    if _warm:
        return
    import backtest.engine  # noqa: F401  (backtrader, pandas, metrics)
    import backtest.trace  # noqa: F401
    import strategies.validate  # noqa: F401

    libc()
    read_roots()  # cached: the child may no longer read the folders it lists
    warm_up_run()
    gc.collect()
    gc.freeze()
    _warm = True


_WARMUP_CODE = """
import backtrader as bt


class Warm(bt.Strategy):
    params = dict(n=5)

    def __init__(self):
        self.sma = bt.ind.SMA(self.data.close, period=self.p.n)

    def next(self):
        if not self.position and self.data.close[0] > self.sma[0]:
            self.buy()
        elif self.position and self.data.close[0] < self.sma[0]:
            self.close()
"""


def warm_up_run() -> None:
    """One tiny in-process backtest of our own code: backtrader's and pandas' lazy
    initialisation then happens once here instead of in every forked child."""
    import numpy as np
    import pandas as pd

    from backtest.engine import run_code_on_bars

    idx = pd.bdate_range("2020-01-01", periods=60)
    close = 100 + np.cumsum(np.sin(np.arange(60) / 3.0))
    bars = pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1e6},
        index=idx,
    )
    run_code_on_bars(_WARMUP_CODE, bars, timeout_s=0)
