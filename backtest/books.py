"""The trusted side keeps the books: a job's figures come from its fill log, replayed here.

The code that runs a strategy (a sandboxed child, or the engine in-process) is believed in
nothing. It hands back a ``FillLog``: every fill (bar, side, size, price, commission, order
type), the broker value it saw at every bar, and how many orders the broker refused. This
module, which holds the same bars and the same cost model, then

1. checks every fill against the data: its bar exists and follows the bar the order was
   placed on, on or after the fold's start; a market order's price is the bar's open with
   the slippage (capped by the bar's range, as the broker does), a close order's the bar's
   close, any other order's within the bar's range; its commission is the cost model's;
   the cash it needs is there; a fill that opens exposure leaves it within the initial
   margin (``backtest.margin``: the broker refuses the opening part of an order beyond it);
   it answers an order the run placed (the recorder copies each order's feed, bar, side,
   size, type and limit or stop price when the strategy places it): the order's bar, type,
   side and feed, no more than its size, and for a limit or stop order backtrader's price
   for its price as placed, on the first bar that reaches it (a bracket's child waits for
   its parent, so only its price is held to the rule);
2. replays cash, positions and equity itself, with backtrader's own arithmetic (the same
   float operations in the same order, so an honest run's figures are bit-identical);
3. compares the value the child saw at every bar with the replay: a difference is a cash
   change no fill explains (``broker.add_cash``, an edited analyzer);
4. computes the metrics from its own replay (``backtest.metrics``); a run whose equity
   reaches zero or below is ``status: "bankrupt"`` and ends on that bar, at zero: no return
   is computed on non-positive equity.

Any failed check raises ``IntegrityError`` naming the first discrepancy; ``account`` turns it
into a ``status: "integrity_error"`` result, which the gate treats as a veto.

Conventions of the replay (documented, not hidden): a trade runs flat to flat per symbol
(backtrader's ``tradeid`` is not believed from the child, so trades are never split by it);
in a portfolio job (several feeds), which rebalances positions it rarely closes, every fill
that reduces a position realises a trade: the part sold or covered against the average price,
net of that fill's commission;
an index feed (``strategies.regime``: a regime filter's SPY, QQQ or VIX, named
``index:SYMBOL``) is fed on the same calendar but never traded: a fill on it is an integrity
error; the broker is backtrader's default stock-like one of ``backtest.engine`` (percentage
commission, percentage slippage on open, limit and match, never outside the bar's range,
short sales credit cash), with the lab's borrow fee on shorts (``backtest.borrow``: debited
at the start of each bar, before its fills; in the equity and the metrics' ``borrow_paid``,
not in the trade pnls).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import pandas as pd

from backtest.borrow import borrow_by_bar, borrow_due, cash_by_bar, per_bar_rate
from backtest.contracts import BacktestJob, BacktestResult, CostModel, Fold, JobStatus
from backtest.data import OHLCV
from backtest.margin import MARGIN_RTOL, bankrupt_at, exposure_after, margin_refuses, opens
from backtest.metrics import compute_metrics
from backtest.period_keys import index_keys
from strategies.regime import is_index_feed

EXEC_TYPES = ("Market", "Close", "Limit", "Stop", "StopLimit", "StopTrail", "StopTrailLimit")
MAX_FILLS = 200_000  # a log longer than this is not a backtest of ours
VALUE_RTOL = 1e-9  # the child's value vs the replay: beyond this a cash change is unexplained
PRICE_RTOL = 1e-12  # a market or close fill vs the price the trusted side computes


class IntegrityError(Exception):
    """The fill log contradicts the data, the costs or itself (the message says where)."""


@dataclass(frozen=True)
class Fill:
    """One fill as the books accept it (dates of the fed bars).

    ``price`` is what backtrader reports as the order's ``executed.price``, a size-weighted
    average of its execution bits, ``(0.0 + size * price) / size``: the booked price up to
    an ulp. Turnover and the trace use it, as they did when the engine read it.
    """

    created: date
    executed: date
    side: str  # "buy" | "sell"
    size: float
    price: float
    commission: float
    symbol: str = ""  # the feed's name (a portfolio job's fills span its symbols)


@dataclass(frozen=True)
class ClaimedFill:
    """One fill as the child reports it: bar positions in the fed frame, from its first bar."""

    data: int  # which data feed (0 for a one-symbol job)
    created: int  # bar the order was placed on
    executed: int  # bar it filled on
    side: str
    size: float
    price: float
    commission: float
    exectype: str
    order: int = -1  # which claimed order it answers (its position in ``FillLog.orders``)

    def row(self) -> list[Any]:
        """The fill as a JSON row, fields in the order the reader expects."""
        return [
            self.data,
            self.created,
            self.executed,
            self.side,
            self.size,
            self.price,
            self.commission,
            self.exectype,
            self.order,
        ]


@dataclass(frozen=True)
class ClaimedOrder:
    """One order as the engine's recorder copied it when the strategy placed it (bar
    position in the fed frame): what the books hold its fills to."""

    data: int
    created: int  # bar it was placed on
    side: str
    size: float  # as placed (negative for a sell)
    exectype: str
    price: float | None  # the limit or stop price as placed (None: a market order)
    limit: float | None  # a stop-limit's limit price
    linked: bool  # part of a bracket (has a parent): it waits for its parent's fill

    def row(self) -> list[Any]:
        """The order as a JSON row, fields in the order the reader expects."""
        return [
            self.data,
            self.created,
            self.side,
            self.size,
            self.exectype,
            self.price,
            self.limit,
            self.linked,
        ]


@dataclass
class FillLog:
    """What a run claims: its fills, the broker value at every bar it ran, rejected orders,
    and the orders it placed.

    ``orders`` None is a log built by hand in this process (unit tests of the replay): its
    fills are not matched to orders. A child's log always carries its orders (``from_json``
    reads a list), and so does the engine's own.
    """

    fills: list[ClaimedFill] = field(default_factory=list)
    values: np.ndarray = field(default_factory=lambda: np.empty(0))
    orders_rejected: int = 0
    orders: list[ClaimedOrder] | None = None

    def to_json(self) -> dict[str, Any]:
        """The books as JSON; values as base64 little-endian doubles, so they round-trip exactly."""
        raw = np.asarray(self.values, dtype="<f8").tobytes()
        return {
            "fills": [f.row() for f in self.fills],
            "values": base64.b64encode(raw).decode(),
            "orders_rejected": int(self.orders_rejected),
            "orders": [o.row() for o in self.orders or []],
        }

    @classmethod
    def from_json(cls, payload: Any) -> FillLog:
        """Parse a child's log strictly; anything malformed is an ``IntegrityError``."""
        if not isinstance(payload, dict):
            raise IntegrityError("the fill log is not an object")
        rows, values, refused = (payload.get(k) for k in ("fills", "values", "orders_rejected"))
        if not isinstance(rows, list) or len(rows) > MAX_FILLS:
            raise IntegrityError(f"the fill log's fills are not a list of at most {MAX_FILLS}")
        if not isinstance(refused, int) or isinstance(refused, bool) or refused < 0:
            raise IntegrityError("orders_rejected is not a non-negative integer")
        try:
            raw = base64.b64decode(values, validate=True) if isinstance(values, str) else b"?"
        except ValueError as exc:
            raise IntegrityError(f"the claimed values are not base64: {exc}") from None
        if len(raw) % 8:
            raise IntegrityError("the claimed values are not float64s")
        fills = []
        for k, row in enumerate(rows, 1):
            fills.append(_claimed_fill(k, row))
        placed = payload.get("orders")
        if not isinstance(placed, list) or len(placed) > MAX_FILLS:
            raise IntegrityError(f"the fill log's orders are not a list of at most {MAX_FILLS}")
        orders = [_claimed_order(k, row) for k, row in enumerate(placed, 1)]
        return cls(
            fills=fills,
            values=np.frombuffer(raw, dtype="<f8"),
            orders_rejected=refused,
            orders=orders,
        )


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _claimed_fill(k: int, row: Any) -> ClaimedFill:
    ok = (
        isinstance(row, list)
        and len(row) == 9
        and all(_int(row[i]) for i in (0, 1, 2, 8))
        and all(_number(row[i]) for i in (4, 5, 6))
        and row[3] in ("buy", "sell")
        and row[7] in EXEC_TYPES
    )
    if not ok:
        raise IntegrityError(f"fill #{k} is malformed: {str(row)[:200]}")
    return ClaimedFill(
        data=row[0],
        created=row[1],
        executed=row[2],
        side=row[3],
        size=float(row[4]),
        price=float(row[5]),
        commission=float(row[6]),
        exectype=row[7],
        order=row[8],
    )


def _claimed_order(k: int, row: Any) -> ClaimedOrder:
    ok = (
        isinstance(row, list)
        and len(row) == 8
        and _int(row[0])
        and _int(row[1])
        and row[2] in ("buy", "sell")
        and _number(row[3])
        and row[4] in EXEC_TYPES
        and all(row[i] is None or _number(row[i]) for i in (5, 6))
        and isinstance(row[7], bool)
    )
    if not ok:
        raise IntegrityError(f"order #{k} is malformed: {str(row)[:200]}")
    price, limit = (None if row[i] is None else float(row[i]) for i in (5, 6))
    return ClaimedOrder(row[0], row[1], row[2], float(row[3]), row[4], price, limit, row[7])


# ---------------------------------------------------------------------------- the window


def feed_frame(bars: pd.DataFrame, fold: Fold) -> pd.DataFrame:
    """The bars a job's run is fed: warm-up start to fold end (inclusive, intraday too)."""
    lo = pd.Timestamp(fold.warmup_start)
    hi = pd.Timestamp(fold.end) + pd.Timedelta(days=1)
    index = bars.index
    if index.is_monotonic_increasing:  # the loaders guarantee it: slice, don't mask
        i, j = index.searchsorted(lo, "left"), index.searchsorted(hi, "left")
        frame = bars.iloc[i:j][OHLCV]
    else:
        frame = bars.loc[(index >= lo) & (index < hi), OHLCV]
    return frame.astype("float64")  # copy-on-write (pandas 3): no copy when already float64


def _window_bounds(fold: Fold) -> tuple[pd.Timestamp, pd.Timestamp]:
    """``feed_frame``'s window: warm-up start (inclusive) to the day after the fold's end."""
    return pd.Timestamp(fold.warmup_start), pd.Timestamp(fold.end) + pd.Timedelta(days=1)


def window_bars(bars: pd.DataFrame, fold: Fold) -> int:
    """How many bars of ``bars`` a job over ``fold`` is fed (``O(log n)``: no slicing)."""
    try:
        index = bars.index
        lo, hi = _window_bounds(fold)
        if index.is_monotonic_increasing:
            return int(index.searchsorted(hi, "left") - index.searchsorted(lo, "left"))
        return int(((index >= lo) & (index < hi)).sum())
    except Exception:  # malformed bars: the run reports them; they cost little
        return 0


def feed_frames(
    feeds: list[tuple[str, pd.DataFrame]], fold: Fold
) -> list[tuple[str, pd.DataFrame]]:
    """Each feed's window, on the dates every feed has (a portfolio's symbols are fed on one
    calendar, so "the next bar" is the same bar for all of them). One feed: its window."""
    frames = [(name, feed_frame(bars, fold)) for name, bars in feeds]
    if len(frames) == 1:
        return frames
    empty = [name for name, f in frames if f.empty]
    if empty:
        raise ValueError(f"no bars for {', '.join(empty)} in fold {fold.index}")
    common = frames[0][1].index
    for _, f in frames[1:]:
        common = common.intersection(f.index)
    return [(name, f if f.index.equals(common) else f.loc[common]) for name, f in frames]


def bars_run(frame: pd.DataFrame, stop_after: date | None) -> int:
    """How many bars a run covers: all, or up to the first bar dated after ``stop_after``
    (the engine stops the run after that bar, which it still records)."""
    if stop_after is None:
        return len(frame)
    days = pd.DatetimeIndex(frame.index).normalize()
    upto = int(days.searchsorted(pd.Timestamp(stop_after), "right"))
    return min(len(frame), upto + 1)


# ---------------------------------------------------------------------------- the replay


@dataclass(slots=True)
class Position:
    """backtrader's ``Position``: size and average price, with its exact update rule."""

    size: float = 0.0
    price: float = 0.0

    def update(self, size: float, price: float) -> tuple[float, float]:
        """Apply a fill; returns (opened, closed) as ``Position.update`` does."""
        old = self.size
        self.size += size
        if not self.size:
            opened, closed = 0.0, size
            self.price = 0.0
        elif not old:
            opened, closed = size, 0.0
            self.price = price
        elif old > 0:
            if size > 0:
                opened, closed = size, 0.0
                self.price = (self.price * old + size * price) / self.size
            elif self.size > 0:
                opened, closed = 0.0, size
            else:
                opened, closed = self.size, -old
                self.price = price
        else:
            if size < 0:
                opened, closed = size, 0.0
                self.price = (self.price * old + size * price) / self.size
            elif self.size < 0:
                opened, closed = 0.0, size
            else:
                opened, closed = self.size, -old
                self.price = price
        return opened, closed

    def pseudo(self, size: float, price: float) -> tuple[float, float, float, float]:
        """(size, price, opened, closed) after the fill, without applying it."""
        probe = Position(self.size, self.price if self.size else 0.0)
        opened, closed = probe.update(size, price)
        return probe.size, probe.price, opened, closed


@dataclass
class _Trade:
    """backtrader's ``Trade`` arithmetic: its own average price, commission and pnl."""

    size: float = 0.0
    price: float = 0.0
    commission: float = 0.0
    pnl: float = 0.0

    def update(self, size: float, price: float, commission: float) -> bool:
        """Apply a part of a fill; True when it closes the trade."""
        self.commission += commission
        old = self.size
        self.size += size
        if abs(self.size) > abs(old):
            self.price = (old * self.price + size * price) / self.size
            pnl = 0.0
        else:
            pnl = -size * (price - self.price) * 1.0
        self.pnl += pnl
        return bool(old and not self.size)

    @property
    def pnlcomm(self) -> float:
        return self.pnl - self.commission


@dataclass
class _Replay:
    """State after each fill: what the books hold."""

    cash: float
    positions: list[Position]
    trades: list[_Trade]
    pnls: list[float] = field(default_factory=list)
    # A portfolio rebalances positions it rarely closes: each reduction realises a trade.
    realise_reductions: bool = False


def _slipped(price: float, slip: float, up: bool, cap: float) -> float:
    """backtrader's ``_slip_up/_slip_down`` with ``slip_match`` and without ``slip_out``."""
    if not slip:
        return price
    if up:
        p = price * (1 + slip)
        return p if p <= cap else cap
    p = price * (1 - slip)
    return p if p >= cap else cap


def _same(a: float, b: float, rtol: float) -> bool:
    return a == b or abs(a - b) <= rtol * max(1.0, abs(a), abs(b))


class _Bars:
    """One data feed's arrays and dates, for the checks."""

    def __init__(self, frame: pd.DataFrame) -> None:
        # Python floats for the per-fill checks (the same doubles; plain in messages).
        self.open: list[float] = frame["open"].tolist()
        self.high: list[float] = frame["high"].tolist()
        self.low: list[float] = frame["low"].tolist()
        self.closes: list[float] = frame["close"].tolist()
        self.close = frame["close"].to_numpy(dtype=float)
        self.dates = [ts.date() for ts in frame.index]


def _check_fill(
    k: int, f: ClaimedFill, feeds: list[_Bars], n: int, first: int, costs: CostModel, last: int
) -> float:
    """The checks of one claimed fill against the data; returns the price the books use."""
    where = f"fill #{k} ({f.side} {f.size:g}"
    if not (0 <= f.executed < n):
        raise IntegrityError(f"{where}): bar {f.executed} is outside the run's {n} bars")
    where += f" on {feeds[0].dates[f.executed]})"
    if not (0 <= f.data < len(feeds)):
        raise IntegrityError(f"{where}: data feed {f.data} does not exist ({len(feeds)} fed)")
    bars = feeds[f.data]
    if f.executed < last:
        raise IntegrityError(f"{where}: out of order, after a fill on a later bar")
    if not (first <= f.created < f.executed):
        raise IntegrityError(
            f"{where}: placed on bar {f.created}, not between the fold's first bar "
            f"({first}) and the bar before the fill"
        )
    if not all(math.isfinite(x) for x in (f.size, f.price, f.commission)):
        raise IntegrityError(f"{where}: a size, price or commission is not finite")
    if f.size == 0 or (f.size > 0) != (f.side == "buy"):
        raise IntegrityError(f"{where}: size {f.size!r} does not match the side")
    i, slip = f.executed, costs.slippage_pct / 100.0
    o, h, lo, c = bars.open[i], bars.high[i], bars.low[i], bars.closes[i]
    buy = f.side == "buy"
    if f.exectype == "Market":
        if f.executed != f.created + 1:
            raise IntegrityError(f"{where}: a market order fills on the bar after it is placed")
        want = _slipped(o, slip, buy, h if buy else lo)
        if not _same(f.price, want, PRICE_RTOL):
            raise IntegrityError(
                f"{where}: price {f.price!r} is not the bar's open {o!r} with slippage ({want!r})"
            )
        return want
    if f.exectype == "Close":
        if not _same(f.price, c, PRICE_RTOL):
            raise IntegrityError(f"{where}: price {f.price!r} is not the bar's close {c!r}")
        return c
    # Limit and stop orders fill inside the bar, or at the slipped open (backtrader may slip
    # a sell limit's open below the low, never below the open's slippage).
    floor, ceiling = min(lo, o * (1 - slip)), max(h, o * (1 + slip))
    if not (floor <= f.price <= ceiling):
        raise IntegrityError(
            f"{where}: price {f.price!r} is outside the bar's range [{floor!r}, {ceiling!r}]"
        )
    return f.price


def _beyond_margin(
    f: ClaimedFill, price: float, book: _Replay, feeds: list[_Bars], rate: float, cap: float
) -> str | None:
    """The initial margin (``backtest.margin``) before the fill: why the broker refuses a fill
    that opens exposure beyond ``cap`` times the equity (claimed, an integrity error)."""
    held = book.positions[f.data].size
    if not opens(held, f.size):
        return None
    gross, equity = exposure_after(
        book.cash,
        [p.size for p in book.positions],
        [b.open[f.executed] for b in feeds],
        f.data,
        f.size,
        price,
        abs(f.size) * rate * price,
    )
    if not margin_refuses(gross, equity, cap, rtol=MARGIN_RTOL):
        return None
    return (
        f"beyond the margin: gross exposure {gross:.2f} on equity {equity:.2f} after it, "
        f"the cap is {cap:g}x equity (the broker refuses it; deliberate leverage: raise "
        "max_gross_leverage)"
    )


def _rule_price(kind: str, buy: bool, at: float, bars: _Bars, i: int, slip: float) -> float | None:
    """backtrader's ``_try_exec_limit`` / ``_try_exec_stop`` on bar ``i`` for an order at price
    ``at`` (slippage on the open, limit and match, never outside the bar): the price it fills
    at, or None when the bar does not reach it."""
    o, h, lo = bars.open[i], bars.high[i], bars.low[i]
    if kind == "Limit":
        if buy:
            if at >= o:  # opened below the limit: buy cheaper
                return _slipped(o, slip, True, min(h, at))
            return at if at >= lo else None
        if at <= o:  # the broker caps a sell limit's slipped open by the limit, not the low
            return _slipped(o, slip, False, at)
        return at if at <= h else None
    if buy:  # a stop
        if o >= at:  # gapped through it: the open
            return _slipped(o, slip, True, h)
        return _slipped(at, slip, True, h) if h >= at else None
    if o <= at:
        return _slipped(o, slip, False, lo)
    return _slipped(at, slip, False, lo) if lo <= at else None


def _answer(
    k: int,
    f: ClaimedFill,
    orders: list[ClaimedOrder],
    filled: dict[int, float],
    feeds: list[_Bars],
    costs: CostModel,
    price: float,
) -> float:
    """Hold fill #k to the order it claims to answer: placed on its bar, of its type, side
    and feed, not filled beyond its size, at the price backtrader's rules give the order's
    limit or stop price as placed, on the first bar that reaches it. Returns the price."""
    day = feeds[0].dates[f.executed]
    where = f"fill #{k} ({f.side} {f.size:g} {f.exectype} on {day})"
    if not (0 <= f.order < len(orders)):
        raise IntegrityError(f"{where}: answers no order the run placed")
    o = orders[f.order]
    placed = feeds[0].dates[o.created] if 0 <= o.created < len(feeds[0].dates) else None
    ours = f"order #{f.order + 1} ({o.side} {o.size:g} {o.exectype} placed on "
    ours += f"{placed})" if placed is not None else f"bar {o.created})"
    if (o.data, o.created, o.side, o.exectype) != (f.data, f.created, f.side, f.exectype):
        raise IntegrityError(f"{where}: does not answer {ours} as it was placed")
    total = filled.get(f.order, 0.0) + f.size
    if abs(total) > abs(o.size) * (1 + PRICE_RTOL):
        raise IntegrityError(f"{where}: {total:g} filled, more than {ours} asked for")
    filled[f.order] = total
    if f.exectype not in ("Limit", "Stop"):
        return price
    if o.price is None or not math.isfinite(o.price):
        raise IntegrityError(f"{where}: {ours} has no price")
    bars, slip, buy = feeds[f.data], costs.slippage_pct / 100.0, f.side == "buy"
    want = _rule_price(f.exectype, buy, o.price, bars, f.executed, slip)
    if want is None or not _same(f.price, want, PRICE_RTOL):
        raise IntegrityError(
            f"{where}: price {f.price!r} is not what {ours} at {o.price!r} fills at on that "
            f"bar ({'the bar does not reach it' if want is None else repr(want)})"
        )
    if not o.linked:  # a bracket's child waits for its parent; any other order does not
        for j in range(o.created + 1, f.executed):
            if _rule_price(f.exectype, buy, o.price, bars, j, slip) is not None:
                raise IntegrityError(
                    f"{where}: {ours} at {o.price!r} would have filled on {feeds[0].dates[j]}, "
                    "the first bar that reached it"
                )
    return want


def _execute(
    k: int, f: ClaimedFill, price: float, book: _Replay, rate: float, day: date
) -> tuple[float, float]:
    """backtrader's ``BackBroker._execute`` for a stock-like asset, on the books.

    Returns (size, commission) of the fill. The float operations are the broker's own, in
    its order, so the cash of an honest run is bit-identical.
    """
    pos = book.positions[f.data]
    size = f.size
    pprice_orig = pos.price
    psize, _, opened, closed = pos.pseudo(size, price)
    pnl = -closed * (price - pprice_orig) * 1.0
    cash = book.cash
    closedcomm = openedcomm = 0.0
    if closed:
        closedvalue = -closed * pprice_orig
        closecash = closedvalue
        if closedvalue > 0:
            closecash /= 1.0
        cash += closecash + pnl * 1
        closedcomm = abs(closed) * rate * price
        cash -= closedcomm
        cash += 0.0
        book.cash = cash
    if opened:
        openedvalue = opened * price
        opencash = openedvalue
        if openedvalue > 0:
            opencash /= 1.0
        cash -= opencash
        openedcomm = abs(opened) * rate * price
        cash -= openedcomm
        if cash < 0.0:  # the broker would have refused the opening part
            raise IntegrityError(
                f"fill #{k} ({f.side} {size:g} on {day}): not affordable, cash would be "
                f"{cash:.2f} after it"
            )
        book.cash = cash
    execsize = closed + opened
    pos.update(execsize, price)
    if book.realise_reductions:
        if closed:  # the part sold (or covered) against the average price, net of its fee
            book.pnls.append(pnl - closedcomm)
        return execsize, closedcomm + openedcomm
    trade = book.trades[f.data]
    if closed and trade.update(closed, price, closedcomm):
        book.pnls.append(trade.pnlcomm)
        trade = book.trades[f.data] = _Trade()
    if opened:
        trade.update(opened, price, openedcomm)
    return execsize, closedcomm + openedcomm


def _debit_borrow(book: _Replay, feeds: list[_Bars], rate: float, start: int, stop: int) -> None:
    """Debit the borrow fee of bars ``start`` to ``stop - 1`` from the books' cash, as the
    broker does at the start of each (``backtest.borrow``): no fill happened in between, so
    the positions held are the books' current ones."""
    sizes = [p.size for p in book.positions]
    if not any(s < 0.0 for s in sizes):
        return
    cash = book.cash
    for i in range(start, stop):
        cash -= borrow_due(sizes, [f.closes[i - 1] for f in feeds], rate)
    book.cash = cash


def broker_values(
    closes: list[np.ndarray], cash: np.ndarray, sizes: np.ndarray, prices: np.ndarray
) -> np.ndarray:
    """backtrader's ``_get_value`` per bar, vectorised over bars: cash + the positions' value,
    summed feed by feed in feed order, a long position as (value - unrealised) + unrealised,
    the float additions in the broker's order."""
    total = np.zeros_like(cash)
    for d, close in enumerate(closes):
        size, price = sizes[:, d], prices[:, d]
        dvalue = size * close
        unrealised = size * (close - price) * 1.0
        long = (total + (dvalue - unrealised) / 1.0) + unrealised
        total = np.where(dvalue > 0, long, total + dvalue)
    return cash + total


@dataclass(frozen=True)
class Books:
    """What the trusted side made of a fill log."""

    result: BacktestResult
    fills: list[Fill]
    values: np.ndarray  # the replayed broker value at every bar the run covered


def keep_books(job: BacktestJob, log: FillLog, *, duration_s: float = 0.0) -> Books:
    """Check ``log`` against ``job``'s bars and costs, replay it, compute the metrics.

    Raises ``IntegrityError`` at the first discrepancy, ``ValueError`` when the job itself
    cannot be measured (no bars in its window).
    """
    named = feed_frames(job.feeds(), job.fold)
    frame = named[0][1]
    fold_start = job.fold.start
    if frame.empty or frame.index[-1].date() < fold_start:
        raise ValueError(f"no bars for {job.symbol} in fold {job.fold.index}")
    n = bars_run(frame, job.stop_after)
    feeds = [_Bars(f) for _, f in named]
    bars = feeds[0]
    first = next((i for i, d in enumerate(bars.dates) if d >= fold_start), None)
    if first is None or first >= n:
        raise ValueError(f"no bars on or after fold start {fold_start}")
    if len(log.values) != n:
        raise IntegrityError(f"the run covered {len(log.values)} bars, the window has {n}")

    borrow = per_bar_rate(job.costs.borrow_pct, job.periods_per_year)
    book, fills, realised, marks = _replay(job, log, named, feeds, n, first, borrow)
    _check_orders(log, first, n, len(feeds))
    values, sizes, due = _replayed_values(log, marks, n, job.costs, feeds, borrow)
    result = _result(
        job,
        log,
        frame,
        bars,
        book,
        fills,
        realised,
        values,
        sizes,
        due,
        first=first,
        n=n,
        borrow=borrow,
        duration_s=duration_s,
    )
    return Books(result=result, fills=fills, values=values)


_Mark = tuple[int, float, list[float], list[float]]  # (bar, cash, sizes, average prices)


def _replay(
    job: BacktestJob,
    log: FillLog,
    named: list[tuple[str, pd.DataFrame]],
    feeds: list[_Bars],
    n: int,
    first: int,
    borrow: float,
) -> tuple[_Replay, list[Fill], list[tuple[int, int]], list[_Mark]]:
    """Replay the claimed fills in order on the books, checking each against the bars, the
    orders and the costs (``IntegrityError`` at the first they cannot explain).

    Returns the books, the fills as booked, (bar, trades realised by then) after each fill,
    and the state after each bar that had fills.
    """
    costs = job.costs
    rate = costs.commission_pct / 100.0
    bars = feeds[0]
    accrued = 1  # the first bar whose borrow fee is not yet debited (bar 0 pays none)
    # An index feed (a regime filter's) is read, never traded: it holds no position, and a
    # symbol job with one is still a one-symbol job (trades run flat to flat).
    read_only = [is_index_feed(name) for name, _ in named]
    book = _Replay(
        cash=costs.cash,
        positions=[Position() for _ in feeds],
        trades=[_Trade() for _ in feeds],
        realise_reductions=read_only.count(False) > 1,
    )
    fills: list[Fill] = []
    realised: list[tuple[int, int]] = []  # (bar, trades realised by then) after each fill
    filled: dict[int, float] = {}  # size filled so far, by claimed order
    # State after each bar that had fills: (bar, cash, sizes, average prices).
    marks: list[_Mark] = []
    last = 0
    for k, claimed in enumerate(log.fills, 1):
        if 0 <= claimed.data < len(named) and read_only[claimed.data]:
            raise IntegrityError(
                f"fill #{k} ({claimed.side} {claimed.size:g}): on the index feed "
                f"{named[claimed.data][0]}, which a strategy reads and never trades"
            )
        price = _check_fill(k, claimed, feeds, n, first, costs, last)
        if log.orders is not None:
            price = _answer(k, claimed, log.orders, filled, feeds, costs, price)
        day = bars.dates[claimed.executed]
        if borrow and accrued <= claimed.executed:  # the fees up to this bar, before its fills
            _debit_borrow(book, feeds, borrow, accrued, claimed.executed + 1)
            accrued = claimed.executed + 1
        size, commission = _book_fill(k, claimed, price, book, feeds, rate, costs, day)
        fills.append(_booked_fill(claimed, named, bars, size, price, commission, day))
        _mark(marks, claimed.executed, book)
        last = claimed.executed
        realised.append((claimed.executed, len(book.pnls)))
    return book, fills, realised, marks


def _book_fill(
    k: int,
    claimed: ClaimedFill,
    price: float,
    book: _Replay,
    feeds: list[_Bars],
    rate: float,
    costs: CostModel,
    day: date,
) -> tuple[float, float]:
    """Execute fill #``k`` on the books (cash first) and check its margin, commission and
    size; returns (size, commission) as executed."""
    beyond = _beyond_margin(claimed, price, book, feeds, rate, costs.max_gross_leverage)
    size, commission = _execute(k, claimed, price, book, rate, day)  # cash first
    if beyond:
        raise IntegrityError(f"fill #{k} ({claimed.side} {claimed.size:g} on {day}): {beyond}")
    if not _same(claimed.commission, commission, PRICE_RTOL):
        raise IntegrityError(
            f"fill #{k} ({claimed.side} {claimed.size:g} on {day}): commission "
            f"{claimed.commission!r}, the cost model's is {commission!r}"
        )
    if size != claimed.size:
        raise IntegrityError(f"fill #{k} on {day}: size {claimed.size!r} vs {size!r} filled")
    return size, commission


def _booked_fill(
    claimed: ClaimedFill,
    named: list[tuple[str, pd.DataFrame]],
    bars: _Bars,
    size: float,
    price: float,
    commission: float,
    day: date,
) -> Fill:
    """The fill as the books record it, at the price the broker reports."""
    reported = (0.0 + size * price) / size
    created = bars.dates[claimed.created]
    return Fill(
        created,
        day,
        claimed.side,
        size,
        float(reported),
        commission,
        named[claimed.data][0],
    )


def _mark(marks: list[_Mark], bar: int, book: _Replay) -> None:
    """Record the books' state after ``bar``'s fills (replacing an earlier mark of ``bar``)."""
    if marks and marks[-1][0] == bar:
        marks.pop()
    marks.append(
        (
            bar,
            book.cash,
            [p.size for p in book.positions],
            [p.price for p in book.positions],
        )
    )


def _check_orders(log: FillLog, first: int, n: int, n_feeds: int) -> None:
    """Raise ``IntegrityError`` at the first claimed order not placed on a bar of the fold,
    on a fed feed, with a size of its side."""
    for j, o in enumerate(log.orders or [], 1):
        if not (first <= o.created < n and 0 <= o.data < n_feeds) or not (
            math.isfinite(o.size) and o.size and (o.size > 0) == (o.side == "buy")
        ):
            raise IntegrityError(
                f"order #{j} ({o.side} {o.size:g} {o.exectype} on bar {o.created}, feed "
                f"{o.data}) was not placed on a bar of the fold, on a fed feed, with a size"
            )


def _replayed_values(
    log: FillLog,
    marks: list[_Mark],
    n: int,
    costs: CostModel,
    feeds: list[_Bars],
    borrow: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The books' broker value at every bar, checked against the run's; with the sizes held
    (bars x feeds) and the borrow fee due at each bar."""
    bars = feeds[0]
    cash, sizes, avgs = forward_fill(marks, n, costs.cash, len(feeds))
    due = np.zeros(n)
    if borrow:
        due = borrow_by_bar(sizes, [f.close[:n] for f in feeds], borrow)
        cash = cash_by_bar([(m[0], m[1]) for m in marks], due, costs.cash)
    values = broker_values([f.close[:n] for f in feeds], cash, sizes, avgs)
    claimed_values = np.asarray(log.values, dtype=float)
    off = ~np.isclose(claimed_values, values, rtol=VALUE_RTOL, atol=VALUE_RTOL)
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise IntegrityError(
            f"a cash change no fill explains on {bars.dates[i]}: the run's broker value "
            f"{claimed_values[i]!r}, the books {values[i]!r}"
        )
    return values, sizes, due


def _result(
    job: BacktestJob,
    log: FillLog,
    frame: pd.DataFrame,
    bars: _Bars,
    book: _Replay,
    fills: list[Fill],
    realised: list[tuple[int, int]],
    values: np.ndarray,
    sizes: np.ndarray,
    due: np.ndarray,
    *,
    first: int,
    n: int,
    borrow: float,
    duration_s: float,
) -> BacktestResult:
    """The job's result from the checked books: equity from the fold's first bar (ended at
    zero on a bankrupt bar), returns, metrics and trades."""
    costs = job.costs
    fold_start = job.fold.start
    # Bankrupt: the equity reached zero or below. The run ends on that bar, at zero (the loss
    # stops at the capital): no return is computed on non-positive equity.
    status, error, end, pnls = JobStatus.OK, None, n, book.pnls
    bust = bankrupt_at(values[:n], first)
    if bust is not None:
        end = bust + 1
        pnls = book.pnls[: max((c for bar, c in realised if bar <= bust), default=0)]
        status = JobStatus.BANKRUPT
        error = (
            f"bankrupt on {bars.dates[bust]}: the equity reached {float(values[bust]):.2f}; "
            "the run ends there (total return -100 %)"
        )
    base = float(values[first - 1]) if first > 0 else costs.cash
    equity = np.concatenate([[base], values[first:end]])
    if bust is not None:
        equity[-1] = 0.0
    in_market = (sizes[first:end] != 0).any(axis=1)
    bars_in_market = int(in_market.sum())
    last_day = bars.dates[end - 1]
    traded = float(
        sum(abs(f.size) * f.price for f in fills if fold_start <= f.executed <= last_day)
    )
    borrow_paid = float(due[first:end].sum()) if borrow else 0.0
    metrics = compute_metrics(
        equity,
        trade_pnls=pnls,
        bars_in_market=bars_in_market,
        periods_per_year=job.periods_per_year,
        traded_notional=traded,
    ).model_copy(update={"orders_rejected": log.orders_rejected, "borrow_paid": borrow_paid})
    returns = (equity[1:] / equity[:-1] - 1.0).tolist()
    return BacktestResult(
        job_id=job.job_id,
        variant_id=job.variant_id,
        symbol=job.symbol,
        fold=job.fold.index,
        status=status,
        metrics=metrics,
        error=error,
        return_dates=index_keys(frame.index[first:end]),
        returns=returns,
        trade_pnls=list(pnls),
        bars_in_market=bars_in_market,
        traded_notional=traded,
        duration_s=duration_s,
    )


def forward_fill(
    marks: list[tuple[int, float, list[float], list[float]]], n: int, cash0: float, feeds: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bar cash, sizes and average prices (bars x feeds) from the state after each bar
    with fills."""
    cash = np.full(n, cash0)
    sizes = np.zeros((n, feeds))
    avgs = np.zeros((n, feeds))
    if marks:
        at = np.array([m[0] for m in marks])
        which = np.searchsorted(at, np.arange(n), side="right") - 1
        has = which >= 0
        cash[has] = np.array([m[1] for m in marks])[which[has]]
        sizes[has] = np.array([m[2] for m in marks])[which[has]]
        avgs[has] = np.array([m[3] for m in marks])[which[has]]
    return cash, sizes, avgs


def account(job: BacktestJob, log: FillLog, *, duration_s: float = 0.0) -> Books:
    """``keep_books``; on a discrepancy, books holding only the job's integrity-error (or,
    when the job cannot be measured at all, error) result. Never raises."""
    try:
        return keep_books(job, log, duration_s=duration_s)
    except IntegrityError as exc:
        status, message = JobStatus.INTEGRITY_ERROR, f"IntegrityError: {exc}"
    except Exception as exc:  # the job cannot be measured: an ordinary error
        status, message = JobStatus.ERROR, f"{type(exc).__name__}: {exc}"
    result = BacktestResult(
        job_id=job.job_id,
        variant_id=job.variant_id,
        symbol=job.symbol,
        fold=job.fold.index,
        status=status,
        error=" ".join(message.split())[:500],
        duration_s=duration_s,
    )
    return Books(result=result, fills=[], values=np.empty(0))
