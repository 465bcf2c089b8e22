"""The portfolio screen before issue 30 item 4, kept as the reference its rewrite must equal.

``backtest.screen.portfolio`` at commit ed1f8e6: the strategy and the broker replayed in plain
Python over every symbol at every rebalance and fill, prices as Python lists. Only the tests
import it (``test_screen_portfolio_reference.py``): the new path's fills, values and figures
must equal these exactly.
"""

# ruff: noqa: C901, D102, D103

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from backtest import margin
from backtest.books import Position, broker_values, forward_fill
from backtest.borrow import borrow_by_bar, borrow_due, cash_by_bar, per_bar_rate
from backtest.contracts import CostModel
from backtest.screen import indicators as ind
from backtest.screen.blocks import Unsupported
from backtest.screen.portfolio import (
    PortfolioEvaluation,
    PortfolioWindow,
    check_supported,
)
from strategies.families import PARAM_SPACE, reconcile_portfolio
from strategies.spec import PortfolioFamily, StrategySpec


class ListWindow:
    """The old window's view of a ``PortfolioWindow``: [symbol][bar] Python lists."""

    def __init__(self, window: PortfolioWindow) -> None:
        self.window = window
        self.symbols = window.symbols
        self.open = window.open.T.tolist()
        self.high = window.high.T.tolist()
        self.low = window.low.T.tolist()
        self.close = window.close.T.tolist()
        self.closes = window.close
        self.first = window.first
        self.positive = window.positive
        self.vols: dict[int, list[list[float]]] = {}

    def __len__(self) -> int:
        return len(self.window)

    def vol(self, lookback: int) -> list[list[float]]:
        if lookback not in self.vols:
            out = []
            for close in self.close:
                returns = ind.pct_change(np.asarray(close, dtype=np.float64), 1)
                out.append(ind.stddev(returns, lookback, start=1).tolist())
            self.vols[lookback] = out
        return self.vols[lookback]


def _param(params: dict[str, Any], name: str) -> Any:
    """The value as the rendering writes it (``portfolio._literal``): int, float or bool."""
    value = params[name]
    if isinstance(value, bool):
        return value
    if name in PARAM_SPACE and PARAM_SPACE[name].kind == "int":
        return int(value)
    return float(value)


class _Strategy:
    """The generated ``targets`` of ``_BODY`` (``strategies.portfolio_code``), per rebalance."""

    def __init__(self, spec: StrategySpec, window: Any, bars_per_year: int) -> None:
        p = spec.parameters
        rotation = spec.family == PortfolioFamily.ROTATION
        self.lookback = _param(p, "xs_lookback")
        self.skip = _param(p, "xs_skip")
        self.top_n = 1 if rotation else _param(p, "xs_top_n")
        self.shorts = False if rotation else bool(spec.long_short)
        self.cash_filter = _param(p, "cash_filter") if rotation else False
        self.inverse_vol = False if rotation else _param(p, "inverse_vol")
        self.vol_target = _param(p, "vol_target")
        self.target_vol = _param(p, "target_vol")
        self.gross = _param(p, "gross")
        self.rebalance = _param(p, "rebalance_bars")
        self.vol_lookback = _param(p, "vol_lookback")
        self.bars_per_year = int(bars_per_year)
        self.close = window.close
        self.vol = window.vol(self.vol_lookback)

    def momentum(self, j: int, t: int) -> float:
        span = self.lookback + self.skip
        if t + 1 <= span:  # len(d) <= span
            return math.nan
        past = self.close[j][t - span]
        recent = self.close[j][t - self.skip]
        if not past > 0:
            return math.nan
        return recent / past - 1.0

    def targets(self, t: int) -> dict[int, float] | None:
        ranked = []
        for j in range(len(self.close)):
            score = self.momentum(j, t)
            if not math.isnan(score):
                ranked.append((score, j))
        if len(ranked) < 2:
            return None
        ranked.sort(reverse=True)
        shorts = self.shorts
        n = max(1, min(self.top_n, len(ranked) // 2 if shorts else len(ranked) - 1))
        longs, lows = [], []
        for rank, (_, j) in enumerate(ranked):
            if rank < n:
                longs.append(j)
            if shorts and rank >= len(ranked) - n:
                lows.append(j)
        if self.cash_filter and ranked[0][0] < 0:
            longs = []
        weights: dict[int, float] = {}
        budget = self.gross / 2.0 if shorts else self.gross
        for sign, group in ((1.0, longs), (-1.0, lows)):
            raw = []
            for j in group:
                v = self.vol[j][t]
                raw.append(1.0 / v if self.inverse_vol and v > 0 else 1.0)
            total = sum(raw)
            for j, r in zip(group, raw, strict=True):
                weights[j] = sign * budget * r / total
        if self.vol_target and weights:
            est = 0.0
            for j, w in weights.items():
                v = self.vol[j][t]
                est += abs(w) * (v if v > 0 else 0.0)
            est *= math.sqrt(self.bars_per_year)
            if est > 0:
                scale = min(1.0, self.target_vol / est)
                weights = {j: w * scale for j, w in weights.items()}
        return weights


def _value(cash: float, positions: list[Position], close: list[list[float]], t: int) -> float:
    """The broker's ``_get_value`` at bar ``t``'s close (positions in feed order)."""
    total = 0.0
    for j, pos in enumerate(positions):
        c = close[j][t]
        dvalue = pos.size * c
        unrealised = pos.size * (c - pos.price) * 1.0
        if dvalue > 0:
            total = (total + (dvalue - unrealised) / 1.0) + unrealised
        else:
            total += dvalue
    return cash + total


def evaluate(
    spec: StrategySpec,
    window: ListWindow,
    *,
    costs: CostModel | None = None,
    bars_per_year: int = 252,
) -> PortfolioEvaluation:
    """Run ``spec`` over ``window``; raises ``Unsupported`` or ``IndicatorZeroDivision``.

    ``bars_per_year`` must be what the code was rendered with (the volatility target's)."""
    costs = costs or CostModel()
    check_supported(spec)
    spec = reconcile_portfolio(spec)  # what render_portfolio renders
    strat = _Strategy(spec, window, bars_per_year)  # raises on a close of 0.0, as backtrader
    if not window.positive:  # e.g. a last close of 0.0: backtrader's sizing would divide by it
        raise Unsupported("bars", "a price of 0.0 or below")
    rate, slip = costs.commission_pct / 100.0, costs.slippage_pct / 100.0
    borrow = per_bar_rate(costs.borrow_pct, bars_per_year)
    close = window.close
    k, n = len(window.symbols), len(window)
    run = _Run(cash=costs.cash, positions=[Position() for _ in range(k)])
    start = max(strat.vol_lookback, window.first)  # the strategy's minperiod, and the gate
    rb = strat.rebalance
    r = start + (-(start + 1)) % rb  # the first bar >= start where len(self) % rb == 0
    while r < n - 1:  # an order on the last bar never fills
        if borrow:  # the fees up to the rebalance bar: its value at the close carries them
            run.cash, run.accrued = _borrow_debited(run, close, borrow, r), r + 1
        orders = _rebalance(strat, r, run.cash, run.positions, close)
        t = r + 1  # the broker's next bar: it runs before the strategy's next rebalance
        r += rb
        if not orders:
            continue
        if borrow:  # the broker debits the fee of bar t before checking the orders
            run.cash, run.accrued = _borrow_debited(run, close, borrow, t), t + 1
        accepted, refused = _check_submitted(orders, t, run.cash, run.positions, close, rate)
        run.refused += refused
        # -- the accepted orders fill at this bar's open, in order
        filled = False
        for j, size in accepted:
            filled = _fill(run, window, j, size, t, rate, slip, costs.max_gross_leverage) or filled
        if filled:
            run.marks.append(
                (t, run.cash, [p.size for p in run.positions], [p.price for p in run.positions])
            )
    values, in_market, paid = _books_values(window, costs, run.marks, n, borrow)
    return PortfolioEvaluation(
        window=window.window,
        fill_bars=run.fill_bars,
        fill_symbols=run.fill_symbols,
        fill_sizes=run.fill_sizes,
        fill_prices=run.fill_prices,
        pnls=run.pnls,
        values=values,
        in_market=in_market,
        refused=run.refused,
        cash=costs.cash,
        borrow_paid=paid,
    )


@dataclass
class _Run:
    """The broker's state while ``evaluate`` runs: cash, positions, the fee accrual, the
    fills so far, the realised pnls, the state after each bar with fills, refused orders."""

    cash: float
    positions: list[Position]
    accrued: int = 1  # the first bar whose borrow fee is not yet debited
    fill_bars: list[int] = field(default_factory=list)
    fill_symbols: list[int] = field(default_factory=list)
    fill_sizes: list[float] = field(default_factory=list)
    fill_prices: list[float] = field(default_factory=list)
    pnls: list[float] = field(default_factory=list)
    marks: list[tuple[int, float, list[float], list[float]]] = field(default_factory=list)
    refused: int = 0


def _borrow_debited(run: _Run, close: list[list[float]], borrow: float, upto: int) -> float:
    """The cash with the fees of bars ``run.accrued`` to ``upto`` debited (positions held
    since)."""
    cash = run.cash
    sizes = [p.size for p in run.positions]
    if any(x < 0.0 for x in sizes):
        for i in range(run.accrued, upto + 1):
            cash -= borrow_due(sizes, [close[j][i - 1] for j in range(len(sizes))], borrow)
    return cash


def _check_submitted(
    orders: list[tuple[int, float]],
    t: int,
    cash: float,
    positions: list[Position],
    close: list[list[float]],
    rate: float,
) -> tuple[list[tuple[int, float]], int]:
    """backtrader's ``check_submitted``: pseudo-execution at the created price with a running
    cash; returns the accepted orders, in order, and how many were refused."""
    probe_cash = cash
    clones: dict[int, Position] = {}
    accepted = []
    refused = 0
    for j, size in orders:
        created = close[j][t - 1]
        clone = clones.setdefault(j, Position(positions[j].size, positions[j].price))
        opened, closed = clone.update(size, created)
        if closed:
            closedvalue = -closed * created
            closecash = closedvalue
            if closedvalue > 0:
                closecash /= 1.0
            probe_cash += closecash + 0
            probe_cash -= abs(closed) * rate * created
        if opened:
            openedvalue = opened * created
            opencash = openedvalue
            if openedvalue > 0:
                opencash /= 1.0
            probe_cash -= opencash
            probe_cash -= abs(opened) * rate * created
        if probe_cash >= 0.0:
            accepted.append((j, size))
        else:
            refused += 1  # Margin; the negative cash carries on to the next order
    return accepted, refused


def _fill_price(window: Any, j: int, t: int, size: float, slip: float) -> float:
    """The fill price at bar ``t``'s open, slipped against the order and capped by the bar."""
    o = window.open[j][t]
    if size > 0:
        price = o * (1 + slip) if slip else o
        price = price if price <= window.high[j][t] else window.high[j][t]
    else:
        price = o * (1 - slip) if slip else o
        price = price if price >= window.low[j][t] else window.low[j][t]
    return price


def _fill(
    run: _Run,
    window: Any,
    j: int,
    size: float,
    t: int,
    rate: float,
    slip: float,
    max_gross_leverage: float,
) -> bool:
    """Execute an accepted order at bar ``t``'s open as the broker does (a cover always; the
    opening part unless beyond the margin or the cash); whether anything filled."""
    opens, positions = window.open, run.positions
    price = _fill_price(window, j, t, size, slip)
    pos = positions[j]
    # the broker's initial margin refuses the opening part (a cover still fills)
    beyond = margin.opens(pos.size, size) and margin.margin_refuses(
        *margin.exposure_after(
            run.cash,
            [p.size for p in positions],
            [opens[k][t] for k in range(len(positions))],
            j,
            size,
            price,
            abs(size) * rate * price,
        ),
        max_gross_leverage,
    )
    pprice_orig = pos.price
    opened, closed = Position(pos.size, pos.price).update(size, price)
    pnl = -closed * (price - pprice_orig) * 1.0
    c = run.cash
    closedcomm = 0.0
    if closed:
        closedvalue = -closed * pprice_orig
        closecash = closedvalue
        if closedvalue > 0:
            closecash /= 1.0
        c += closecash + pnl * 1
        closedcomm = abs(closed) * rate * price
        c -= closedcomm
        c += 0.0
        run.cash = c
    popened = opened
    if opened and beyond:
        opened = 0.0  # beyond the margin: the opening part is dropped
    if opened:
        openedvalue = opened * price
        opencash = openedvalue
        if openedvalue > 0:
            opencash /= 1.0
        c -= opencash
        c -= abs(opened) * rate * price
        if c < 0.0:
            opened = 0.0  # not enough cash for the opening part: dropped
        else:
            run.cash = c
    if popened and not opened:
        run.refused += 1
    execsize = closed + opened
    if not execsize:
        return False
    pos.update(execsize, price)
    run.fill_bars.append(t)
    run.fill_symbols.append(j)
    run.fill_sizes.append(execsize)
    run.fill_prices.append(price)
    if closed:  # a portfolio's reduction realises a trade (books)
        run.pnls.append(pnl - closedcomm)
    return True


def _books_values(
    window: Any,
    costs: CostModel,
    marks: list[tuple[int, float, list[float], list[float]]],
    n: int,
    borrow: float,
) -> tuple[np.ndarray, np.ndarray, float]:
    """The books' value at every close (from the state after each bar with fills), whether
    any position is held, and the borrow fees of the fold's bars."""
    cash_at, sizes, avgs = forward_fill(marks, n, costs.cash, window.closes.shape[1])
    closes = [window.closes[:n, d] for d in range(window.closes.shape[1])]
    paid = 0.0
    if borrow:
        due = borrow_by_bar(sizes, closes, borrow)
        cash_at = cash_by_bar([(m[0], m[1]) for m in marks], due, costs.cash)
    values, in_market = broker_values(closes, cash_at, sizes, avgs), (sizes != 0).any(axis=1)
    if borrow:
        bust = margin.bankrupt_at(values, window.first)
        paid = float(due[window.first : n if bust is None else bust + 1].sum())
    return values, in_market, paid


def _rebalance(
    strat: _Strategy, t: int, cash: float, positions: list[Position], close: list[list[float]]
) -> list[tuple[int, float]]:
    """The generated ``next`` on a rebalance bar: the orders (feed, signed size) it sends."""
    weights = strat.targets(t)
    if weights is None:
        return []
    value = _value(cash, positions, close, t)
    if not value > 0:
        return []
    now = [positions[j].size * close[j][t] / value for j in range(len(positions))]
    orders: list[tuple[int, float]] = []
    for reduce in (True, False):
        for j in range(len(positions)):
            w = weights.get(j, 0.0)
            if (w < now[j]) if reduce else (w > now[j]):
                size = _target_order(w * value, positions[j].size, close[j][t])
                if size:
                    orders.append((j, size))
    return orders


def _target_order(target: float, possize: float, price: float) -> float:
    """``order_target_value``: the signed size it sends (0: none)."""
    if not target and possize:
        return -possize  # close()
    value = possize * price
    if target > value:
        return float(int(1.0 * ((target - value) // price)))
    if target < value:
        return -float(int(1.0 * ((value - target) // price)))
    return 0.0
