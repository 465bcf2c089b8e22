"""From a spec's blocks to the screen's arrays: conditions, readiness and the first bar of ``next``.

Each supported block of ``strategies.blocks`` has a reader here that computes the indicators its
Backtrader code creates (``backtest.screen.indicators``) and the boolean arrays of its
conditions, evaluated as the generated code evaluates them (the same comparisons, on the same
doubles, NaN comparing false). A block without a reader, a portfolio or pipeline family, or code
written outside the catalogue raises ``Unsupported``: the screen never approximates.

The first bar on which backtrader calls the strategy's ``next`` is the largest minperiod of the
indicators the strategy holds, minus one; ``Indicators.first`` records it per indicator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from backtest.screen import fills as sf
from backtest.screen import indicators as ind
from strategies.blocks import ENTRIES, EXITS, FILTERS, SIZINGS, required_params
from strategies.family_api import whole_universe
from strategies.regime import REGIME_FILTERS
from strategies.spec import Family, StrategySpec

SUPPORTED = frozenset(Family)  # the block families: one symbol timed by catalogue blocks

# Parameters backtrader uses as periods: an int is required (a float period fails in backtrader).
INT_PARAMS = frozenset(
    {
        "roc_period",
        "fast_period",
        "slow_period",
        "macd_fast",
        "macd_slow",
        "macd_signal",
        "rsi_period",
        "bb_period",
        "donchian_period",
        "donchian_exit_period",
        "trend_period",
        "vol_lookback",
    }
)
ATR_PERIOD = 14
ADX_PERIOD = 14
VOLUME_PERIOD = 20


class Unsupported(Exception):
    """The screen cannot reproduce this spec; ``block`` names what it cannot reproduce."""

    def __init__(self, block: str, why: str) -> None:
        super().__init__(f"{block}: {why}")
        self.block = block


class Bars:
    """One symbol's fed bars as float64 arrays, with a cache of the indicators computed on them.

    A sweep screens many parameter sets on the same bars: an indicator with the same inputs is
    computed once (``cached``).
    """

    def __init__(self, open_, high, low, close, volume) -> None:
        self.open = np.ascontiguousarray(open_, dtype=np.float64)
        self.high = np.ascontiguousarray(high, dtype=np.float64)
        self.low = np.ascontiguousarray(low, dtype=np.float64)
        self.close = np.ascontiguousarray(close, dtype=np.float64)
        self.volume = np.ascontiguousarray(volume, dtype=np.float64)
        self._cache: dict[tuple, object] = {}

    def __len__(self) -> int:
        return self.close.size

    def cached(self, key: tuple, compute: Callable[[], object]):
        """The value under ``key``, computed by ``compute`` the first time it is asked for."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def atr(self) -> np.ndarray:
        """The shared ATR(14) of the bars."""
        return self.cached(("atr", ATR_PERIOD), lambda: ind.atr(self.high, self.low, self.close))


@dataclass
class Conditions:
    """What the blocks contribute: the signals, the values ``_ready`` checks, minperiods."""

    n: int
    long_entry: np.ndarray | None = None
    short_entry: np.ndarray | None = None
    long_exit: np.ndarray | None = None
    short_exit: np.ndarray | None = None
    checks: list[np.ndarray] = field(default_factory=list)  # must be non-NaN to trade
    firsts: list[int] = field(default_factory=list)  # each indicator's first value's index
    atr: np.ndarray | None = None  # the shared ATR(14), when the spec creates it
    realised_sd: np.ndarray | None = None  # volatility_target's realised deviation

    def hold(self, first: int, *arrays: np.ndarray) -> None:
        """Record an indicator's first valid index and the arrays that must be non-NaN to trade."""
        self.firsts.append(first)
        self.checks.extend(arrays)

    def also(self, long_ok: np.ndarray, short_ok: np.ndarray) -> None:
        """AND a filter into the entries."""
        self.long_entry = self.long_entry & long_ok
        self.short_entry = self.short_entry & short_ok


def _int(spec: StrategySpec, name: str) -> int:
    value = spec.parameters[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Unsupported(name, f"a period must be a positive int, got {value!r}")
    return value


def _num(spec: StrategySpec, name: str) -> float:
    value = spec.parameters[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Unsupported(name, f"must be a finite number, got {value!r}")
    return float(value)


# ---------------------------------------------------------------------------- entries


def _roc(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    period, thr = _int(spec, "roc_period"), _num(spec, "roc_threshold")
    roc = bars.cached(("roc", period), lambda: ind.roc(bars.close, period))
    out.hold(period, roc)
    out.long_entry, out.long_exit = roc > thr, roc < 0.0
    out.short_entry, out.short_exit = roc < -thr, roc > 0.0


def _cross(kind: str) -> Callable[[StrategySpec, Bars, Conditions], None]:
    average = ind.sma if kind == "sma" else ind.ema

    def read(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
        fast, slow = _int(spec, "fast_period"), _int(spec, "slow_period")
        f = bars.cached((kind, fast), lambda: average(bars.close, fast))
        s = bars.cached((kind, slow), lambda: average(bars.close, slow))
        both = max(fast, slow) - 1
        cross = bars.cached((kind + "_cross", fast, slow), lambda: ind.crossover(f, s, both))
        out.hold(fast - 1, f)
        out.hold(slow - 1, s)
        out.hold(both + 1)
        _cross_signals(cross, out)

    return read


def _cross_signals(cross: np.ndarray, out: Conditions) -> None:
    up, down = cross > 0, cross < 0
    out.long_entry, out.long_exit = up, down
    out.short_entry, out.short_exit = down, up


def _macd(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    me1, me2, sig = (_int(spec, k) for k in ("macd_fast", "macd_slow", "macd_signal"))

    def compute():
        line = ind.ema(bars.close, me1) - ind.ema(bars.close, me2)
        line_first = max(me1, me2) - 1
        signal = ind.ema(line, sig, start=line_first)
        both = line_first + sig - 1
        return line, signal, both, ind.crossover(line, signal, both)

    line, signal, both, cross = bars.cached(("macd", me1, me2, sig), compute)
    out.hold(both, line, signal)
    out.hold(both + 1)
    _cross_signals(cross, out)


def _rsi(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    period = _int(spec, "rsi_period")
    low, high = _num(spec, "rsi_oversold"), _num(spec, "rsi_exit")
    rsi = bars.cached(("rsi", period), lambda: ind.rsi_safe(bars.close, period))
    out.hold(period, rsi)
    out.long_entry, out.long_exit = rsi < low, rsi > high


def _bbands(spec: StrategySpec, bars: Bars) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    period, width = _int(spec, "bb_period"), _num(spec, "bb_width")
    mid, top, bot = bars.cached(
        ("bbands", period, width), lambda: ind.bollinger(bars.close, period, width)
    )
    return mid, top, bot, period - 1


def _bb_reversion(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    mid, _, bot, first = _bbands(spec, bars)
    out.hold(first, bot, mid)
    close = bars.close
    out.long_entry, out.long_exit = close < bot, close > mid


def _bb_breakout(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    mid, top, bot, first = _bbands(spec, bars)
    out.hold(first, top, mid, bot)
    close = bars.close
    out.long_entry, out.long_exit = close > top, close < mid
    out.short_entry, out.short_exit = close < bot, close > mid


def _donchian(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    period, exit_period = _int(spec, "donchian_period"), _int(spec, "donchian_exit_period")
    upper = bars.cached(("highest", period), lambda: ind.highest_before(bars.high, period))
    lower = bars.cached(("lowest", period), lambda: ind.lowest_before(bars.low, period))
    exit_low = bars.cached(
        ("lowest", exit_period), lambda: ind.lowest_before(bars.low, exit_period)
    )
    exit_high = bars.cached(
        ("highest", exit_period), lambda: ind.highest_before(bars.high, exit_period)
    )
    out.hold(period, upper, lower)
    out.hold(exit_period, exit_low, exit_high)
    close = bars.close
    out.long_entry, out.long_exit = close > upper, close < exit_low
    out.short_entry, out.short_exit = close < lower, close > exit_high


ENTRY_READERS: dict[str, Callable[[StrategySpec, Bars, Conditions], None]] = {
    "roc_momentum": _roc,
    "sma_cross": _cross("sma"),
    "ema_cross": _cross("ema"),
    "macd_cross": _macd,
    "rsi_reversion": _rsi,
    "bollinger_reversion": _bb_reversion,
    "bollinger_breakout": _bb_breakout,
    "donchian_breakout": _donchian,
}

# ---------------------------------------------------------------------------- filters


def _trend_sma(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    period = _int(spec, "trend_period")
    trend = bars.cached(("sma", period), lambda: ind.sma(bars.close, period))
    out.hold(period - 1, trend)
    out.also(bars.close > trend, bars.close < trend)


def _adx(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    floor = _num(spec, "adx_min")
    # ADX's own ATR: the very ATR(14) the exits or the sizing may hold, computed once
    atr = bars.cached(
        ("atr", ADX_PERIOD), lambda: ind.atr(bars.high, bars.low, bars.close, ADX_PERIOD)
    )
    adx = bars.cached(
        ("adx", ADX_PERIOD),
        lambda: ind.adx(bars.high, bars.low, bars.close, ADX_PERIOD, atr_values=atr),
    )
    out.hold(2 * ADX_PERIOD - 1, adx)
    ok = adx > floor
    out.also(ok, ok)


def _volume(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    mult = _num(spec, "volume_mult")
    avg = bars.cached(("volume_sma", VOLUME_PERIOD), lambda: ind.sma(bars.volume, VOLUME_PERIOD))
    out.hold(VOLUME_PERIOD - 1, avg)
    ok = bars.volume > avg * mult
    out.also(ok, ok)


def _vol_regime(spec: StrategySpec, bars: Bars, out: Conditions) -> None:
    ok = bars.atr() < _num(spec, "atr_max_pct") * bars.close
    out.also(ok, ok)  # the ATR itself is held through the spec's needs


FILTER_READERS: dict[str, Callable[[StrategySpec, Bars, Conditions], None]] = {
    "trend_sma": _trend_sma,
    "adx": _adx,
    "volume_confirm": _volume,
    "vol_regime": _vol_regime,
}

EXIT_BITS: dict[str, int] = {
    "stop_loss": sf.EXIT_STOP_LOSS,
    "take_profit": sf.EXIT_TAKE_PROFIT,
    "atr_stop": sf.EXIT_ATR_STOP,
    "trailing_stop": sf.EXIT_TRAILING,
    "max_hold": sf.EXIT_MAX_HOLD,
    "opposite_signal": sf.EXIT_OPPOSITE,
}

SIZING_CODES: dict[str, int] = {
    "fixed_fraction": sf.SIZE_FIXED_FRACTION,
    "fixed_risk": sf.SIZE_FIXED_RISK,
    "volatility_target": sf.SIZE_VOL_TARGET,
}

# ---------------------------------------------------------------------------- the plan


def supported_blocks() -> dict[str, list[str]]:
    """Every catalogue block the screen reproduces, by kind."""
    return {
        "entries": sorted(ENTRY_READERS),
        "filters": sorted(FILTER_READERS),
        "exits": sorted(EXIT_BITS),
        "sizing": sorted(SIZING_CODES),
    }


def check_supported(spec: StrategySpec) -> None:
    """Raise ``Unsupported`` naming the first thing the screen cannot reproduce."""
    if spec.is_custom:
        raise Unsupported("custom code", "code written outside the block catalogue")
    if whole_universe(spec) or spec.family not in SUPPORTED:
        raise Unsupported(f"family {spec.family}", "only single-symbol block families")
    for f in spec.filters:
        if f in REGIME_FILTERS:  # never approximated: the screen holds one symbol's bars
            raise Unsupported(
                f"filter {f}", "reads an index feed (SPY, QQQ or VIX) beside the symbol"
            )
    kinds = (
        [("entry", spec.entry, ENTRY_READERS, ENTRIES)]
        + [("filter", f, FILTER_READERS, FILTERS) for f in spec.filters]
        + [("exit", x, EXIT_BITS, EXITS) for x in spec.exits]
        + [("sizing", spec.sizing, SIZING_CODES, SIZINGS)]
    )
    for kind, block, readers, catalogue in kinds:
        if block not in catalogue:
            raise Unsupported(f"{kind} {block}", "not in the block catalogue")
        if block not in readers:
            raise Unsupported(f"{kind} {block}", "no vectorised reader for this block")
    needed = required_params(spec.entry, spec.filters, spec.exits, spec.sizing)
    missing = [p for p in needed if p not in spec.parameters]
    if missing:
        raise Unsupported("parameters", f"missing {missing} (see families.reconcile)")
    for name in needed:
        (_int if name in INT_PARAMS else _num)(spec, name)


def needs_atr(spec: StrategySpec) -> bool:
    """``codegen._needs``: the shared ATR(14) exists (and counts for the minperiod)."""
    if "vol_regime" in spec.filters or "atr_stop" in spec.exits:
        return True
    stops = {"atr_stop", "stop_loss", "trailing_stop"}
    return spec.sizing == "fixed_risk" and not stops & set(spec.exits)


def stop_mode(spec: StrategySpec) -> int:
    """``codegen._stop_distance``: the tightest declared stop, else 2 x ATR."""
    if "atr_stop" in spec.exits:
        return sf.STOP_BY_ATR_MULT
    if "stop_loss" in spec.exits:
        return sf.STOP_BY_LOSS_PCT
    if "trailing_stop" in spec.exits:
        return sf.STOP_BY_TRAIL_PCT
    return sf.STOP_BY_TWO_ATR


def conditions(spec: StrategySpec, bars: Bars, shorts: bool) -> Conditions:
    """The entry (AND its filters), the entry's own exits, the readiness checks, minperiods."""
    out = Conditions(n=len(bars))
    out.hold(0, bars.close)
    if needs_atr(spec):
        out.atr = bars.atr()
        out.hold(ATR_PERIOD, out.atr)
    ENTRY_READERS[spec.entry](spec, bars, out)
    if out.short_entry is None or not shorts:
        # one all-false array per window (never written to): a batch stacks it once
        none = bars.cached(("false",), lambda: np.zeros(out.n, dtype=bool))
        out.short_entry = out.short_exit = none
    for f in spec.filters:
        FILTER_READERS[f](spec, bars, out)
    if spec.sizing == "volatility_target":
        lookback = _int(spec, "vol_lookback")

        def realised() -> np.ndarray:
            returns = bars.cached(("pct_change", 1), lambda: ind.pct_change(bars.close, 1))
            return ind.stddev(returns, lookback, start=1)

        out.realised_sd = bars.cached(("realised_sd", lookback), realised)
        out.firsts.append(1)  # the PercentChange the strategy holds
        out.hold(lookback, out.realised_sd)
    return out
