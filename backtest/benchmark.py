"""Buy-and-hold benchmark over the same window and symbols as a strategy, for comparison."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import pandas as pd

from backtest.contracts import Metrics
from backtest.metrics import compute_metrics, equity_from_returns


def buy_and_hold_returns(
    bars_by_symbol: Mapping[str, pd.DataFrame], start: date, end: date
) -> pd.Series:
    """Equal-weight, daily-rebalanced close-to-close returns of the symbols in [start, end].

    The first day's return is measured from the previous close, as a strategy that
    bought the close before ``start`` would see it (no costs: a benchmark, not a trade).
    """
    per_symbol = []
    for symbol, bars in bars_by_symbol.items():
        rets = bars["close"].pct_change()
        rets = rets.loc[pd.Timestamp(start) : pd.Timestamp(end)].dropna()
        per_symbol.append(rets.rename(symbol))
    if not per_symbol:
        return pd.Series(dtype=float)
    return pd.concat(per_symbol, axis=1).mean(axis=1, skipna=True).sort_index()


def buy_and_hold_metrics(
    bars_by_symbol: Mapping[str, pd.DataFrame],
    start: date,
    end: date,
    *,
    periods_per_year: int = 252,
) -> tuple[Metrics | None, pd.Series]:
    rets = buy_and_hold_returns(bars_by_symbol, start, end)
    if rets.empty:
        return None, rets
    metrics = compute_metrics(
        equity_from_returns(rets.to_numpy()),
        bars_in_market=len(rets),
        periods_per_year=periods_per_year,
    )
    return metrics, rets
