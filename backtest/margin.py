"""The margin rule: what leverage an account may take on, and when it is bankrupt.

A backtrader stock-like broker checks only cash, and a short sale *credits* cash: shorting 40x
the capital was always affordable, and equity then went through zero and far below it, with
returns (and a Sharpe) computed on negative equity. A broker would have refused the orders long
before. So the lab's broker and its trusted books share one rule, written once here:

* **Initial margin.** A fill that opens or adds exposure (buys from flat or long, sells from
  flat or short, or reverses) is refused when, after it, the account's gross exposure exceeds
  ``max_gross_leverage`` times its equity: ``sum |size| x mark <= cap x equity``. Every
  position is marked at the bar's open, the one filling at its fill price; equity is the cash
  after the fill (a sale credits it, the commission debits it) plus the positions so marked.
  The default cap, ``MAX_GROSS_LEVERAGE`` = 2, is Reg T's 50 % initial margin; no template of
  the lab comes near it (they size at most 95 % of equity, a portfolio's long and short books
  at most ``gross`` <= 1 in all), and a long-only account cannot pass 1 while its cash stays
  non-negative. A fill that only reduces exposure is never refused: a broker lets you close.
  A cap above the default is deliberate leverage (``CostModel.max_gross_leverage``,
  ``backtest.run --max-gross-leverage``).
* **Bankruptcy.** An account whose equity reaches zero or below at a bar's close is bankrupt:
  the loss stops at the capital, the run ends there (total return -100 %), and no return is
  ever computed on non-positive equity. The lab does not simulate maintenance calls (a forced
  liquidation is a trade the strategy did not ask for); the initial margin bounds leverage
  when it is taken, bankruptcy ends a run whose leverage the market then punished.

The engine's broker (``backtest.engine``) refuses such an opening order whole, as it refuses one
the cash cannot pay (``Margin``, counted in ``orders_rejected``); the books
(``backtest.books``), which believe nothing from the child, treat a claimed fill this rule
refuses as an integrity error. Both call ``margin_refuses`` with the same inputs, so an honest
run is booked exactly as it ran.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_GROSS_LEVERAGE = 2.0  # gross exposure / equity after an opening fill (Reg T: 50 % margin)
# The books accept a fill within this relative slack of the cap: the broker and the books
# compute the same floats, the slack only keeps an ulp from becoming an integrity error.
MARGIN_RTOL = 1e-9


def opens(held: float, size: float) -> bool:
    """Whether a fill of ``size`` on a position of ``held`` opens or adds exposure."""
    return size != 0 and (held * size >= 0 or abs(size) > abs(held))


def exposure_after(
    cash: float,
    sizes: Sequence[float],
    marks: Sequence[float],
    feed: int,
    size: float,
    price: float,
    commission: float,
) -> tuple[float, float]:
    """(gross exposure, equity) after ``size`` of feed ``feed`` fills at ``price``.

    ``sizes`` and ``marks`` are every feed's position before the fill and its mark (the bar's
    open); the filled feed is marked at ``price``. A sale credits its proceeds to cash
    (backtrader's stock-like broker with ``shortcash``), the commission is debited.
    """
    cash_after = cash - size * price - commission
    gross = 0.0
    held = 0.0
    for j, (s, m) in enumerate(zip(sizes, marks, strict=True)):
        if j == feed:
            s, m = s + size, price
        gross += abs(s) * m
        held += s * m
    return gross, cash_after + held


def margin_refuses(
    gross: float, equity: float, max_gross_leverage: float, *, rtol: float = 0.0
) -> bool:
    """Whether the initial margin refuses an opening fill leaving ``gross`` on ``equity``."""
    if gross <= 0.0:
        return False
    return not gross <= max_gross_leverage * equity * (1.0 + rtol)


def bankrupt_at(values: Sequence[float] | np.ndarray, first: int = 0) -> int | None:
    """The first bar, from ``first``, whose equity is zero or below; None when there is none."""
    broke = np.flatnonzero(~(np.asarray(values[first:], dtype=float) > 0.0))
    return first + int(broke[0]) if broke.size else None
