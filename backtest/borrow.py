"""The borrow fee on short positions: one rule for the broker, the books and the screen.

A short sale borrows the shares, and the lender charges a fee: an annual rate on the market
value of the shares lent (``CostModel.borrow_pct``, percent a year; ``--borrow-cost``). The lab
accrues it **per bar**, not per calendar day, so daily and hourly runs use the same rule and a
weekend costs nothing extra:

* a position held short at a bar's close pays ``borrow_pct / 100 / bars_per_year`` of its
  market value at that close, ``|size| x close`` (the rate per bar: ``per_bar_rate``);
* the fee is debited from cash at the start of the next bar, before that bar's orders are
  checked or filled (the broker's ``next``), so a fill sees the cash after the fee, and the
  bar's equity at its close carries it; a short still open when the run ends pays nothing
  for its last close (there is no next bar);
* long positions pay nothing; several feeds add their fees in feed order.

Short 100 shares at a flat $50 for 252 daily bars at 5 %/yr: 252 x 100 x 50 x 0.05 / 252 =
$250. Default 0: nothing is computed, and every figure is as without the rule, bit for bit.

The engine's broker (``backtest.engine.MarginedBroker``), the books (``backtest.books``) and
the screens (``backtest.screen.fills``, ``backtest.screen.portfolio``) all compute a bar's fee
as ``borrow_due`` does, in its order of float operations, so an honest run's cash is the same
on every side. Trade pnls stay those of prices and commissions (backtrader's ``Trade``); the
fee is in the equity, its returns and metrics, and in ``Metrics.borrow_paid``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def per_bar_rate(borrow_pct: float, bars_per_year: int) -> float:
    """The fee per bar held short, as a fraction of the short's market value."""
    if not borrow_pct:
        return 0.0
    return borrow_pct / 100.0 / bars_per_year


def borrow_due(sizes: Sequence[float], closes: Sequence[float], rate: float) -> float:
    """One bar's fee: the shorts among ``sizes`` (one per feed, in feed order) at ``closes``
    (the previous bar's close of each feed), at ``rate`` per bar."""
    due = 0.0
    for size, close in zip(sizes, closes, strict=True):
        if size < 0.0:
            due += -size * close * rate
    return due


def borrow_by_bar(sizes: np.ndarray, closes: Sequence[np.ndarray], rate: float) -> np.ndarray:
    """The fee debited at every bar, vectorised over bars, the floats of ``borrow_due``.

    ``sizes`` is bars x feeds, each bar's positions after its fills; ``closes`` each feed's
    closes. Bar 0 pays nothing; bar ``i`` pays for the positions held at bar ``i - 1``'s close.
    """
    n = sizes.shape[0]
    due = np.zeros(n)
    if not rate or n < 2:
        return due
    for d, close in enumerate(closes):
        size = sizes[:-1, d]
        fee = np.where(size < 0.0, -size * close[: n - 1] * rate, 0.0)
        due[1:] = due[1:] + fee
    return due


def cash_by_bar(marks: Sequence[tuple[int, float]], due: np.ndarray, cash0: float) -> np.ndarray:
    """Each bar's cash, with the fees debited bar by bar as the broker does.

    ``marks`` are (bar, cash after that bar's fills), bar ascending, each cash already net of
    the fees up to that bar (the replay debits them before filling); ``due`` is
    ``borrow_by_bar``'s; ``cash0`` the cash before the first bar.
    """
    n = due.size
    cash = np.empty(n)
    at = dict(marks)
    c = cash0
    for i in range(n):
        if due[i]:
            c -= due[i]
        if i in at:
            c = at[i]
        cash[i] = c
    return cash
