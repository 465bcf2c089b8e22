"""The portfolio families screened: a spec over the universe, trade for trade as Backtrader.

``strategies.portfolio_code`` renders ``cross_sectional_momentum`` and ``rotation`` as one Backtrader
strategy over ``self.datas`` that, every ``rebalance_bars`` bars, ranks the symbols on their
return over ``xs_lookback`` bars skipping the last ``xs_skip``, picks weights (top n long, also
the bottom n short when long/short; equal or inverse-volatility; optionally scaled to a
volatility target) and sends ``order_target_percent`` market orders, reductions first. This
module replays that code and the engine's broker (``backtest.engine``) as they run:

* the strategy's ``next`` runs from its minperiod (the ``StdDev(PercentChange)`` of
  ``vol_lookback`` bars: bar index ``vol_lookback``) on the bars where ``len(self)`` is a
  multiple of ``rebalance_bars``; orders on bars before the fold's start are refused
  (``backtest.engine._gated``); the volatilities are backtrader's own arithmetic
  (``backtest.screen.indicators``);
* ``order_target_percent``: the target value is the weight times the broker's value at the
  signal bar's close; a zero target closes the position; otherwise whole shares
  ``int(1.0 * (difference // close))`` against the position's value ``size * close``;
* the broker at the next bar (``BackBroker.next``): ``check_submitted`` pseudo-executes the
  orders in submission order at their created price (the signal bar's close) on a running
  cash, refusing any order that leaves it negative (and carrying the negative cash on, as
  backtrader does); the accepted ones fill at the open with the slippage (capped by the bar),
  an opening part the initial margin refuses (``backtest.margin``) or the cash cannot pay is
  dropped (the closing part of the same order still fills). The cash arithmetic is the broker's, in its order of float operations;
* the books (``backtest.books``): the value at every bar's close summed feed by feed, and, as a
  portfolio job has several feeds, every fill that reduces a position realises a trade
  (the part sold or covered against the average price, net of that fill's commission).

The path is event-driven (fills happen only on the bar after a rebalance), so it is plain Python
over the rebalance bars and numpy over the rest. Its trades (``trade_list.pair_fills`` per
symbol, symbols in the order of their first fill, as ``trade_list.trades_from_trace_fills``
lists a portfolio job's) and metrics equal Backtrader's
(``tests/backtest/test_bt_screen_portfolio.py``). ``backtest.screen.screen_portfolio`` wraps
``evaluate`` and ``books_result`` into a ``ScreenResult``; the screen's CLI dispatches a
portfolio-scope spec to it.

Unsupported (named, never approximated): ``pairs``, regime filters (they read an index feed),
custom code.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from backtest import margin
from backtest.books import Position, feed_frames, forward_fill
from backtest.borrow import borrow_by_bar, borrow_due, cash_by_bar, per_bar_rate
from backtest.contracts import BacktestResult, CostModel, Fold, JobStatus
from backtest.metrics import compute_metrics
from backtest.period_keys import index_keys
from backtest.screen import indicators as ind
from backtest.screen import portfolio_kernels as kernels
from backtest.screen.blocks import Unsupported
from backtest.screen.equity import BooksEquity
from backtest.trade_list import FillRow, Trade, pair_fills
from strategies.families import PARAM_SPACE, reconcile_portfolio
from strategies.spec import PortfolioFamily, StrategySpec

SUPPORTED = (PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, PortfolioFamily.ROTATION)
LABEL = "PORTFOLIO"  # strategies.portfolio.LABEL: the symbol of a portfolio job's result


@dataclass
class PortfolioWindow:
    """The universe's fed bars for one fold, on one calendar (``books.feed_frames``): warm-up
    start to fold end, one column per symbol in feed (``self.datas``) order."""

    symbols: list[str]
    index: pd.DatetimeIndex
    open: np.ndarray  # bars x symbols, float64
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    first: int  # the first bar on or after the fold's start: orders allowed from here
    positive: bool  # every price > 0 (else the screen does not claim backtrader's sizes)
    # StdDev(PercentChange) per vol_lookback (bars x symbols): a sweep screens many specs on
    # one window, and its sets share these
    vols: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_frames(
        cls, frames: dict[str, pd.DataFrame] | list[tuple[str, pd.DataFrame]], fold: Fold
    ) -> PortfolioWindow:
        """The window of ``fold`` over the universe's frames, aligned on the first symbol's days."""
        feeds = list(frames.items()) if isinstance(frames, dict) else list(frames)
        if not feeds:
            raise ValueError("a portfolio window needs at least one symbol")
        named = feed_frames(feeds, fold)
        frame = named[0][1]
        if frame.empty or frame.index[-1].date() < fold.start:
            raise ValueError(f"no bars for the universe in {fold.start}..{fold.end}")
        cols: dict[str, np.ndarray] = {}
        for c in ("open", "high", "low", "close"):
            cols[c] = np.ascontiguousarray(
                np.column_stack([fed[c].to_numpy(dtype=np.float64) for _, fed in named])
            )
        for name, fed in named:
            if not np.isfinite(fed.to_numpy(dtype=np.float64)).all():
                raise ValueError(f"{name}: the bars hold NaN or infinite values")
        index = pd.DatetimeIndex(frame.index)
        return cls(
            symbols=[name for name, _ in named],
            index=index,
            open=cols["open"],
            high=cols["high"],
            low=cols["low"],
            close=cols["close"],
            first=int(index.searchsorted(pd.Timestamp(fold.start), "left")),
            positive=all(bool((a > 0).all()) for a in cols.values()),
        )

    def __len__(self) -> int:
        return len(self.index)

    @functools.cached_property
    def days(self) -> list[str]:
        """The window's days as ISO dates."""
        return np.datetime_as_string(self.index.to_numpy(), unit="D").tolist()

    @functools.cached_property
    def return_keys(self) -> list[str]:
        """The period keys of the returns from the fold's start (``index_keys``, once)."""
        return index_keys(self.index[self.first :])

    @functools.cached_property
    def changes(self) -> list[np.ndarray]:
        """``PercentChange(close, 1)`` of every symbol; raises ``IndicatorZeroDivision`` on a
        close of 0.0, as backtrader would (every strategy builds it, whatever it reads)."""
        return [ind.pct_change(self.close[:, j], 1) for j in range(self.close.shape[1])]

    def vol(self, lookback: int) -> np.ndarray:
        """``StdDev(PercentChange(close, 1), lookback)`` of every symbol, bars x symbols
        (cached per lookback)."""
        if lookback not in self.vols:
            self.vols[lookback] = np.column_stack(
                [ind.stddev(returns, lookback, start=1) for returns in self.changes]
            )
        return self.vols[lookback]


@dataclass(frozen=True)
class PortfolioEvaluation(BooksEquity):
    """The screen's raw outcome: the fills (execution order) and the books per bar."""

    window: PortfolioWindow
    fill_bars: list[int]
    fill_symbols: list[int]  # feed position of each fill
    fill_sizes: list[float]  # signed, as executed
    fill_prices: list[float]  # the booked price
    pnls: list[float]  # realised on every reducing fill (the books' portfolio convention)
    values: np.ndarray  # the broker's value at every bar's close
    in_market: np.ndarray  # any position held at the bar's close
    refused: int
    cash: float
    borrow_paid: float = 0.0  # the borrow fees of the fold's bars (``backtest.borrow``)

    def reported_prices(self) -> list[float]:
        """``executed.price`` as backtrader reports it: ``(0.0 + size * price) / size``."""
        return [(0.0 + s * p) / s for s, p in zip(self.fill_sizes, self.fill_prices, strict=True)]

    def trades(self) -> list[Trade]:
        """Flat-to-flat round trips per symbol, symbols in the order of their first fill (as
        ``trade_list.trades_from_trace_fills`` lists a portfolio job's)."""
        days, names = self.window.days, self.window.symbols
        by_symbol: dict[int, list[FillRow]] = {}
        for bar, j, size, price in zip(
            self.fill_bars,
            self.fill_symbols,
            self.fill_sizes,
            self.reported_prices(),
            strict=True,
        ):
            by_symbol.setdefault(j, []).append(FillRow(days[bar], size, price))
        return [t for j, rows in by_symbol.items() for t in pair_fills(names[j], rows)]


def check_supported(spec: StrategySpec) -> None:
    """Raise ``Unsupported`` naming what the portfolio screen cannot reproduce."""
    if spec.is_custom:
        raise Unsupported("custom code", "code written outside the block catalogue")
    if spec.family not in SUPPORTED:
        raise Unsupported(f"family {spec.family.value}", "no portfolio screen for this family")
    for f in reconcile_portfolio(spec).filters:
        raise Unsupported(f"filter {f}", "reads an index feed (SPY, QQQ or VIX)")


def _param(params: dict[str, Any], name: str) -> Any:
    """The value as the rendering writes it (``portfolio._literal``): int, float or bool."""
    value = params[name]
    if isinstance(value, bool):
        return value
    if name in PARAM_SPACE and PARAM_SPACE[name].kind == "int":
        return int(value)
    return float(value)


def vol_lookback_read(spec: StrategySpec) -> int | None:
    """The ``vol_lookback`` whose volatilities the weights of ``spec`` (reconciled) read:
    inverse-volatility weights (not rotation's) or the volatility target; None: they read none."""
    p = spec.parameters
    inverse = spec.family != PortfolioFamily.ROTATION and _param(p, "inverse_vol")
    return _param(p, "vol_lookback") if inverse or _param(p, "vol_target") else None


def warm(specs: list[StrategySpec], window: PortfolioWindow) -> None:
    """Build, once, the window's cached inputs that ``specs`` read (the symbols' changes,
    the volatilities of each lookback a spec's weights read): a sweep split over forked
    processes then shares them instead of building them in each. A window whose changes
    divide by zero is left for each set to report."""
    try:
        window.changes  # noqa: B018
    except ind.IndicatorZeroDivision:
        return
    for spec in specs:
        try:
            check_supported(spec)
        except Unsupported:
            continue
        lookback = vol_lookback_read(reconcile_portfolio(spec))
        if lookback is not None:
            window.vol(lookback)


class _Strategy:
    """The generated ``targets`` of ``_BODY`` (``strategies.portfolio_code``), per rebalance:
    the universe ranked once per set (``portfolio_kernels.rank_ends``), only its ends kept."""

    def __init__(
        self, spec: StrategySpec, window: PortfolioWindow, bars_per_year: int, bars: np.ndarray
    ) -> None:
        p = spec.parameters
        rotation = spec.family == PortfolioFamily.ROTATION
        self.top_n = 1 if rotation else _param(p, "xs_top_n")
        self.shorts = False if rotation else bool(spec.long_short)
        self.cash_filter = _param(p, "cash_filter") if rotation else False
        self.inverse_vol = False if rotation else _param(p, "inverse_vol")
        self.vol_target = _param(p, "vol_target")
        self.target_vol = _param(p, "target_vol")
        self.gross = _param(p, "gross")
        self.bars_per_year = int(bars_per_year)
        window.changes  # noqa: B018  (raises on a close of 0.0, as backtrader's __init__)
        # the volatilities only when a weight reads them (the same floats, built once a window)
        lookback = vol_lookback_read(spec)
        self.vol = None if lookback is None else window.vol(lookback)
        self.k = max(1, self.top_n)
        self.at = {int(t): i for i, t in enumerate(bars)}
        self.count, self.best, self.worst, self.top = kernels.rank_ends(
            window.close, bars, _param(p, "xs_lookback"), _param(p, "xs_skip"), self.k
        )

    def targets(self, t: int) -> dict[int, float] | None:
        """The target weight of each feed at rebalance bar ``t`` (None: keep what is held)."""
        i = self.at[t]
        m = int(self.count[i])
        if m < 2:
            return None
        shorts = self.shorts
        n = max(1, min(self.top_n, m // 2 if shorts else m - 1))
        longs = [int(j) for j in self.best[i, :n]]
        kept = min(m, self.k)  # the worst kept, in rank order, from the front
        lows = [int(j) for j in self.worst[i, kept - n : kept]] if shorts else []
        if self.cash_filter and self.top[i] < 0:
            longs = []
        weights: dict[int, float] = {}
        budget = self.gross / 2.0 if shorts else self.gross
        for sign, group in ((1.0, longs), (-1.0, lows)):
            raw = []
            for j in group:
                v = self._vol(t, j)
                raw.append(1.0 / v if self.inverse_vol and v > 0 else 1.0)
            total = sum(raw)
            for j, r in zip(group, raw, strict=True):
                weights[j] = sign * budget * r / total
        if self.vol_target and weights:
            est = 0.0
            for j, w in weights.items():
                v = self._vol(t, j)
                est += abs(w) * (v if v > 0 else 0.0)
            est *= math.sqrt(self.bars_per_year)
            if est > 0:
                scale = min(1.0, self.target_vol / est)
                weights = {j: w * scale for j, w in weights.items()}
        return weights

    def _vol(self, t: int, j: int) -> float:
        return 1.0 if self.vol is None else float(self.vol[t, j])


def _value(cash: float, positions: dict[int, Position], close: np.ndarray, t: int) -> float:
    """The broker's ``_get_value`` at bar ``t``'s close: the held positions in feed order (a
    flat feed adds exactly 0.0, so it is not visited)."""
    total = 0.0
    row = close[t]
    for j in sorted(positions):
        pos = positions[j]
        c = float(row[j])
        dvalue = pos.size * c
        unrealised = pos.size * (c - pos.price) * 1.0
        if dvalue > 0:
            total = (total + (dvalue - unrealised) / 1.0) + unrealised
        else:
            total += dvalue
    return cash + total


def _rebalance_bars(strat_start: int, rebalance: int, n: int) -> np.ndarray:
    """The bars where ``next`` rebalances: from the first bar >= ``strat_start`` where
    ``len(self) % rebalance == 0``, every ``rebalance`` bars, before the last bar (an order
    there never fills)."""
    first = strat_start + (-(strat_start + 1)) % rebalance
    return np.arange(first, n - 1, rebalance, dtype=np.int64)


def evaluate(
    spec: StrategySpec,
    window: PortfolioWindow,
    *,
    costs: CostModel | None = None,
    bars_per_year: int = 252,
) -> PortfolioEvaluation:
    """Run ``spec`` over ``window``; raises ``Unsupported`` or ``IndicatorZeroDivision``.

    ``bars_per_year`` must be what the code was rendered with (the volatility target's)."""
    costs = costs or CostModel()
    check_supported(spec)
    spec = reconcile_portfolio(spec)  # what render_portfolio renders
    n = len(window)
    p = spec.parameters
    start = max(_param(p, "vol_lookback"), window.first)  # the strategy's minperiod, the gate
    bars = _rebalance_bars(start, _param(p, "rebalance_bars"), n)
    strat = _Strategy(spec, window, bars_per_year, bars)  # raises on a close of 0.0
    if not window.positive:  # e.g. a last close of 0.0: backtrader's sizing would divide by it
        raise Unsupported("bars", "a price of 0.0 or below")
    rate, slip = costs.commission_pct / 100.0, costs.slippage_pct / 100.0
    borrow = per_bar_rate(costs.borrow_pct, bars_per_year)
    close = window.close
    run = _Run(cash=costs.cash, positions={})
    for r in bars.tolist():
        if borrow:  # the fees up to the rebalance bar: its value at the close carries them
            run.cash, run.accrued = _borrow_debited(run, close, borrow, r), r + 1
        orders = _rebalance(strat, r, run.cash, run.positions, close)
        t = r + 1  # the broker's next bar: it runs before the strategy's next rebalance
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
        # a flat position is Position() again (its price reset to 0.0): only the held stay
        run.positions = {j: q for j, q in run.positions.items() if q.size}
        if filled:
            held = sorted(run.positions)
            run.marks.append(
                (
                    t,
                    run.cash,
                    held,
                    [run.positions[j].size for j in held],
                    [run.positions[j].price for j in held],
                )
            )
    values, in_market, paid = _books_values(window, costs, run.marks, n, borrow)
    return PortfolioEvaluation(
        window=window,
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


# The state after a bar with fills: (bar, cash, held feeds in feed order, sizes, prices).
Mark = tuple[int, float, list[int], list[float], list[float]]


@dataclass
class _Run:
    """The broker's state while ``evaluate`` runs: cash, the positions held (any other feed is
    flat: ``Position()``), the fee accrual, the fills so far, the realised pnls, the
    state after each bar with fills, refused orders."""

    cash: float
    positions: dict[int, Position]  # the held ones (a flat one is dropped after its bar)
    accrued: int = 1  # the first bar whose borrow fee is not yet debited
    fill_bars: list[int] = field(default_factory=list)
    fill_symbols: list[int] = field(default_factory=list)
    fill_sizes: list[float] = field(default_factory=list)
    fill_prices: list[float] = field(default_factory=list)
    pnls: list[float] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    refused: int = 0


def _borrow_debited(run: _Run, close: np.ndarray, borrow: float, upto: int) -> float:
    """The cash with the fees of bars ``run.accrued`` to ``upto`` debited (positions held
    since; a flat or long feed owes nothing)."""
    cash = run.cash
    shorts = sorted(j for j, p in run.positions.items() if p.size < 0.0)
    if shorts:
        sizes = [run.positions[j].size for j in shorts]
        for i in range(run.accrued, upto + 1):
            cash -= borrow_due(sizes, close[i - 1, shorts].tolist(), borrow)
    return cash


def _check_submitted(
    orders: list[tuple[int, float]],
    t: int,
    cash: float,
    positions: dict[int, Position],
    close: np.ndarray,
    rate: float,
) -> tuple[list[tuple[int, float]], int]:
    """backtrader's ``check_submitted``: pseudo-execution at the created price with a running
    cash; returns the accepted orders, in order, and how many were refused."""
    probe_cash = cash
    clones: dict[int, Position] = {}
    accepted = []
    refused = 0
    for j, size in orders:
        created = float(close[t - 1, j])
        held = positions.get(j) or Position()
        clone = clones.setdefault(j, Position(held.size, held.price))
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


def _fill_price(window: PortfolioWindow, j: int, t: int, size: float, slip: float) -> float:
    """The fill price at bar ``t``'s open, slipped against the order and capped by the bar."""
    o = float(window.open[t, j])
    if size > 0:
        price = o * (1 + slip) if slip else o
        high = float(window.high[t, j])
        price = price if price <= high else high
    else:
        price = o * (1 - slip) if slip else o
        low = float(window.low[t, j])
        price = price if price >= low else low
    return price


def _beyond_margin(
    run: _Run,
    window: PortfolioWindow,
    j: int,
    size: float,
    t: int,
    price: float,
    comm: float,
    max_gross_leverage: float,
) -> bool:
    """Whether the initial margin refuses the opening part of ``size`` on feed ``j``: the
    exposure over the held feeds and ``j`` in feed order (a flat feed adds exactly 0.0)."""
    pos = run.positions[j]
    if not margin.opens(pos.size, size):
        return False
    feeds = sorted({j, *run.positions})
    gross, equity = margin.exposure_after(
        run.cash,
        [run.positions[k].size for k in feeds],
        window.open[t, feeds].tolist(),
        feeds.index(j),
        size,
        price,
        comm,
    )
    return margin.margin_refuses(gross, equity, max_gross_leverage)


def _fill(
    run: _Run,
    window: PortfolioWindow,
    j: int,
    size: float,
    t: int,
    rate: float,
    slip: float,
    max_gross_leverage: float,
) -> bool:
    """Execute an accepted order at bar ``t``'s open as the broker does (a cover always; the
    opening part unless beyond the margin or the cash); whether anything filled."""
    price = _fill_price(window, j, t, size, slip)
    pos = run.positions.setdefault(j, Position())
    # the broker's initial margin refuses the opening part (a cover still fills)
    beyond = _beyond_margin(
        run, window, j, size, t, price, abs(size) * rate * price, max_gross_leverage
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
    window: PortfolioWindow, costs: CostModel, marks: list[Mark], n: int, borrow: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """The books' value at every close (from the state after each bar with fills), whether
    any position is held, and the borrow fees of the fold's bars."""
    width = max((len(m[2]) for m in marks), default=0)
    mark_bars = np.array([m[0] for m in marks], dtype=np.int64)
    feeds = np.zeros((len(marks), width), dtype=np.int64)
    sizes, prices = np.zeros((len(marks), width)), np.zeros((len(marks), width))
    for row, (_, _, held, size, price) in enumerate(marks):
        feeds[row, : len(held)], sizes[row, : len(held)], prices[row, : len(held)] = (
            held,
            size,
            price,
        )
    held_n = np.array([len(m[2]) for m in marks], dtype=np.int64)
    cash_at = np.full(n, costs.cash)
    if marks:
        which = np.searchsorted(mark_bars, np.arange(n), side="right") - 1
        cash_at[which >= 0] = np.array([m[1] for m in marks])[which[which >= 0]]
    due = _borrow_by_bar(window, marks, n, borrow) if borrow else None
    if due is not None:
        cash_at = cash_by_bar([(m[0], m[1]) for m in marks], due, costs.cash)
    values, in_market = kernels.values_from_marks(
        window.close[:n], cash_at, mark_bars, feeds, sizes, prices, held_n
    )
    paid = 0.0
    if due is not None:
        bust = margin.bankrupt_at(values, window.first)
        paid = float(due[window.first : n if bust is None else bust + 1].sum())
    return values, in_market, paid


def _borrow_by_bar(window: PortfolioWindow, marks: list[Mark], n: int, borrow: float) -> np.ndarray:
    """``borrow.borrow_by_bar`` over the feeds ever held (the others owe exactly nothing)."""
    touched = sorted({j for m in marks for j in m[2]})
    col = {j: d for d, j in enumerate(touched)}
    dense = [(t, cash, [0.0] * len(touched), [0.0] * len(touched)) for t, cash, *_ in marks]
    for (_, _, held, size, _), (_, _, row, _) in zip(marks, dense, strict=True):
        for j, s in zip(held, size, strict=True):
            row[col[j]] = s
    _, by_bar, _ = forward_fill(dense, n, 0.0, len(touched))
    return borrow_by_bar(by_bar, [window.close[:n, j] for j in touched], borrow)


def _rebalance(
    strat: _Strategy, t: int, cash: float, positions: dict[int, Position], close: np.ndarray
) -> list[tuple[int, float]]:
    """The generated ``next`` on a rebalance bar: the orders (feed, signed size) it sends. A
    feed neither held nor targeted sends none (its weight and its holding are both 0.0)."""
    weights = strat.targets(t)
    if weights is None:
        return []
    value = _value(cash, positions, close, t)
    if not value > 0:
        return []
    row = close[t]
    feeds = sorted({*weights, *positions})
    prices = {j: float(row[j]) for j in feeds}
    sizes = {j: positions[j].size if j in positions else 0.0 for j in feeds}
    now = {j: sizes[j] * prices[j] / value for j in feeds}
    orders: list[tuple[int, float]] = []
    for reduce in (True, False):
        for j in feeds:
            w = weights.get(j, 0.0)
            if (w < now[j]) if reduce else (w > now[j]):
                size = _target_order(w * value, sizes[j], prices[j])
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


def books_result(
    spec: StrategySpec, run: PortfolioEvaluation, periods_per_year: int = 252
) -> BacktestResult:
    """The figures ``backtest.books.keep_books`` computes for the portfolio job."""
    window, first = run.window, run.window.first
    n = len(run.values)
    equity = run.equity()
    bars_in_market = int(run.in_market[first:n].sum())
    reported = run.reported_prices()
    traded = float(
        sum(
            abs(s) * p
            for b, s, p in zip(run.fill_bars, run.fill_sizes, reported, strict=True)
            if b >= first
        )
    )
    metrics = compute_metrics(
        equity,
        trade_pnls=run.pnls,
        bars_in_market=bars_in_market,
        periods_per_year=periods_per_year,
        traded_notional=traded,
    ).model_copy(update={"orders_rejected": run.refused, "borrow_paid": run.borrow_paid})
    return BacktestResult.model_construct(
        job_id=f"screen|{LABEL}",
        variant_id=spec.trial_key(),
        symbol=LABEL,
        fold=0,
        # Bankrupt: the books' status; its returns end at the bust (the trades and turnover
        # are the run's: a bankrupt set only has to rank last, Backtrader's books judge it).
        status=JobStatus.OK if run.bankrupt_at() is None else JobStatus.BANKRUPT,
        metrics=metrics,
        return_dates=window.return_keys[: len(equity) - 1],
        returns=(equity[1:] / equity[:-1] - 1.0).tolist(),
        trade_pnls=list(run.pnls),
        bars_in_market=bars_in_market,
        traded_notional=traded,
    )
