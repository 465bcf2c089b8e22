"""backtrader's built-in indicators, bit for bit, as numba kernels.

The generated strategies use ``bt.indicators`` (never ``bt.talib``), and the engine runs them in
``runonce`` mode. The screen must see the very same doubles, or a threshold comparison flips and
a trade moves by a day. So each kernel here replays the float operations of the indicator's
``once`` method, in backtrader's order:

- ``Average`` (SMA, and the seed of every exponential average) is ``math.fsum(window) / period``:
  a correctly rounded sum, reproduced by a rolled double-double whose rounding is proven per
  window (else the window is summed as ``fsum`` does, Shewchuk's partials and CPython's final
  rounding). TA-Lib's SMA is a running sum and differs in the last bits, so it is not used.
- ``ExponentialSmoothing`` (EMA: alpha = 2 / (1 + period); SMMA: alpha = 1 / period) is
  ``prev * (1 - alpha) + x * alpha`` from that seed (TA-Lib computes ``(x - prev) * k + prev``).
- ``pow(line, 2)`` and ``pow(line, 0.5)`` are the C library's ``pow``, as CPython calls it;
  glibc's ``pow(x, 2)`` is not always ``x * x`` (about 1 in 1,200 prices differ in the last
  bit). Where the exact ``x * x`` (or ``sqrt(v)``) lies within 0.445 ulp of its rounding, a
  ``pow`` accurate to 0.555 ulp can return nothing else (glibc's documented bound is 0.54 ulp),
  so it is taken without the call; the other tenth calls ``pow``.
- ``Highest``/``Lowest`` take exact maxima: TA-Lib's ``MAX``/``MIN`` give the same numbers.
- A division by zero raises ``ZeroDivisionError`` in backtrader (the run is an error): the kernels
  report it through a flag and ``IndicatorZeroDivision`` carries it to the caller.

Every array is NaN before its first value; ``first`` is that index (backtrader's minperiod - 1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import talib
from numba import njit, types

import backtest.screen.numba_cache  # noqa: F401  (numba's cache in the user cache dir)

# CPython's float ** float calls the C library's pow: bind the same symbol, with the exponent
# passed at run time so that LLVM cannot rewrite pow(x, 2.0) into x * x.
_c_pow: Any = types.ExternalFunction(  # Any: mypy cannot type a numba external
    "pow", types.float64(types.float64, types.float64)
)

_MAX_PARTIALS = 64  # a double sum never needs more than ~40 non-overlapping partials


class IndicatorZeroDivision(ArithmeticError):
    """backtrader would raise ZeroDivisionError computing this indicator."""


# ---------------------------------------------------------------------------- exact sums


@njit(cache=True, inline="always")
def _msum_add(p: np.ndarray, n: int, x: float) -> int:
    """CPython's ``math.fsum`` inner step: add ``x`` to the partials ``p[:n]``."""
    i = 0
    for j in range(n):
        y = p[j]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        yr = hi - x
        lo = y - yr
        if lo != 0.0:
            p[i] = lo
            i += 1
        x = hi
    if x != 0.0:
        p[i] = x
        i += 1
    return i


@njit(cache=True, inline="always")
def _msum_value(p: np.ndarray, n: int) -> float:
    """CPython's ``math.fsum`` final rounding of the partials (half-even across partials)."""
    hi = 0.0
    if n > 0:
        n -= 1
        hi = p[n]
        lo = 0.0
        while n > 0:
            x = hi
            n -= 1
            y = p[n]
            hi = x + y
            yr = hi - x
            lo = y - yr
            if lo != 0.0:
                break
        if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
            y = lo * 2.0
            x = hi + y
            yr = x - hi
            if y == yr:
                hi = x
    return hi


@njit(cache=True, inline="always")
def _two_sum(a: float, b: float) -> tuple[float, float]:
    """Knuth's TwoSum: ``s + e == a + b`` exactly, ``s`` the rounded sum."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(cache=True)
def _window_fsum(src: np.ndarray, begin: int, end: int, p: np.ndarray) -> float:
    """``math.fsum(src[begin:end])``; a NaN or infinity gives what fsum gives (NaN for
    inf - inf, where fsum raises)."""
    k = 0
    special = 0.0
    for j in range(begin, end):
        x = src[j]
        if math.isfinite(x):
            k = _msum_add(p, k, x)
        else:
            special += x
    return special if special != 0.0 else _msum_value(p, k)


@njit(cache=True)
def window_fsum_mean(src: np.ndarray, period: int, start: int) -> np.ndarray:
    """``Average``: ``fsum(src[i-period+1:i+1]) / period`` from index ``start + period - 1``.

    The window's sum is rolled as an unevaluated ``hi + lo`` (error-free TwoSums: ``hi`` the
    running sum, ``lo`` what its roundings dropped) that holds it exactly for prices (the bits
    of a window's sum span far fewer than 106), and ``round(hi + lo)`` is then the correctly
    rounded sum ``fsum`` returns. Should ``lo`` lose bits, the rounding still is whenever what
    it lost stays inside half the gap to the next double; a window where neither holds is
    summed exactly, as every window is when the values are not finite or could overflow.
    ``hi`` and ``lo`` each carry one addition from bar to bar: several times cheaper than
    rolling the exact partials.
    """
    n = src.size
    out = np.full(n, np.nan)
    biggest = 0.0
    for i in range(start, n):
        a = abs(src[i])
        biggest = a if a > biggest else biggest  # NaN never replaces it...
        if not a < 1e300:  # ...but fails this
            biggest = math.inf
    tame = biggest * period < 1e300
    p = np.empty(_MAX_PARTIALS if tame else _MAX_PARTIALS + period)  # NaN partials pile up
    hi = lo = lost = 0.0
    for i in range(start, n):
        if tame:
            if i - period >= start:  # the new value less the old one, exactly
                d, de = _two_sum(src[i], -src[i - period])
            else:
                d, de = src[i], 0.0
            hi, e = _two_sum(hi, d)
            u, f1 = _two_sum(e, de)
            lo, f2 = _two_sum(lo, u)
            lost += abs(f1) + abs(f2)  # zero while hi + lo is the exact sum
        if i < start + period - 1:
            continue
        if tame:
            total, rest = _two_sum(hi, lo)
            if lost == 0.0 or _rounds_to(total, rest, lost):
                out[i] = total / period
                continue
        out[i] = _window_fsum(src, i - period + 1, i + 1, p) / period
    return out


@njit(cache=True)
def _rounds_to(r: float, rest: float, lost: float) -> bool:
    """Whether the exact sum, within ``2 * lost`` of ``r + rest`` (``r`` the rounding of
    ``r + rest``; ``lost`` a rounded sum of magnitudes), rounds to ``r``: it stays short of
    the midpoints around ``r``."""
    if r == 0.0:
        return False
    m, e = math.frexp(r)
    gap = math.ldexp(1.0, e - 53)  # the spacing above |r| (a normal r)
    if abs(m) == 0.5:
        gap *= 0.5  # a power of two: the spacing below is half
    return 2.0 * lost < (0.5 * gap - abs(rest)) * 0.5


@njit(cache=True)
def exp_smoothing(
    src: np.ndarray, period: int, start: int, alpha: float, alpha1: float
) -> np.ndarray:
    """``ExponentialSmoothing``: an ``Average`` seed, then ``prev * alpha1 + x * alpha``."""
    out = np.full(src.size, np.nan)
    seed = start + period - 1
    if seed >= src.size:
        return out
    p = np.empty(_MAX_PARTIALS)
    k = 0
    for i in range(start, seed + 1):
        k = _msum_add(p, k, src[i])
    prev = _msum_value(p, k) / period
    out[seed] = prev
    for i in range(seed + 1, src.size):
        prev = prev * alpha1 + src[i] * alpha
        out[i] = prev
    return out


# ---------------------------------------------------------------------------- elementwise


_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitter for doubles
_MANTISSA = (1 << 52) - 1


def _pow_is_bounded() -> bool:
    """Whether this process's C ``pow`` is documented accurate to under 0.555 ulp: glibc from
    2.28 (its new ``pow``: 0.52 ulp). Elsewhere (musl, macOS, older glibc) every square and
    root calls ``pow``, as before: slower, never different from CPython's ``x ** y``."""
    import platform

    name, version = platform.libc_ver()
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return name == "glibc" and (major, minor) >= (2, 28)


# Read once from the platform (a fact, not a setting); the kernels take it as an argument so
# that numba's on-disk cache never freezes one machine's answer into another's.
POW_BOUNDED = _pow_is_bounded()


@njit(cache=True, inline="always")
def _two_prod(a: float, b: float) -> tuple[float, float]:
    """Dekker's TwoProduct: ``p + e == a * b`` exactly, ``p`` the rounded product (no FMA)."""
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(cache=True, inline="always")
def _clear_of_ties(r: float, d: float) -> bool:
    """Whether ``r + d`` (``d`` the exact value's offset from ``r``) lies within 0.445 ulp of
    ``r``, ``r`` no power of two (whose lower neighbour is nearer): then any ``pow`` accurate
    to 0.555 ulp returns ``r``, the only double that close. glibc's is to 0.54 ulp."""
    return r + 1.125 * d == r and np.float64(r).view(np.int64) & _MANTISSA != 0


@njit(cache=True, inline="always")
def _pow2(x: float, two: float, bounded: bool) -> float:
    """``pow(x, two)`` for ``two == 2.0``: ``x * x`` when it is clear of a rounding tie
    (nine times in ten) and the C library's ``pow`` is ``bounded``, else the call."""
    if bounded and 1e-140 < abs(x) < 1e140:  # no underflow in x * x and its exact remainder
        p, e = _two_prod(x, x)
        if _clear_of_ties(p, e):
            return p
    return _c_pow(x, two)


@njit(cache=True, inline="always")
def _pow_half(v: float, half: float, bounded: bool) -> float:
    """``pow(v, half)`` for ``half == 0.5``: ``sqrt(v)`` when it is clear of a rounding tie
    and the C library's ``pow`` is ``bounded``, else the call."""
    if bounded and 1e-200 < v < 1e200:  # no underflow in s * s and its exact remainder
        s = math.sqrt(v)
        p, e = _two_prod(s, s)
        # sqrt(v) - s == (v - s*s) / (sqrt(v) + s); v - p is exact (Sterbenz)
        if _clear_of_ties(s, ((v - p) - e) / (s + s)):
            return s
    return _c_pow(v, half)


@njit(cache=True)
def _pow_from(src: np.ndarray, start: int, exponent: float) -> np.ndarray:
    out = np.full(src.size, np.nan)
    for i in range(start, src.size):
        out[i] = _c_pow(src[i], exponent)
    return out


# The exponent reaches these kernels at run time and is never compared in them: an LLVM that
# knew it is 2.0 would rewrite the fallback pow(x, 2.0) into x * x.


@njit(cache=True)
def _squares_from(src: np.ndarray, start: int, two: float, bounded: bool) -> np.ndarray:
    out = np.full(src.size, np.nan)
    for i in range(start, src.size):
        out[i] = _pow2(src[i], two, bounded)
    return out


@njit(cache=True)
def _roots_from(src: np.ndarray, start: int, half: float, bounded: bool) -> np.ndarray:
    out = np.full(src.size, np.nan)
    for i in range(start, src.size):
        out[i] = _pow_half(src[i], half, bounded)
    return out


@njit(cache=True)
def _std_from(
    mean: np.ndarray, meansq: np.ndarray, start: int, two: float, half: float, bounded: bool
):
    """``pow(abs(meansq - pow(mean, 2)), 0.5)`` (StandardDeviation with safepow)."""
    out = np.full(mean.size, np.nan)
    for i in range(start, mean.size):
        out[i] = _pow_half(abs(meansq[i] - _pow2(mean[i], two, bounded)), half, bounded)
    return out


@njit(cache=True)
def _change(src: np.ndarray, period: int, relative: bool) -> tuple[np.ndarray, bool]:
    """ROC ``(x - x[-p]) / x[-p]`` or PercentChange ``x / x[-p] - 1.0``; flag: x[-p] == 0."""
    out = np.full(src.size, np.nan)
    for i in range(period, src.size):
        base = src[i - period]
        if base == 0.0:
            return out, True
        out[i] = (src[i] - base) / base if relative else src[i] / base - 1.0
    return out, False


@njit(cache=True)
def _rsi_safe(close: np.ndarray, period: int, alpha: float, alpha1: float) -> np.ndarray:
    """RSI(safediv=True): SMMA of up and down days; rs = up/down, inf for x/0, 1.0 for 0/0."""
    n = close.size
    up = np.full(n, np.nan)
    down = np.full(n, np.nan)
    for i in range(1, n):
        d = close[i] - close[i - 1]
        up[i] = 0.0 if d < 0.0 else d  # builtin max(d, 0.0): the first when equal
        d = close[i - 1] - close[i]
        down[i] = 0.0 if d < 0.0 else d
    maup = exp_smoothing(up, period, 1, alpha, alpha1)
    madown = exp_smoothing(down, period, 1, alpha, alpha1)
    out = np.full(n, np.nan)
    for i in range(period, n):
        a, b = maup[i], madown[i]
        # DivZeroByZero(maup, madown, single=inf, dual=1.0): rs of RSI 100 and of RSI 50
        rs = (1.0 if a == 0.0 else np.inf) if b == 0.0 else a / b
        out[i] = 100.0 - 100.0 / (1.0 + rs)
    return out


@njit(cache=True)
def _true_range(high: np.ndarray, low: np.ndarray, close: np.ndarray) -> np.ndarray:
    out = np.full(close.size, np.nan)
    for i in range(1, close.size):
        prev = close[i - 1]
        th = prev if prev > high[i] else high[i]  # max(high, close(-1))
        tl = prev if prev < low[i] else low[i]  # min(low, close(-1))
        out[i] = th - tl
    return out


@njit(cache=True)
def _adx(
    high: np.ndarray, low: np.ndarray, atr: np.ndarray, period: int, alpha: float, alpha1: float
) -> tuple[np.ndarray, bool]:
    """ADX: +DM/-DM smoothed, DI = 100 * DMav / ATR, DX = |DI+ - DI-| / (DI+ + DI-),
    ADX = 100 * SMMA(DX). Flag: a division by zero backtrader would raise on."""
    n = high.size
    plus = np.full(n, np.nan)
    minus = np.full(n, np.nan)
    for i in range(1, n):
        upmove = high[i] - high[i - 1]
        downmove = low[i - 1] - low[i]
        plus[i] = upmove if (upmove > downmove and upmove > 0.0) else 0.0
        minus[i] = downmove if (downmove > upmove and downmove > 0.0) else 0.0
    plus_av = exp_smoothing(plus, period, 1, alpha, alpha1)
    minus_av = exp_smoothing(minus, period, 1, alpha, alpha1)
    dx = np.full(n, np.nan)
    for i in range(period, n):
        if atr[i] == 0.0:
            return dx, True
        di_plus = 100.0 * plus_av[i] / atr[i]
        di_minus = 100.0 * minus_av[i] / atr[i]
        total = di_plus + di_minus
        if total == 0.0:
            return dx, True
        dx[i] = abs(di_plus - di_minus) / total
    out = exp_smoothing(dx, period, period, alpha, alpha1)
    for i in range(2 * period - 1, n):
        out[i] = 100.0 * out[i]
    return out, False


@njit(cache=True)
def _crossings(
    values: np.ndarray, a_at: np.ndarray, b_at: np.ndarray, firsts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    # CrossOver: +1 / -1 from index ``first + 1``, with NonZeroDifference's memory (the last
    # non-zero difference), its sign written straight to the two rows
    k, n = a_at.size, values.shape[1]
    up = np.zeros((k, n), np.bool_)
    down = np.zeros((k, n), np.bool_)
    for r in range(k):
        a, b, first = values[a_at[r]], values[b_at[r]], firsts[r]
        if first >= n:
            continue
        u, dn = up[r], down[r]
        nzd = a[first] - b[first]
        for i in range(first + 1, n):
            ai, bi = a[i], b[i]
            u[i] = nzd < 0.0 and ai > bi
            dn[i] = nzd > 0.0 and ai < bi
            d = ai - bi
            nzd = d if d != 0.0 else nzd  # a select, not a branch (NaN != 0.0, as ``if d``)
    return up, down


# ---------------------------------------------------------------------------- public API


def _alpha_ema(period: int) -> tuple[float, float]:
    alpha = 2.0 / (1.0 + period)
    return alpha, 1.0 - alpha


def _alpha_smma(period: int) -> tuple[float, float]:
    alpha = 1.0 / period
    return alpha, 1.0 - alpha


def sma(src: np.ndarray, period: int, start: int = 0) -> np.ndarray:
    """Simple moving average, as Backtrader computes it."""
    return window_fsum_mean(src, period, start)


def ema(src: np.ndarray, period: int, start: int = 0) -> np.ndarray:
    """Exponential moving average, as Backtrader computes it."""
    return exp_smoothing(src, period, start, *_alpha_ema(period))


def smma(src: np.ndarray, period: int, start: int = 0) -> np.ndarray:
    """Smoothed (Wilder) moving average, as Backtrader computes it."""
    return exp_smoothing(src, period, start, *_alpha_smma(period))


def roc(close: np.ndarray, period: int) -> np.ndarray:
    """Rate of change over ``period`` bars; raises on a zero close, as Backtrader would."""
    out, zero = _change(close, period, True)
    if zero:
        raise IndicatorZeroDivision(f"RateOfChange({period}): a close of 0.0")
    return out


def pct_change(close: np.ndarray, period: int = 1) -> np.ndarray:
    """Percent change over ``period`` bars; raises on a zero close, as Backtrader would."""
    out, zero = _change(close, period, False)
    if zero:
        raise IndicatorZeroDivision(f"PercentChange({period}): a close of 0.0")
    return out


def power(src: np.ndarray, exponent: float, start: int = 0) -> np.ndarray:
    """``pow(line, exponent)`` with the C library's pow, as CPython computes ``x ** y``."""
    exponent = float(exponent)
    if exponent == 2.0:
        return _squares_from(src, start, exponent, POW_BOUNDED)
    if exponent == 0.5:
        return _roots_from(src, start, exponent, POW_BOUNDED)
    return _pow_from(src, start, exponent)


def stddev(src: np.ndarray, period: int, start: int = 0, mean: np.ndarray | None = None):
    """StandardDeviation(safepow=True); ``mean`` given: BollingerBands' two-data form."""
    if mean is None:
        mean = sma(src, period, start)
    meansq = sma(power(src, 2.0, start), period, start)
    return _std_from(mean, meansq, start + period - 1, 2.0, 0.5, POW_BOUNDED)


def bollinger(close: np.ndarray, period: int, devfactor: float):
    """(mid, top, bot) of BollingerBands(period, devfactor)."""
    mid = sma(close, period)
    dev = float(devfactor) * stddev(close, period, mean=mid)
    return mid, mid + dev, mid - dev


def rsi_safe(close: np.ndarray, period: int) -> np.ndarray:
    """RSI that stays defined when a window has no losses (Backtrader's ``RSI_Safe``)."""
    return _rsi_safe(close, period, *_alpha_smma(period))


def atr(high: np.ndarray, low: np.ndarray, close: np.ndarray, period: int = 14) -> np.ndarray:
    """Average true range (Wilder smoothing of the true range), as Backtrader computes it."""
    return smma(_true_range(high, low, close), period, 1)


def adx(
    high: np.ndarray,
    low: np.ndarray,
    close: np.ndarray,
    period: int = 14,
    atr_values: np.ndarray | None = None,
) -> np.ndarray:
    """ADX(period); ``atr_values``: the ATR(period) of the same bars, when already computed."""
    if atr_values is None:
        atr_values = atr(high, low, close, period)
    out, zero = _adx(high, low, atr_values, period, *_alpha_smma(period))
    if zero:
        raise IndicatorZeroDivision(f"ADX({period}): a zero ATR or DI+ + DI-")
    return out


def highest_before(src: np.ndarray, period: int) -> np.ndarray:
    """``Highest(line(-1), period)``: the maximum of the ``period`` bars before each bar."""
    out = np.full(src.size, np.nan)
    if src.size > period:
        out[1:] = talib.MAX(src[:-1], timeperiod=period)
    return out


def lowest_before(src: np.ndarray, period: int) -> np.ndarray:
    """``Lowest(line(-1), period)``."""
    out = np.full(src.size, np.nan)
    if src.size > period:
        out[1:] = talib.MIN(src[:-1], timeperiod=period)
    return out


def crossings(
    values: np.ndarray, a_at: npt.ArrayLike, b_at: npt.ArrayLike, firsts: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """(``CrossOver(...) > 0``, ``CrossOver(...) < 0``) of ``values[a_at[r]]`` and
    ``values[b_at[r]]`` from ``firsts[r]``, for every row ``r`` in one compiled call: a
    sweep's pairs of averages read from one stack, without a float matrix of the crossovers."""
    return _crossings(
        np.ascontiguousarray(values, dtype=np.float64),
        np.asarray(a_at, dtype=np.int64),
        np.asarray(b_at, dtype=np.int64),
        np.asarray(firsts, dtype=np.int64),
    )
