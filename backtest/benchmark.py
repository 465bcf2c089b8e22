"""The benchmark a strategy must beat, on the same windows and with the same entry cost.

Three kinds (``--benchmark``):

* ``buy-and-hold`` (default): the equal-weight buy & hold of the run's universe, each
  symbol held over the window and the symbols averaged per date, exactly as the gate
  averages a variant's per-symbol results, so an always-long variant has alpha ~0 and
  beta ~1;
* a symbol (``SPY``, ``QQQ``...): buy & hold of that series, loaded by the same source;
* ``cash``: zero returns, the absolute test (for absolute-return or market-neutral work).

A benchmark is bought once per window (each walk-forward fold, the holdout), at the
close before the window opens, and pays one entry of the run's costs (commission +
slippage) on its first day, as a strategy entering then would. Returns are keyed as the
strategies' return series are (``backtest.period_keys``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date

import pandas as pd

from backtest.contracts import CostModel, Fold, Metrics
from backtest.metrics import compute_metrics, equity_from_returns
from backtest.period_keys import index_keys

BUY_AND_HOLD = "buy-and-hold"
CASH = "cash"


def benchmark_kind(name: str) -> str:
    """``buy-and-hold``, ``cash`` or ``symbol``."""
    return name if name in (BUY_AND_HOLD, CASH) else "symbol"


def normalise_name(text: str) -> str:
    """What ``--benchmark`` means: the two keywords in any case, else an upper-case symbol."""
    t = text.strip()
    low = t.lower().replace("_", "-")
    if low in ("buy-and-hold", "buyandhold", "buy-hold", "bh", "universe"):
        return BUY_AND_HOLD
    if low in ("cash", "none", "zero", "absolute"):
        return CASH
    return t.upper()


def entry_cost(costs: CostModel) -> float:
    """One entry's cost as a fraction of notional (commission + slippage, one side)."""
    return (costs.commission_pct + costs.slippage_pct) / 100.0


def _held_returns(bars: pd.DataFrame, start: date, end: date, cost: float) -> pd.Series:
    rets = bars["close"].pct_change().loc[pd.Timestamp(start) : _end_ts(end)].dropna()
    if len(rets) and cost:
        rets.iloc[0] = (1.0 + rets.iloc[0]) * (1.0 - cost) - 1.0
    return rets


def _equal_weight(
    bars_by_symbol: Mapping[str, pd.DataFrame], start: date, end: date, cost: float
) -> pd.Series:
    """Each symbol held over [start, end] (one entry at ``cost``), averaged per bar over the
    symbols that have one: the gate's own aggregation of per-symbol results."""
    per_symbol = [_held_returns(b, start, end, cost).rename(s) for s, b in bars_by_symbol.items()]
    per_symbol = [r for r in per_symbol if len(r)]
    if not per_symbol:
        return pd.Series(dtype=float)
    return pd.concat(per_symbol, axis=1).mean(axis=1, skipna=True).sort_index()


def _end_ts(end: date) -> pd.Timestamp:
    return pd.Timestamp(end) + pd.Timedelta(days=1) - pd.Timedelta(microseconds=1)


def _keyed(rets: pd.Series) -> pd.Series:
    """Keyed like the strategies' returns: ISO date, or timestamp for intraday bars."""
    return pd.Series(rets.to_numpy(), index=index_keys(rets.index)).sort_index()


@dataclass(frozen=True)
class Benchmark:
    """What a run's strategies are compared with. ``held`` is what the benchmark holds
    (the universe's bars, the symbol's, or nothing for cash); ``calendar`` gives cash
    its dates (the universe's)."""

    name: str
    held: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    calendar: pd.DatetimeIndex = field(default_factory=lambda: pd.DatetimeIndex([]))

    @property
    def kind(self) -> str:
        """The benchmark's kind (``benchmark_kind`` of its name)."""
        return benchmark_kind(self.name)

    @property
    def is_cash(self) -> bool:
        """Whether the benchmark is cash (a zero return)."""
        return self.name == CASH

    def window_returns(self, start: date, end: date, *, costs: CostModel) -> pd.Series:
        """Returns per period key over [start, end], bought at the close before ``start``."""
        if self.is_cash:
            days = self.calendar[(self.calendar >= pd.Timestamp(start))]
            days = days[days <= _end_ts(end)]
            return _keyed(pd.Series(0.0, index=days))
        rets = _equal_weight(self.held, start, end, entry_cost(costs))
        return _keyed(rets) if len(rets) else rets

    def fold_returns(self, folds: Iterable[Fold], *, costs: CostModel) -> pd.Series:
        """The in-sample windows end to end: one purchase (and one entry cost) per fold."""
        parts = [self.window_returns(f.start, f.end, costs=costs) for f in folds]
        parts = [p for p in parts if len(p)]
        if not parts:
            return pd.Series(dtype=float)
        out = pd.concat(parts)
        return out[~out.index.duplicated(keep="first")].sort_index()

    def describe(self) -> str:
        """The benchmark in words, for reports."""
        if self.is_cash:
            return "cash (zero return: the absolute test)"
        if self.name == BUY_AND_HOLD:
            return f"equal-weight buy & hold of {', '.join(self.held)}"
        return f"buy & hold of {self.name}"


def returns_metrics(rets: pd.Series, *, periods_per_year: int = 252) -> Metrics | None:
    """The one metrics function on a benchmark's returns (None when it has none)."""
    if rets.empty:
        return None
    return compute_metrics(
        equity_from_returns(rets.to_numpy()),
        bars_in_market=len(rets),
        periods_per_year=periods_per_year,
    )


def buy_and_hold_returns(
    bars_by_symbol: Mapping[str, pd.DataFrame], start: date, end: date
) -> pd.Series:
    """Equal-weight, daily-rebalanced close-to-close returns of the symbols in [start, end].

    The first day's return is measured from the previous close, as a strategy that
    bought the close before ``start`` would see it (no costs: a reference, not a trade).
    """
    return _equal_weight(bars_by_symbol, start, end, 0.0)


def buy_and_hold_metrics(
    bars_by_symbol: Mapping[str, pd.DataFrame],
    start: date,
    end: date,
    *,
    periods_per_year: int = 252,
) -> tuple[Metrics | None, pd.Series]:
    """The buy & hold returns over ``start``..``end`` and their metrics (None when too short)."""
    rets = buy_and_hold_returns(bars_by_symbol, start, end)
    return returns_metrics(rets, periods_per_year=periods_per_year), rets
