"""The portfolio screen's loops over the universe, compiled: the ranking and the books' values.

``backtest.screen.portfolio`` replays the generated strategy per rebalance in Python over the
few symbols it holds or targets; what grows with the universe runs here, once per set:

* ``rank_ends``: at every rebalance bar, each symbol's momentum (``momentum`` of
  ``strategies.portfolio_code``), how many have one, and the ends of the strategy's ranking
  (``ranked.sort(reverse=True)`` on ``(score, feed)``: best score first, a tie to the later
  feed) - the ``k`` best and the ``k`` worst, each in rank order, without sorting the universe;
* ``values_from_marks``: the broker's value at every bar's close (``books.broker_values``'
  floats: the held positions summed in feed order; a flat feed adds exactly nothing, so only
  the held ones are visited) and whether any position is held.
"""

from __future__ import annotations

import numpy as np
from numba import njit

import backtest.screen.numba_cache  # noqa: F401  (numba's cache in the user cache dir)


@njit(cache=True, inline="always")
def _keep_best(keys: np.ndarray, ids: np.ndarray, kept: int, k: int, s: float, j: int) -> int:
    """Insert ``(s, j)`` into the ``kept`` best (rank order) if it is among the ``k`` best;
    ``j`` is later than every kept feed, so it ranks before a kept equal score."""
    p = 0
    while p < kept and s < keys[p]:
        p += 1
    if p >= k:
        return kept
    last = kept if kept < k else k - 1
    for q in range(last, p, -1):
        keys[q], ids[q] = keys[q - 1], ids[q - 1]
    keys[p], ids[p] = s, j
    return kept + 1 if kept < k else k


@njit(cache=True, inline="always")
def _keep_worst(keys: np.ndarray, ids: np.ndarray, kept: int, k: int, s: float, j: int) -> int:
    """Insert ``(s, j)`` into the ``kept`` worst (rank order: the worst last) if it is among the
    ``k`` worst; ``j`` ranks before a kept equal score, as in ``_keep_best``."""
    p = 0
    while p < kept and s < keys[p]:
        p += 1
    if kept < k:
        for q in range(kept, p, -1):
            keys[q], ids[q] = keys[q - 1], ids[q - 1]
        keys[p], ids[p] = s, j
        return kept + 1
    if p == 0:  # it ranks before every kept one: not among the k worst
        return kept
    for q in range(p - 1):  # the best kept one leaves; those before p move up
        keys[q], ids[q] = keys[q + 1], ids[q + 1]
    keys[p - 1], ids[p - 1] = s, j
    return kept


@njit(cache=True)
def rank_ends(
    close: np.ndarray, bars: np.ndarray, lookback: int, skip: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(count, best, worst, top score) at each of ``bars``: how many feeds have a momentum
    score (``close[t - skip] / close[t - lookback - skip] - 1``, none before the history or on
    a past close <= 0), the ``k`` best feeds and the ``k`` worst, each in rank order (-1 where
    fewer), and the best score (NaN when none)."""
    r, width = bars.size, close.shape[1]
    span = lookback + skip
    count = np.zeros(r, np.int64)
    best = np.full((r, k), -1, np.int64)
    worst = np.full((r, k), -1, np.int64)
    top = np.full(r, np.nan)
    best_keys, worst_keys = np.empty(k), np.empty(k)
    for i in range(r):
        t = bars[i]
        if t + 1 <= span:
            continue
        m = nb = nw = 0
        best_i, worst_i = best[i], worst[i]
        for j in range(width):
            past = close[t - span, j]
            if not past > 0:
                continue
            s = close[t - skip, j] / past - 1.0
            if s != s:
                continue
            m += 1
            nb = _keep_best(best_keys, best_i, nb, k, s, j)
            nw = _keep_worst(worst_keys, worst_i, nw, k, s, j)
        count[i] = m
        if m:
            top[i] = best_keys[0]
    return count, best, worst, top


@njit(cache=True)
def values_from_marks(
    close: np.ndarray,
    cash: np.ndarray,
    mark_bars: np.ndarray,
    feeds: np.ndarray,
    sizes: np.ndarray,
    prices: np.ndarray,
    held: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(value at every close, any position held) from the state after each bar with fills:
    mark ``m`` (from bar ``mark_bars[m]`` on) holds ``held[m]`` positions, ``feeds[m, :]``
    (feed order) with ``sizes`` and average ``prices``; ``cash`` is every bar's."""
    n = cash.size
    values = np.empty(n)
    in_market = np.zeros(n, np.bool_)
    m = -1
    for i in range(n):
        while m + 1 < mark_bars.size and mark_bars[m + 1] <= i:
            m += 1
        total = 0.0
        if m >= 0:
            for q in range(held[m]):
                c = close[i, feeds[m, q]]
                size, price = sizes[m, q], prices[m, q]
                dvalue = size * c
                unrealised = size * (c - price) * 1.0
                if dvalue > 0:
                    total = (total + (dvalue - unrealised) / 1.0) + unrealised
                else:
                    total += dvalue
            in_market[i] = held[m] > 0
        values[i] = cash[i] + total
    return values, in_market
