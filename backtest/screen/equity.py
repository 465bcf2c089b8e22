"""What every screened run shares: the books' equity and its Sharpe ratio, as ``compute_metrics``
computes them, for the single-symbol screen (``backtest.screen``) and the portfolio one
(``backtest.screen.portfolio``)."""

from __future__ import annotations

import math

import numpy as np

from backtest.margin import bankrupt_at


class BooksEquity:
    """Mixed into a screened run with ``window.first`` (the fold's first bar), ``values`` (the
    broker's value at every bar's close) and ``cash`` (the starting cash)."""

    window: object
    values: np.ndarray
    cash: float

    def bankrupt_at(self) -> int | None:
        """The bar whose value is first zero or below (``backtest.margin``): the books end the
        run there, at zero; None for a run that never gets there."""
        return bankrupt_at(self.values, self.window.first)  # type: ignore[attr-defined]

    def equity(self) -> np.ndarray:
        """The books' equity: the value before the fold's first bar, then each bar's (up to a
        bankruptcy, booked at zero)."""
        first = self.window.first  # type: ignore[attr-defined]
        base = float(self.values[first - 1]) if first > 0 else self.cash
        bust = self.bankrupt_at()
        if bust is None:
            return np.concatenate([[base], self.values[first:]])
        equity = np.concatenate([[base], self.values[first : bust + 1]])
        equity[-1] = 0.0
        return equity

    def returns(self) -> np.ndarray:
        """The equity's bar returns, ``equity[1:] / equity[:-1] - 1.0``, without building it
        when the value before the fold's first bar is on record."""
        first = self.window.first  # type: ignore[attr-defined]
        if first == 0 or self.bankrupt_at() is not None:
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
