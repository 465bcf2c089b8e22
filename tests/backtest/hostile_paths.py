"""The pool's walk-forward path as the hostile tests feed it: one job per fold, a strategy's
jobs submitted together (so the pool batches them into one sandboxed child)."""

from __future__ import annotations

import pandas as pd

from backtest.contracts import BacktestJob, Fold


def walk_forward_jobs(
    code: str,
    bars: pd.DataFrame,
    folds: list[Fold],
    *,
    variant_id: str = "hostile",
    symbol: str = "AAPL",
    timeout_s: float = 20.0,
) -> list[BacktestJob]:
    """One job per fold of ``code`` on ``bars``, ids ``f<fold>``."""
    return [
        BacktestJob(
            job_id=f"f{f.index}",
            variant_id=variant_id,
            code=code,
            symbol=symbol,
            bars=bars,
            fold=f,
            timeout_s=timeout_s,
        )
        for f in folds
    ]
