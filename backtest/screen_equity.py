"""What every screened run shares: the books' equity and its Sharpe ratio, as ``compute_metrics``
computes them, for the single-symbol screen (``backtest.screen``) and the portfolio one
(``backtest.screen_portfolio``)."""

from __future__ import annotations

import math

import numpy as np


class BooksEquity:
    """Mixed into a screened run with ``window.first`` (the fold's first bar), ``values`` (the
    broker's value at every bar's close) and ``cash`` (the starting cash)."""

    window: object
    values: np.ndarray
    cash: float

    def equity(self) -> np.ndarray:
        """The books' equity: the value before the fold's first bar, then each bar's."""
        first = self.window.first  # type: ignore[attr-defined]
        base = float(self.values[first - 1]) if first > 0 else self.cash
        return np.concatenate([[base], self.values[first:]])

    def returns(self) -> np.ndarray:
        """The equity's bar returns, ``equity[1:] / equity[:-1] - 1.0``, without building it
        when the value before the fold's first bar is on record."""
        first = self.window.first  # type: ignore[attr-defined]
        if first == 0:
            values = self.equity()
            return values[1:] / values[:-1] - 1.0
        values = np.asarray(self.values, dtype=np.float64)  # as the equity's (no copy)
        return values[first:] / values[first - 1 : -1] - 1.0

    def sharpe(self, periods_per_year: int = 252) -> float | None:
        """The annualised Sharpe ratio exactly as ``compute_metrics`` computes it."""
        rets = self.returns()
        if rets.size < 2:
            return None
        std = float(rets.std(ddof=1))
        return float(rets.mean()) / std * math.sqrt(periods_per_year) if std > 1e-15 else None
