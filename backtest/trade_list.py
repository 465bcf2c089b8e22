"""Round trips from fills: the ``trades`` list that the screen and ``backtest.run --trades`` print.

A trade runs flat to flat per symbol, the books' convention (``backtest.books``): it opens with
the fill that leaves a flat position, closes with the fill that makes it flat again, and a fill
that crosses zero closes one trade and opens the next. Prices are size-weighted averages of the
opening and of the closing fills (one fill each for every catalogue strategy). A trade still open
at the end has no exit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel


class Trade(BaseModel):
    """One round trip; ``size`` is signed (negative: a short)."""

    symbol: str
    entry_date: str  # ISO date of the opening fill
    exit_date: str | None  # None: still open at the end of the window
    size: float
    entry_price: float
    exit_price: float | None


class FillRow(NamedTuple):
    """One accepted fill: its bar's ISO date, signed size and booked price."""

    date: str
    size: float
    price: float


class _Open:
    def __init__(self, date: str) -> None:
        self.date = date
        self.opened: list[tuple[float, float]] = []
        self.closed: list[tuple[float, float]] = []


def _average(parts: list[tuple[float, float]]) -> float:
    if len(parts) == 1:
        return parts[0][1]
    qty = sum(abs(q) for q, _ in parts)
    return sum(abs(q) * p for q, p in parts) / qty


def pair_fills(symbol: str, fills: Iterable[FillRow]) -> list[Trade]:
    """Pair one symbol's fills (in execution order) into flat-to-flat trades."""
    trades: list[Trade] = []
    position = 0.0
    current: _Open | None = None
    for fill in fills:
        size = fill.size
        while size:
            if current is None:
                current = _Open(fill.date)
            if position == 0.0 or (position > 0) == (size > 0):
                current.opened.append((size, fill.price))
                position += size
                break
            part = size if abs(size) <= abs(position) else -position
            current.closed.append((part, fill.price))
            position += part
            size -= part
            if position == 0.0:
                trades.append(_done(symbol, current, fill.date))
                current = None
    if current is not None and current.opened:
        trades.append(_done(symbol, current, None))
    return trades


def _done(symbol: str, trade: _Open, exit_date: str | None) -> Trade:
    return Trade(
        symbol=symbol,
        entry_date=trade.date,
        exit_date=exit_date,
        size=sum(q for q, _ in trade.opened),
        entry_price=_average(trade.opened),
        exit_price=_average(trade.closed) if exit_date is not None else None,
    )


def trades_from_trace_fills(symbol: str, rows: list[list]) -> list[Trade]:
    """Trades from the trace's fill rows (``backtest.trace.fill_rows``: created, executed,
    side, size, price, fee[, symbol]); a portfolio job's rows are split by their symbol."""
    by_symbol: dict[str, list[FillRow]] = {}
    for row in rows:
        name = str(row[6]) if len(row) > 6 else symbol
        by_symbol.setdefault(name, []).append(FillRow(str(row[1]), float(row[3]), float(row[4])))
    return [t for name, fills in by_symbol.items() for t in pair_fills(name, fills)]
