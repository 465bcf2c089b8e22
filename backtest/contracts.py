"""Typed contracts of the backtest layer: jobs in, results out.

A job carries everything a worker needs (code, bars, costs), so it can run in
another process; a result never carries an exception object, only text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from backtest.margin import MAX_GROSS_LEVERAGE


class CostModel(BaseModel):
    """Execution costs. Commission and slippage are percent per side, of traded notional;
    the borrow fee is percent a year of a short's market value, accrued per bar held short
    (``backtest.borrow``)."""

    commission_pct: float = Field(0.1, ge=0, le=5)
    slippage_pct: float = Field(0.05, ge=0, le=5)
    borrow_pct: float = Field(0.0, ge=0, le=100)
    cash: float = Field(100_000.0, gt=0)
    # The initial margin (``backtest.margin``): gross exposure after an opening fill over
    # equity. The broker refuses an order beyond it; the books call a fill beyond it an
    # integrity error. Above the default is deliberate leverage.
    max_gross_leverage: float = Field(MAX_GROSS_LEVERAGE, gt=0, le=1000)


class Fold(BaseModel):
    """A walk-forward evaluation window.

    Bars from ``warmup_start`` feed the indicators; orders are only allowed and
    performance only measured from ``start`` to ``end`` (both inclusive).
    """

    index: int
    warmup_start: date
    start: date
    end: date


@dataclass(frozen=True)
class BacktestJob:
    """One unit of work: one variant's code on one symbol, or on a whole universe (a
    portfolio job: ``bars`` maps each symbol to its bars, fed in that order as
    ``self.datas``), over one window."""

    job_id: str
    variant_id: str
    code: str
    symbol: str  # the symbol, or a portfolio job's label
    # DatetimeIndex, columns open/high/low/close/volume (float64); or symbol -> such frame
    bars: pd.DataFrame | dict[str, pd.DataFrame]
    fold: Fold
    costs: CostModel = field(default_factory=CostModel)
    params: dict[str, float | int] = field(default_factory=dict)
    periods_per_year: int = 252
    timeout_s: float = 120.0
    # Feed the run only the bars up to the first one dated later than this (the engine cuts
    # the feed, so the run cannot tell; the lookahead check cuts its bars itself instead).
    stop_after: date | None = None

    def feeds(self) -> list[tuple[str, pd.DataFrame]]:
        """(name, bars) of each data feed, in ``self.datas`` order."""
        if isinstance(self.bars, dict):
            return list(self.bars.items())
        return [(self.symbol, self.bars)]

    def map_bars(self, fn: Callable[[Any], Any]) -> BacktestJob:
        """A copy with ``fn`` applied to each feed's bars (one frame, or each of a portfolio's)."""
        if isinstance(self.bars, dict):
            return replace(self, bars={s: fn(b) for s, b in self.bars.items()})
        return replace(self, bars=fn(self.bars))


class JobStatus(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    # The child's fill log failed the trusted side's books (an impossible fill, a cash change
    # no fill explains, a log of another job): its figures are not believed, the variant is out.
    INTEGRITY_ERROR = "integrity_error"
    # The equity reached zero or below (``backtest.margin``): the run ends on that bar, its
    # metrics (total return -100 %) are of the equity until then, and the variant is out.
    BANKRUPT = "bankrupt"


class Metrics(BaseModel):
    """Performance of one equity curve. Percent fields are in percent (12.5 = 12.5%).

    ``sharpe``/``sortino`` are annualised; ``sharpe_per_period`` is the raw per-bar
    figure the deflated-Sharpe statistics need. NaN is never used: undefined
    ratios are ``None``.
    """

    sharpe: float | None
    sharpe_per_period: float | None
    sortino: float | None
    cagr_pct: float
    total_return_pct: float
    max_drawdown_pct: float  # positive number: 23.0 means a 23% peak-to-trough loss
    win_rate_pct: float | None
    profit_factor: float | None
    n_trades: int
    exposure_pct: float
    final_value: float
    n_obs: int
    skew: float | None
    kurtosis: float | None  # raw (normal = 3)
    # Traded notional per year over the mean equity (2.0 = the book turned over twice a year;
    # a round trip of the whole book counts 2); None when the fills were not given.
    turnover_annual: float | None = None
    avg_holding_bars: float | None = None  # bars in the market per closed trade
    # Orders the broker refused (margin: not enough cash; rejected): a strategy whose entries
    # are refused trades less than its code says, and its win rate is of the trades it got.
    orders_rejected: int = 0
    # The borrow fee the shorts paid over the window (``backtest.borrow``; 0 without one):
    # in the equity above, not in the trade pnls.
    borrow_paid: float = 0.0


class BacktestResult(BaseModel):
    job_id: str
    variant_id: str
    symbol: str
    fold: int
    status: JobStatus
    metrics: Metrics | None = None
    error: str | None = None
    duration_s: float = 0.0
    # Per-period strategy returns and their dates (ISO), so results can be
    # aggregated across symbols and folds without re-running anything.
    return_dates: list[str] = Field(default_factory=list)
    returns: list[float] = Field(default_factory=list)
    trade_pnls: list[float] = Field(default_factory=list)
    bars_in_market: int = 0
    traded_notional: float = 0.0  # sum of |size| x price of the fills inside the window
