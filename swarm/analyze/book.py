"""The account the risk engine checks a trade against: a book of open positions and cash.

Without a book, ``max_positions``, ``exposure_cap``, ``daily_loss_cap`` and the margin check
judge every trade as if it were the account's first, so two of them can never fail. The CLI
reads a book (``--book``: a small JSON, or the ``book.json`` an earlier analysis wrote); the
family replay keeps a :class:`ReplayBook` across its decisions and tickers, date by date, so
the limits bite in backtests as they would on a desk.

Pure or deterministic throughout: a book's state at a date depends only on the bars up to
that date (a position's exit is the first stop or target touched, or the horizon's close,
found from the bars after its entry and counted only once its exit date has come).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from swarm.analyze.contracts import Action, Decision, Portfolio

BOOK_FILE = "book.json"  # what an analysis folder holds: the book after its decision


class Holding(BaseModel):
    """One open position: signed quantity (+ long, - short) valued at ``price``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ticker: str = Field(min_length=1, max_length=16)
    quantity: int = Field(description="shares: positive long, negative short; never 0")
    price: float = Field(gt=0, description="the price it is valued at (its entry or last close)")

    @field_validator("quantity")
    @classmethod
    def _nonzero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("a holding of 0 shares is no position; remove it")
        return v

    @property
    def notional(self) -> float:
        """The holding's absolute market value (quantity × price)."""
        return abs(self.quantity) * self.price


class Book(BaseModel):
    """``--book FILE``: what the account holds when the decision is made.

    ``cash`` None: the capital less what the holdings tie up (longs at their notional,
    shorts at ``short_margin`` times theirs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capital: float | None = Field(None, gt=0, description="None: the CLI's --capital")
    cash: float | None = None
    loss_today: float = Field(0.0, ge=0, description="realised loss so far today")
    positions: list[Holding] = Field(default_factory=list)


def tied_up(positions: list[Holding], short_margin: float) -> float:
    """Cash the holdings need: a long its notional, a short ``short_margin`` times its own."""
    return sum(h.notional * (short_margin if h.quantity < 0 else 1.0) for h in positions)


def portfolio_of(book: Book, *, capital: float, short_margin: float) -> Portfolio:
    """The engine's view of ``book``: how many positions, their gross exposure, the cash."""
    cash = book.cash if book.cash is not None else capital - tied_up(book.positions, short_margin)
    return Portfolio(
        open_positions=len(book.positions),
        gross_exposure=sum(h.notional for h in book.positions),
        cash=cash,
        loss_today=book.loss_today,
    )


def book_after(book: Book, decision: Decision, *, capital: float, short_margin: float) -> Book:
    """``book`` with the decision's trade added at its entry (unchanged for a HOLD), so the
    next analysis can pass ``--book`` this analysis's folder."""
    base = book.model_copy(update={"capital": book.capital or capital})
    if decision.action == Action.HOLD or decision.trader is None or decision.risk.size < 1:
        return base
    sign = 1 if decision.action == Action.BUY else -1
    held = Holding(
        ticker=decision.ticker, quantity=sign * decision.risk.size, price=decision.trader.entry
    )
    positions = [*book.positions, held]
    cash = None if book.cash is None else book.cash - tied_up([held], short_margin)
    return base.model_copy(update={"positions": positions, "cash": cash})


# --------------------------------------------------------------------------- the replay's book


def first_exit(
    direction: int,
    *,
    stop: float,
    target: float,
    low: np.ndarray,
    high: np.ndarray,
    close: np.ndarray,
    horizon: int,
) -> tuple[int | None, float]:
    """(offset of the exit bar, exit price) over the bars after the entry: the first level
    touched (the stop when both are in one bar, as the reviewer counts it), else the close
    of the horizon's bar; (None, nan) when the data ends first."""
    n = min(horizon, len(close))
    for i in range(n):
        hit_stop = low[i] <= stop if direction > 0 else high[i] >= stop
        hit_target = high[i] >= target if direction > 0 else low[i] <= target
        if hit_stop:
            return i, stop
        if hit_target:
            return i, target
    return (horizon - 1, float(close[horizon - 1])) if len(close) >= horizon else (None, math.nan)


@dataclass(frozen=True)
class Position:
    ticker: str
    direction: int  # +1 long, -1 short
    quantity: int
    entry: float
    exit_day: pd.Timestamp | None  # None: still open when the data ends
    exit_price: float


class ReplayBook:
    """The account a replay's decisions share, across tickers, in date order.

    Call :meth:`portfolio` at each decision date (oldest first), then :meth:`record` with
    the decision taken there. A position opens at the decision's entry and leaves at the
    first of its stop, target, horizon or a decision the other way on its ticker, the exits
    the generated strategy uses. Cash is the capital plus realised P&L less what the open
    positions tie up; exposure is marked at each ticker's last close up to the date."""

    def __init__(
        self, *, capital: float, short_margin: float, bars: Mapping[str, pd.DataFrame]
    ) -> None:
        self.capital = capital
        self.short_margin = short_margin
        self.open: dict[str, Position] = {}
        self.realised = 0.0
        self._closed_on: dict[pd.Timestamp, float] = {}  # day -> realised loss that day
        self._bars = {t: _arrays(f) for t, f in bars.items()}

    def _settle(self, day: pd.Timestamp) -> None:
        for ticker, p in list(self.open.items()):
            if p.exit_day is not None and p.exit_day <= day:
                self._close(ticker, p.exit_day, p.exit_price)

    def _close(self, ticker: str, day: pd.Timestamp, price: float) -> None:
        p = self.open.pop(ticker)
        pnl = p.direction * p.quantity * (price - p.entry)
        self.realised += pnl
        if pnl < 0:
            key = day.normalize()
            self._closed_on[key] = self._closed_on.get(key, 0.0) - pnl

    def portfolio(self, day: pd.Timestamp) -> Portfolio:
        """The book as the risk engine sees it after ``day``'s close."""
        self._settle(day)
        exposure = sum(p.quantity * self._mark(p, day) for p in self.open.values())
        tied = sum(
            p.quantity * p.entry * (self.short_margin if p.direction < 0 else 1.0)
            for p in self.open.values()
        )
        return Portfolio(
            open_positions=len(self.open),
            gross_exposure=exposure,
            cash=self.capital + self.realised - tied,
            loss_today=self._closed_on.get(day.normalize(), 0.0),
        )

    def _mark(self, p: Position, day: pd.Timestamp) -> float:
        index, _, _, close = self._bars[p.ticker]
        i = int(index.searchsorted(day, side="right")) - 1
        return float(close[i]) if i >= 0 else p.entry

    def record(self, ticker: str, day: pd.Timestamp, decision: Decision) -> None:
        """Book ``decision`` (taken after ``day``'s close): a trade the other way closes the
        held position at the close; an approved trade on a flat ticker opens one."""
        if decision.action == Action.HOLD or decision.trader is None or decision.risk.size < 1:
            return
        direction = 1 if decision.action == Action.BUY else -1
        held = self.open.get(ticker)
        if held is not None:
            if held.direction != direction:  # the strategy exits on it and does not reverse
                self._close(ticker, day, self._mark(held, day))
            return
        index, low, high, close = self._bars[ticker]
        start = int(index.searchsorted(day, side="right"))
        t = decision.trader
        off, price = first_exit(
            direction,
            stop=t.stop,
            target=t.target,
            low=low[start:],
            high=high[start:],
            close=close[start:],
            horizon=t.horizon_days,
        )
        exit_day = None if off is None else pd.Timestamp(index[start + off])
        self.open[ticker] = Position(
            ticker, direction, decision.risk.size, t.entry, exit_day, price
        )


def _arrays(frame: pd.DataFrame) -> tuple[pd.DatetimeIndex, np.ndarray, np.ndarray, np.ndarray]:
    f = frame.sort_index()
    return (
        pd.DatetimeIndex(f.index),
        f["low"].to_numpy(float),
        f["high"].to_numpy(float),
        f["close"].to_numpy(float),
    )
