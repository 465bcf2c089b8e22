"""The vectorised screen: a spec evaluated on bars without Backtrader, trade for trade the same.

Why: a Backtrader run of ten daily years costs a few hundred milliseconds; a search that tries
hundreds of parameter sets cannot afford it. The screen reproduces the generated strategy of a
single-symbol block spec (``strategies.codegen``) as the engine runs it (``backtest.engine``:
next-open fills, percentage slippage capped by the bar, percentage commission, the broker's cash
checks, orders refused before the fold's start): the indicators are backtrader's own arithmetic
(``backtest.screen.indicators``), the conditions are boolean arrays (``backtest.screen.blocks``)
and the path-dependent part is one numba loop (``backtest.screen.fills``). Its trades equal
Backtrader's (same dates and sizes, prices to 1e-6; ``tests/backtest/test_bt_screen.py``); its
metrics come from ``backtest.metrics.compute_metrics`` on the same equity the books replay.

A spec the screen cannot reproduce is ``unsupported`` (the message names the block), never
approximated; Backtrader stays the judge.

    python -m backtest.screen SPEC.json --data-dir D --tickers T --start S --end E

prints one JSON line ``{status, trades: [...], metrics, error, ...}``; bad input exits 2 with one
line naming the argument. A portfolio-scope spec (``strategies.portfolio``) is screened over
the tickers at once (``backtest.screen.portfolio``): one result, symbol ``PORTFOLIO``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from backtest.books import feed_frame
from backtest.borrow import borrow_by_bar, per_bar_rate
from backtest.cli_args import (
    OneLineParser,
    add_window_arguments,
    checked_tickers,
    load_window,
    refuse,
)
from backtest.contracts import BacktestResult, CostModel, Fold, JobStatus, Metrics
from backtest.metrics import compute_metrics
from backtest.period_keys import index_keys
from backtest.screen import blocks
from backtest.screen import fills as sf
from backtest.screen import portfolio as sp
from backtest.screen.equity import BooksEquity
from backtest.screen.indicators import IndicatorZeroDivision
from backtest.trade_list import FillRow, Trade, pair_fills
from strategies.codegen import is_short_enabled
from strategies.family_api import whole_universe
from strategies.spec import StrategySpec


class ScreenStatus(StrEnum):
    OK = "ok"
    UNSUPPORTED = "unsupported"  # a block the screen cannot reproduce: run Backtrader
    ERROR = "error"  # what Backtrader would also fail on (a division by zero in an indicator)


class ScreenResult(BaseModel):
    """One spec on one symbol's window."""

    symbol: str
    status: ScreenStatus
    trades: list[Trade] = Field(default_factory=list)
    metrics: Metrics | None = None
    error: str | None = None
    # The books' view, for aggregating symbols as ``backtest.run`` does (not printed).
    result: BacktestResult | None = Field(default=None, exclude=True)


@dataclass
class Window:
    """One symbol's fed bars for one fold: warm-up start to fold end, as the engine feeds them."""

    symbol: str
    bars: blocks.Bars
    index: pd.DatetimeIndex
    first: int  # the first bar on or after the fold's start: orders allowed from here

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, fold: Fold, symbol: str = "SYMBOL") -> Window:
        """The window of ``fold`` over ``frame``; raises ValueError when it has no usable bars."""
        fed = feed_frame(frame, fold)
        if fed.empty or fed.index[-1].date() < fold.start:
            raise ValueError(f"no bars for {symbol} in {fold.start}..{fold.end}")
        values = fed.to_numpy(dtype=np.float64)
        if not np.isfinite(values).all():
            raise ValueError(f"{symbol}: the bars hold NaN or infinite values")
        index = pd.DatetimeIndex(fed.index)
        first = int(index.searchsorted(pd.Timestamp(fold.start), "left"))
        bars = blocks.Bars(*(values[:, k] for k in range(5)))
        return cls(symbol=symbol, bars=bars, index=index, first=first)

    @functools.cached_property
    def days(self) -> list[str]:
        """ISO date of every bar (computed once per window, shared by every spec screened)."""
        return np.datetime_as_string(self.index.to_numpy(), unit="D").tolist()

    @functools.cached_property
    def return_keys(self) -> list[str]:
        """The period keys of the returns from the fold's start (``index_keys``): the ISO
        dates when every bar is at midnight."""
        index = self.index
        if index.tz is None and (index == index.normalize()).all():
            return self.days[self.first :]
        return index_keys(index[self.first :])


@dataclass(frozen=True)
class Evaluation(BooksEquity):
    """The screen's raw outcome on one window: the fills as arrays and the books per bar.

    Cheap to make (what a sweep ranks on: ``sharpe``); ``trades`` and ``result`` build the
    typed views on demand.
    """

    window: Window
    fill_bars: np.ndarray  # bar index of each fill
    fill_sizes: np.ndarray  # signed
    fill_prices: np.ndarray  # the booked price
    values: np.ndarray  # the broker's value at every bar's close
    positions: np.ndarray  # the position at every bar's close
    refused: int  # orders the broker refused (not enough cash)
    cash: float  # the starting cash
    borrow: float = 0.0  # the borrow fee per bar held short (``backtest.borrow``)

    def borrow_paid(self) -> float:
        """The borrow fees debited at the fold's bars (up to a bankruptcy), as the books sum
        them."""
        if not self.borrow:
            return 0.0
        due = borrow_by_bar(self.positions[:, None], [self.window.bars.close], self.borrow)
        bust = self.bankrupt_at()
        end = len(due) if bust is None else bust + 1
        return float(due[self.window.first : end].sum())

    def reported_prices(self) -> np.ndarray:
        """The prices backtrader reports (``executed.price``, ``(0.0 + size * price) / size``:
        the booked price up to an ulp), as the books' fills carry them."""
        sizes = self.fill_sizes
        return (0.0 + sizes * self.fill_prices) / sizes

    def trades(self) -> list[Trade]:
        """The round trips of the fills, priced as the books report them."""
        days = self.window.days
        fills = [
            FillRow(days[i], size, price)
            for i, size, price in zip(
                self.fill_bars.tolist(),
                self.fill_sizes.tolist(),
                self.reported_prices().tolist(),
                strict=True,
            )
        ]
        return pair_fills(self.window.symbol, fills)


def evaluate(
    spec: StrategySpec,
    window: Window,
    *,
    costs: CostModel | None = None,
    bars_per_year: int = 252,
) -> Evaluation:
    """Run ``spec`` on ``window``; raises ``Unsupported`` or ``IndicatorZeroDivision``.

    ``bars_per_year`` must be what the Backtrader code was rendered with (it annualises the
    volatility-target sizing).
    """
    costs = costs or CostModel()
    blocks.check_supported(spec)
    shorts = is_short_enabled(spec)
    bars = window.bars
    cond = blocks.conditions([spec], bars, shorts)
    start, ready = cond.readiness()
    modes, knobs = kernel_settings(spec, costs, bars_per_year)
    modes[sf.M_START] = int(start[0])
    modes[sf.M_FIRST] = window.first
    n = len(bars)
    created, executed = np.empty(n, np.int64), np.empty(n, np.int64)
    sizes, prices, values, positions = np.empty(n), np.empty(n), np.empty(n), np.zeros(n)
    # every entry block sets all four signals (mypy sees Conditions' None defaults)
    n_fills, refused = sf.simulate(
        bars.open,
        bars.high,
        bars.low,
        bars.close,
        ready.of(0),
        cond.long_entry.of(0),  # type: ignore[union-attr]
        cond.short_entry.of(0),  # type: ignore[union-attr]
        cond.long_exit.of(0),  # type: ignore[union-attr]
        cond.short_exit.of(0),  # type: ignore[union-attr]
        np.zeros(n) if cond.atr is None else cond.atr.of(0),
        np.zeros(n) if cond.realised_sd is None else cond.realised_sd.of(0),
        np.array(modes, dtype=np.int64),
        np.array(knobs, dtype=np.float64),
        values,
        positions,
        created,
        executed,
        sizes,
        prices,
        True,
    )
    return Evaluation(
        window=window,
        fill_bars=executed[:n_fills],
        fill_sizes=sizes[:n_fills],
        fill_prices=prices[:n_fills],
        values=values,
        positions=positions,
        refused=int(refused),
        cash=costs.cash,
        borrow=knobs[sf.K_BORROW],
    )


def kernel_settings(
    spec: StrategySpec, costs: CostModel, bars_per_year: int
) -> tuple[list[int], list[float]]:
    """``simulate``'s ``modes`` and ``knobs`` for ``spec`` (a checked one), but for the two
    slots a window sets: ``M_START`` (the conditions' minperiod) and ``M_FIRST``."""
    p = spec.parameters
    # Filled as lists, then one array each: item by item, numpy's setitem costs more.
    modes = [0] * sf.N_MODES
    modes[sf.M_SHORTS] = int(is_short_enabled(spec))
    modes[sf.M_EXITS] = sum(blocks.EXIT_BITS[x] for x in set(spec.exits))
    modes[sf.M_SIZING] = blocks.SIZING_CODES[spec.sizing]
    modes[sf.M_STOP] = blocks.stop_mode(spec)
    knobs = [0.0] * sf.N_KNOBS
    for slot, name in KNOB_PARAMS:
        if name in p:
            knobs[slot] = float(p[name])
    knobs[sf.K_MAX_HOLD] = float(p.get("max_hold_bars", math.inf))
    knobs[sf.K_SQRT_BPY] = math.sqrt(bars_per_year)
    knobs[sf.K_CASH] = costs.cash
    knobs[sf.K_RATE] = costs.commission_pct / 100.0
    knobs[sf.K_SLIP] = costs.slippage_pct / 100.0
    knobs[sf.K_MAX_LEVERAGE] = costs.max_gross_leverage
    knobs[sf.K_BORROW] = per_bar_rate(costs.borrow_pct, bars_per_year)
    return modes, knobs


KNOB_PARAMS = (
    (sf.K_STOP_LOSS, "stop_loss_pct"),
    (sf.K_TAKE_PROFIT, "take_profit_pct"),
    (sf.K_ATR_MULT, "atr_stop_mult"),
    (sf.K_TRAIL, "trail_pct"),
    (sf.K_FRACTION, "position_fraction"),
    (sf.K_RISK, "risk_pct"),
    (sf.K_TARGET_VOL, "target_vol"),
)


def screen(
    spec: StrategySpec,
    window: Window,
    *,
    costs: CostModel | None = None,
    periods_per_year: int = 252,
    bars_per_year: int = 252,
) -> ScreenResult:
    """``spec`` on ``window`` with its trades and metrics. Never raises for a spec: a block it
    cannot reproduce is ``unsupported``, a division by zero backtrader would raise ``error``.

    ``periods_per_year`` annualises the metrics; ``bars_per_year`` is the rendering's.
    """
    costs = costs or CostModel()
    symbol = window.symbol
    try:
        run = evaluate(spec, window, costs=costs, bars_per_year=bars_per_year)
    except blocks.Unsupported as exc:
        return ScreenResult(symbol=symbol, status=ScreenStatus.UNSUPPORTED, error=str(exc))
    except IndicatorZeroDivision as exc:
        return ScreenResult(
            symbol=symbol, status=ScreenStatus.ERROR, error=f"ZeroDivisionError: {exc}"
        )
    result = books_result(spec, run, costs, periods_per_year)
    return ScreenResult(
        symbol=symbol,
        status=ScreenStatus.OK,
        trades=run.trades(),
        metrics=result.metrics,
        result=result,
    )


def screen_portfolio(
    spec: StrategySpec,
    universe: sp.PortfolioWindow,
    *,
    costs: CostModel | None = None,
    periods_per_year: int = 252,
    bars_per_year: int = 252,
) -> ScreenResult:
    """A portfolio-scope spec over the universe's window (``backtest.screen.portfolio``): one
    result, symbol ``PORTFOLIO``; never raises for a spec, as ``screen``."""
    costs = costs or CostModel()
    try:
        run = sp.evaluate(spec, universe, costs=costs, bars_per_year=bars_per_year)
    except blocks.Unsupported as exc:
        return ScreenResult(symbol=sp.LABEL, status=ScreenStatus.UNSUPPORTED, error=str(exc))
    except IndicatorZeroDivision as exc:
        return ScreenResult(
            symbol=sp.LABEL, status=ScreenStatus.ERROR, error=f"ZeroDivisionError: {exc}"
        )
    result = sp.books_result(spec, run, periods_per_year)
    return ScreenResult(
        symbol=sp.LABEL,
        status=ScreenStatus.OK,
        trades=run.trades(),
        metrics=result.metrics,
        result=result,
    )


def _trade_pnls(sizes: np.ndarray, prices: np.ndarray, rate: float) -> list[float]:
    """backtrader's ``Trade`` pnl net of commission, per closed round trip. A catalogue
    strategy's fills alternate: an opening fill from flat, then the fill that closes it."""
    pnls: list[float] = []
    for k in range(1, len(sizes), 2):
        opened, entry = float(sizes[k - 1]), float(prices[k - 1])
        closed, exit_price = float(sizes[k]), float(prices[k])
        commission = 0.0 + abs(opened) * rate * entry
        commission += abs(closed) * rate * exit_price
        trade_price = (0.0 * 0.0 + opened * entry) / opened
        pnl = 0.0 + -closed * (exit_price - trade_price) * 1.0
        pnls.append(pnl - commission)
    return pnls


def books_result(
    spec: StrategySpec, run: Evaluation, costs: CostModel, periods_per_year: int = 252
) -> BacktestResult:
    """The figures ``backtest.books.keep_books`` computes from the same replay."""
    window, first = run.window, run.window.first
    n = len(run.values)
    sizes, prices = run.fill_sizes, run.fill_prices
    equity = run.equity()
    bars_in_market = int((run.positions[first:n] != 0).sum())
    reported = run.reported_prices()
    inside = run.fill_bars >= first
    traded = float(sum((np.abs(sizes[inside]) * reported[inside]).tolist()))
    pnls = _trade_pnls(sizes, prices, costs.commission_pct / 100.0)
    metrics = compute_metrics(
        equity,
        trade_pnls=pnls,
        bars_in_market=bars_in_market,
        periods_per_year=periods_per_year,
        traded_notional=traded,
    ).model_copy(update={"orders_rejected": run.refused, "borrow_paid": run.borrow_paid()})
    # Built without validation: the fields are already the contract's types, and validating
    # the per-bar lists would cost more than the whole screen.
    return BacktestResult.model_construct(
        job_id=f"screen|{window.symbol}",
        variant_id=spec.trial_key(),
        symbol=window.symbol,
        fold=0,
        # Bankrupt: the books' status; its returns end at the bust (the trades and turnover
        # are the run's: a bankrupt set only has to rank last, Backtrader's books judge it).
        status=JobStatus.OK if run.bankrupt_at() is None else JobStatus.BANKRUPT,
        metrics=metrics,
        return_dates=window.return_keys[: len(equity) - 1],
        returns=(equity[1:] / equity[:-1] - 1.0).tolist(),
        trade_pnls=pnls,
        bars_in_market=bars_in_market,
        traded_notional=traded,
    )


# ---------------------------------------------------------------------------- CLI


def _bad(argument: str, message: str) -> NoReturn:
    refuse("backtest.screen", argument, message)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m backtest.screen``."""
    p = OneLineParser(prog="python -m backtest.screen", description=__doc__.splitlines()[0])
    p.add_argument("spec", type=Path, help="a spec JSON (the `spec` object of variants.json)")
    add_window_arguments(p)
    p.add_argument("--bars-per-year", type=int, default=252, help="as the code was rendered")
    return p


def main(argv: list[str] | None = None) -> int:
    """Screen the spec on every ticker and fold, print the results as JSON; the exit code."""
    args = build_parser().parse_args(argv)
    from strategies.render import read_spec

    try:
        spec = read_spec(args.spec)
    except ValueError as exc:
        _bad("SPEC", str(exc))
    tickers = checked_tickers("backtest.screen", args)
    if args.cash <= 0 or args.warmup_days < 0 or args.bars_per_year < 1:
        _bad("--cash/--warmup-days/--bars-per-year", "must be positive")

    from backtest.metrics import strict_json
    from backtest.run import portfolio_metrics

    frames, fold, costs, ppy, _ = load_window("backtest.screen", args, tickers)
    if whole_universe(getattr(spec, "scope", "symbol")):  # the universe at once: one result
        try:
            universe = sp.PortfolioWindow.from_frames(frames, fold)
        except ValueError as exc:
            _bad("--start/--end", str(exc))
        one = screen_portfolio(
            spec, universe, costs=costs, periods_per_year=ppy, bars_per_year=args.bars_per_year
        )
        print(json.dumps(strict_json(_report([one], ppy, portfolio_metrics)), allow_nan=False))
        return 0
    results: list[ScreenResult] = []
    for sym, frame in frames.items():
        try:
            window = Window.from_frame(frame, fold, sym)
        except ValueError as exc:
            _bad("--start/--end", str(exc))
        results.append(
            screen(
                spec, window, costs=costs, periods_per_year=ppy, bars_per_year=args.bars_per_year
            )
        )
    print(json.dumps(strict_json(_report(results, ppy, portfolio_metrics)), allow_nan=False))
    return 0


def _report(results: list[ScreenResult], ppy: int, portfolio: Any) -> dict[str, Any]:
    """One result: its figures; several: the worst status, every trade, the equal-weight
    portfolio's metrics (as ``backtest.run``) and the per-ticker figures."""
    order = {ScreenStatus.OK: 0, ScreenStatus.ERROR: 1, ScreenStatus.UNSUPPORTED: 2}
    worst = max(results, key=lambda r: order[r.status])
    report: dict[str, Any] = {
        "status": worst.status.value,
        "trades": [t.model_dump() for r in results for t in r.trades],
    }
    if len(results) == 1:
        report["metrics"] = worst.metrics.model_dump(mode="json") if worst.metrics else None
        report["error"] = worst.error
        return report
    ok = [r.result for r in results if r.result is not None]
    report["metrics"] = portfolio(ok, ppy) if ok else None
    report["error"] = "; ".join(f"{r.symbol}: {r.error}" for r in results if r.error) or None
    report["per_ticker"] = {
        r.symbol: {
            "status": r.status.value,
            "metrics": r.metrics.model_dump(mode="json") if r.metrics else None,
            "error": r.error,
        }
        for r in results
    }
    return report


if __name__ == "__main__":
    raise SystemExit(main())
