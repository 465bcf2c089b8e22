"""The screen's path-dependent part: the generated strategy's ``next`` and the broker, in numba.

One pass over the bars does, per bar, what ``backtest.engine`` runs in backtrader (``runonce``):

1. the broker (``BackBroker.next``): a short held at the previous close pays its borrow fee
   (``backtest.borrow``), then an order placed on the previous bar is first checked at the
   price it was created with (the signal bar's close, ``check_submitted``): if the cash after it
   would be negative the order is refused (``Margin``); else it fills at this bar's open with the
   slippage (``slip_open``, ``slip_match`` without ``slip_out``: capped at the high / low), and an
   opening fill the cash cannot pay at that price, or the initial margin refuses
   (``backtest.margin``), is refused too. The cash arithmetic is the
   broker's (``backtest.books._execute``), in the same order of float operations;
2. ``notify_order``: an opening fill records the entry price (the order's ``executed.price``,
   ``(0.0 + size * price) / size``), the entry bar, the best close and the ATR stop level;
3. the broker's value at the close (``backtest.books._values``);
4. the strategy's ``next`` from its first bar (backtrader's minperiod) on: exits of an open
   position, else an entry sized in whole shares from the signal bar's close; orders on bars
   before the fold's start are refused (``backtest.engine._gated``).

The entry and filter conditions and the readiness of the indicators arrive as boolean arrays
(``backtest.screen.blocks``); everything that depends on the position is decided here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

import backtest.screen.numba_cache  # noqa: F401  (numba's cache in the user cache dir)

# Exit blocks, as bits of ``exit_mask``.
EXIT_STOP_LOSS = 1
EXIT_TAKE_PROFIT = 2
EXIT_ATR_STOP = 4
EXIT_TRAILING = 8
EXIT_MAX_HOLD = 16
EXIT_OPPOSITE = 32

# Sizing blocks and the stop distance fixed_risk sizes against.
SIZE_FIXED_FRACTION = 0
SIZE_FIXED_RISK = 1
SIZE_VOL_TARGET = 2
STOP_BY_ATR_MULT = 0  # atr_stop_mult x ATR
STOP_BY_LOSS_PCT = 1  # close x stop_loss_pct
STOP_BY_TRAIL_PCT = 2  # close x trail_pct
STOP_BY_TWO_ATR = 3  # 2.0 x ATR


@njit(cache=True)
def _size(
    i: int,
    value: float,
    close: np.ndarray,
    atr: np.ndarray,
    realised_sd: np.ndarray,
    sizing: int,
    fraction: float,
    risk_pct: float,
    stop_mode: int,
    stop_loss_pct: float,
    trail_pct: float,
    atr_mult: float,
    target_vol: float,
    sqrt_bars_per_year: float,
) -> float:
    """The generated ``_size``: whole shares (``math.floor``), never negative."""
    c = close[i]
    if c <= 0.0:
        return 0.0
    cap = math.floor(value * fraction / c)
    if sizing == SIZE_FIXED_FRACTION:
        return max(0.0, cap)
    if sizing == SIZE_FIXED_RISK:
        if stop_mode == STOP_BY_ATR_MULT:
            distance = atr_mult * atr[i]
        elif stop_mode == STOP_BY_LOSS_PCT:
            distance = c * stop_loss_pct
        elif stop_mode == STOP_BY_TRAIL_PCT:
            distance = c * trail_pct
        else:
            distance = 2.0 * atr[i]
        if distance <= 0.0:
            return 0.0
        quantity = math.floor(value * risk_pct / distance)
        return max(0.0, min(quantity, cap))
    realised_vol = realised_sd[i] * sqrt_bars_per_year
    if realised_vol <= 0.0:
        return 0.0
    wanted = target_vol / realised_vol
    share = wanted if wanted < fraction else fraction  # builtin min: the first when equal
    return max(0.0, math.floor(value * share / c))


@njit(cache=True)
def _exit_due(
    i: int,
    long: bool,
    close: float,
    entry_price: float,
    entry_bar: int,
    extreme: float,
    stop_level: float,
    exit_mask: int,
    stop_loss_pct: float,
    take_profit_pct: float,
    trail_pct: float,
    max_hold: float,
    entry_exit: np.ndarray,
) -> bool:
    """The generated ``_exit_long`` / ``_exit_short``."""
    if exit_mask & EXIT_STOP_LOSS:
        if long and close <= entry_price * (1.0 - stop_loss_pct):
            return True
        if not long and close >= entry_price * (1.0 + stop_loss_pct):
            return True
    if exit_mask & EXIT_TAKE_PROFIT:
        if long and close >= entry_price * (1.0 + take_profit_pct):
            return True
        if not long and close <= entry_price * (1.0 - take_profit_pct):
            return True
    if exit_mask & EXIT_ATR_STOP and (
        (long and close <= stop_level) or (not long and close >= stop_level)
    ):
        return True
    if exit_mask & EXIT_TRAILING:
        if long and close <= extreme * (1.0 - trail_pct):
            return True
        if not long and close >= extreme * (1.0 + trail_pct):
            return True
    if exit_mask & EXIT_MAX_HOLD and i - entry_bar >= max_hold:
        return True
    return bool(exit_mask & EXIT_OPPOSITE and entry_exit[i])


# Slots of ``simulate``'s ``knobs`` (float64) and ``modes`` (int64) arrays: one array each
# instead of two dozen scalars keeps numba's per-call dispatch cheap.
K_STOP_LOSS, K_TAKE_PROFIT, K_ATR_MULT, K_TRAIL, K_MAX_HOLD = 0, 1, 2, 3, 4
K_FRACTION, K_RISK, K_TARGET_VOL, K_SQRT_BPY, K_CASH, K_RATE, K_SLIP = 5, 6, 7, 8, 9, 10, 11
K_MAX_LEVERAGE, K_BORROW = 12, 13
N_KNOBS = 14
M_START, M_FIRST, M_SHORTS, M_EXITS, M_SIZING, M_STOP = 0, 1, 2, 3, 4, 5
N_MODES = 6


@njit(cache=True)
def simulate(  # noqa: C901  (numba kernel: one compiled loop)
    open_: np.ndarray,
    high: np.ndarray,
    low: np.ndarray,
    close: np.ndarray,
    ready: np.ndarray,
    long_entry: np.ndarray,
    short_entry: np.ndarray,
    long_exit: np.ndarray,
    short_exit: np.ndarray,
    atr: np.ndarray,
    realised_sd: np.ndarray,
    modes: np.ndarray,
    knobs: np.ndarray,
    values: np.ndarray,
    positions: np.ndarray,
    fill_created: np.ndarray,
    fill_bar: np.ndarray,
    fill_size: np.ndarray,
    fill_price: np.ndarray,
    record: bool,
):
    """Run the bars, writing the broker value at every bar's close into ``values``; with
    ``record``, the position at every close into ``positions`` and the fills (the order's
    bar, the fill's bar, its signed size, its booked price) into the four ``fill_*`` arrays
    (each of the bars' length); a sweep needs only the values and the count. Returns
    (n_fills, refused): the fills made and the orders the broker refused."""
    start, first, shorts = modes[M_START], modes[M_FIRST], modes[M_SHORTS] != 0
    exit_mask, sizing, stop_mode = modes[M_EXITS], modes[M_SIZING], modes[M_STOP]
    stop_loss_pct, take_profit_pct = knobs[K_STOP_LOSS], knobs[K_TAKE_PROFIT]
    atr_mult, trail_pct, max_hold = knobs[K_ATR_MULT], knobs[K_TRAIL], knobs[K_MAX_HOLD]
    fraction, risk_pct, target_vol = knobs[K_FRACTION], knobs[K_RISK], knobs[K_TARGET_VOL]
    sqrt_bars_per_year, cash0 = knobs[K_SQRT_BPY], knobs[K_CASH]
    rate, slip, max_leverage = knobs[K_RATE], knobs[K_SLIP], knobs[K_MAX_LEVERAGE]
    borrow = knobs[K_BORROW]
    n = close.size
    n_fills = 0
    refused = 0
    cash = cash0
    pos = 0.0
    pos_price = 0.0
    order = 0.0  # signed size of the order placed on the previous bar (0: none)
    order_bar = -1
    entry_price = np.nan
    entry_bar = -1
    extreme = np.nan
    stop_level = np.nan
    for i in range(n):
        # -- the broker: the borrow fee of a short held at the last close (backtest.borrow)
        if borrow != 0.0 and pos < 0.0:
            cash -= -pos * close[i - 1] * borrow
        # -- the broker: check the order at its created price, then fill it at the open
        if order != 0.0:
            created = close[order_bar]
            if pos == 0.0:
                probe = cash - order * created
                probe -= abs(order) * rate * created
            else:
                probe = cash + (-order) * created
                probe -= abs(order) * rate * created
            if probe < 0.0:
                refused += 1
            else:
                price = open_[i]
                if slip and order > 0.0:
                    price = price * (1 + slip)
                    price = price if price <= high[i] else high[i]
                elif slip:
                    price = price * (1 - slip)
                    price = price if price >= low[i] else low[i]
                filled = False
                if pos == 0.0:
                    after = cash - order * price
                    after -= abs(order) * rate * price
                    # the initial margin (backtest.margin.exposure_after from flat, its floats)
                    gross = 0.0 + abs(order) * price
                    if after < 0.0 or not gross <= max_leverage * (after + (0.0 + order * price)):
                        refused += 1
                    else:
                        cash = after
                        pos = order
                        pos_price = price
                        filled = True
                        entry_price = (0.0 + order * price) / order
                        entry_bar = i
                        extreme = entry_price
                        if order > 0.0:
                            stop_level = entry_price - atr_mult * atr[i]
                        else:
                            stop_level = entry_price + atr_mult * atr[i]
                else:
                    closed = order
                    pnl = -closed * (price - pos_price) * 1.0
                    cash += -closed * pos_price + pnl
                    cash -= abs(closed) * rate * price
                    cash += 0.0
                    pos = 0.0
                    pos_price = 0.0
                    filled = True
                    entry_price = np.nan
                    entry_bar = -1
                if filled:
                    if record:
                        fill_created[n_fills] = order_bar
                        fill_bar[n_fills] = i
                        fill_size[n_fills] = order
                        fill_price[n_fills] = price
                    n_fills += 1
            order = 0.0
        # -- the value at the close
        if pos != 0.0:
            dvalue = pos * close[i]
            unrealised = pos * (close[i] - pos_price) * 1.0
            # a long: (value - unrealised) + unrealised, as the broker sums it
            long_total = (0.0 + (dvalue - unrealised) / 1.0) + unrealised
            total = long_total if dvalue > 0.0 else 0.0 + dvalue
            values[i] = cash + total
        else:
            values[i] = cash + 0.0
        if record:
            positions[i] = pos
        # -- the strategy's next()
        if i < start or not ready[i]:
            continue
        c = close[i]
        if pos > 0.0:
            if exit_mask & EXIT_TRAILING:
                extreme = c if c > extreme else extreme
            if i >= first and _exit_due(
                i,
                True,
                c,
                entry_price,
                entry_bar,
                extreme,
                stop_level,
                exit_mask,
                stop_loss_pct,
                take_profit_pct,
                trail_pct,
                max_hold,
                long_exit,
            ):
                order, order_bar = -pos, i
            continue
        if shorts and pos < 0.0:
            if exit_mask & EXIT_TRAILING:
                extreme = c if c < extreme else extreme
            if i >= first and _exit_due(
                i,
                False,
                c,
                entry_price,
                entry_bar,
                extreme,
                stop_level,
                exit_mask,
                stop_loss_pct,
                take_profit_pct,
                trail_pct,
                max_hold,
                short_exit,
            ):
                order, order_bar = -pos, i
            continue
        if long_entry[i] or (shorts and short_entry[i]):
            size = _size(
                i,
                values[i],
                close,
                atr,
                realised_sd,
                sizing,
                fraction,
                risk_pct,
                stop_mode,
                stop_loss_pct,
                trail_pct,
                atr_mult,
                target_vol,
                sqrt_bars_per_year,
            )
            if size > 0.0 and i >= first:
                order = size if long_entry[i] else -size
                order_bar = i
    return n_fills, refused


# Columns of ``simulate_many``'s ``rows``: each set's row in each stacked argument.
R_READY, R_LONG_ENTRY, R_SHORT_ENTRY, R_LONG_EXIT, R_SHORT_EXIT, R_ATR, R_SD = range(7)
N_ROWS = 7


@njit(cache=True)
def simulate_many(
    open_: np.ndarray,
    high: np.ndarray,
    low: np.ndarray,
    close: np.ndarray,
    ready: np.ndarray,
    long_entry: np.ndarray,
    short_entry: np.ndarray,
    long_exit: np.ndarray,
    short_exit: np.ndarray,
    atr: np.ndarray,
    realised_sd: np.ndarray,
    rows: np.ndarray,
    modes: np.ndarray,
    knobs: np.ndarray,
    total: np.ndarray,
    at: np.ndarray,
    row_of: np.ndarray,
):
    """Many parameter sets on one window in one call: ``simulate`` for each, so the broker's
    rules have one implementation (``backtest.screen.batch`` builds the arguments).

    ``simulate``'s array arguments arrive stacked, a row per distinct array: set ``s`` reads
    ``ready[rows[s, R_READY]]``, ``long_entry[rows[s, R_LONG_ENTRY]]`` and so on (``R_*``),
    with the rows ``modes[s]``, ``knobs[s]``. Returns (series, n_fills, solvent): one row per
    set, each set's fill count, and whether its value stays positive from the fold's first bar
    (``M_FIRST``) on. A set's row is the broker's value at every bar's close, but for a solvent
    set with ``M_FIRST > 0``: from ``M_FIRST`` on, its returns (``v[i] / v[i - 1] - 1.0``,
    what ``BooksEquity.returns`` computes then), so no second matrix is built.

    With a ``total`` (else pass arrays with no rows), a solvent set with ``M_FIRST > 0`` adds
    its returns to ``total[row_of[s], at[i - M_FIRST]]`` instead (what a sweep sums: one
    addition per cell, as ``total[rows, at] += returns`` makes) and ``series`` has no rows: the
    other sets' values are not kept (run them again without ``total``).
    """
    n = close.size
    n_sets = rows.shape[0]
    adding = total.shape[0] > 0
    values = np.empty((0 if adding else n_sets, n))
    scratch = np.empty(n)  # a set's values when adding: one row, reused (stays in cache)
    n_fills = np.empty(n_sets, np.int64)
    solvent = np.empty(n_sets, np.bool_)
    unused_i, unused_f = np.empty(0, np.int64), np.empty(0)  # fills not kept
    for s in range(n_sets):
        r = rows[s]
        v = scratch if adding else values[s]  # the kernel writes the set's row in place
        n_fills[s], _ = simulate(
            open_,
            high,
            low,
            close,
            ready[r[R_READY]],
            long_entry[r[R_LONG_ENTRY]],
            short_entry[r[R_SHORT_ENTRY]],
            long_exit[r[R_LONG_EXIT]],
            short_exit[r[R_SHORT_EXIT]],
            atr[r[R_ATR]],
            realised_sd[r[R_SD]],
            modes[s],
            knobs[s],
            v,
            unused_f,
            unused_i,
            unused_i,
            unused_f,
            unused_f,
            False,
        )
        first = modes[s, M_FIRST]
        ok = True
        for i in range(first, n):
            if not v[i] > 0.0:
                ok = False
                break
        solvent[s] = ok
        if ok and first > 0 and adding:
            for i in range(first, n):
                total[row_of[s], at[i - first]] += v[i] / v[i - 1] - 1.0
        elif ok and first > 0:
            # backwards: each return reads the value before it, not yet overwritten
            for i in range(n - 1, first - 1, -1):
                v[i] = v[i] / v[i - 1] - 1.0
    return values, n_fills, solvent
