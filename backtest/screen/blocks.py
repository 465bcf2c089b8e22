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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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


@dataclass(frozen=True)
class Rows:
    """One array per spec of a group, stacked: spec ``k``'s is ``values[at[k]]``. Specs that
    share an array share its row, so an expression over ``values`` computes it once."""

    values: np.ndarray  # the distinct arrays x bars
    at: np.ndarray  # int64: each spec's row

    def of(self, k: int) -> np.ndarray:
        """Spec ``k``'s array (a view of its row)."""
        return self.values[self.at[k]]


def shared(array: np.ndarray, k: int) -> Rows:
    """``array`` for each of ``k`` specs: one row, no copy."""
    return Rows(array[None, :], np.zeros(k, dtype=np.int64))


def _index(keys: list) -> tuple[list, np.ndarray]:
    """(the distinct keys in first-seen order, each key's position among them)."""
    where: dict = {}
    at = [where.setdefault(key, len(where)) for key in keys]
    return list(where), np.array(at, dtype=np.int64)


def _distinct(keys: list, compute: Callable[[Any], np.ndarray]) -> Rows:
    """``compute(key)`` once per distinct key, stacked: the rows of ``keys``."""
    distinct, at = _index(keys)
    return Rows(np.stack([compute(key) for key in distinct]), at)


def _compare(op: Callable, rows: Rows, thresholds: np.ndarray) -> Rows:
    """``op(array, threshold)`` of each spec, once per distinct (array, threshold)."""
    distinct, at = _index(list(zip(rows.at.tolist(), thresholds.tolist(), strict=True)))
    row = np.array([r for r, _ in distinct], dtype=np.int64)
    thr = np.array([t for _, t in distinct], dtype=np.float64)
    return Rows(op(rows.values[row], thr[:, None]), at)


def _and(a: Rows, b: Rows) -> Rows:
    """``a & b`` of each spec, once per distinct pair of rows."""
    distinct, at = _index(list(zip(a.at.tolist(), b.at.tolist(), strict=True)))
    ra = np.array([r for r, _ in distinct], dtype=np.int64)
    rb = np.array([r for _, r in distinct], dtype=np.int64)
    return Rows(a.values[ra] & b.values[rb], at)


def _nan_lead(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row's count of leading NaN, whether a NaN follows its first value)."""
    nan = np.isnan(values)
    lead = np.where(nan.all(axis=1), values.shape[1], nan.argmin(axis=1))
    return lead, nan.sum(axis=1) > lead


@dataclass
class Conditions:
    """What the blocks contribute for a group of specs sharing their blocks, one row each: the
    signals, the values ``_ready`` checks, minperiods (``conditions``)."""

    n: int
    k: int  # the specs
    long_entry: Rows | None = None
    short_entry: Rows | None = None
    long_exit: Rows | None = None
    short_exit: Rows | None = None
    checks: list[Rows] = field(default_factory=list)  # must be non-NaN to trade
    firsts: list[np.ndarray] = field(default_factory=list)  # each indicator's first index
    atr: Rows | None = None  # the shared ATR(14), when the specs create it
    realised_sd: Rows | None = None  # volatility_target's realised deviation

    def hold(self, first: int | np.ndarray, *arrays: Rows) -> None:
        """Record an indicator's first valid index and the arrays that must be non-NaN to trade."""
        self.firsts.append(np.broadcast_to(np.asarray(first, dtype=np.int64), (self.k,)))
        self.checks.extend(arrays)

    def also(self, long_ok: Rows, short_ok: Rows) -> None:
        """AND a filter into the entries."""
        self.long_entry = _and(self.long_entry, long_ok)  # type: ignore[arg-type]
        self.short_entry = _and(self.short_entry, short_ok)  # type: ignore[arg-type]

    def readiness(self) -> tuple[np.ndarray, Rows]:
        """(each spec's first bar of ``next``, its readiness): ``simulate``'s ``M_START`` and
        ``ready``. Where the checks' NaN are only leading ones, readiness is the bar after the
        last of them, folded into the start, and the ready row is all true; a spec whose
        checks hold a later NaN gets its exact row (every check non-NaN)."""
        start = np.max(np.stack(self.firsts), axis=0)
        holed = np.zeros(self.k, dtype=bool)
        for rows in self.checks:
            lead, holes = _nan_lead(rows.values)
            start = np.maximum(start, lead[rows.at])
            holed |= holes[rows.at]
        masks = [np.ones(self.n, dtype=bool)]
        at = np.zeros(self.k, dtype=np.int64)
        for k in np.flatnonzero(holed).tolist():
            nan = np.zeros(self.n, dtype=bool)
            for rows in self.checks:
                nan |= np.isnan(rows.of(k))
            at[k] = len(masks)
            masks.append(~nan)
        return start, Rows(np.stack(masks), at)


class Group(list):
    """A group's specs (``conditions``' ``specs``) that remembers what it reads from their
    parameters: a sweep reads the same group on every window, and the parameters do not
    change between windows (``backtest.screen.batch`` keeps one per group)."""

    def __init__(self, specs: list[StrategySpec]) -> None:
        super().__init__(specs)
        self.memo: dict[tuple, Any] = {}


def _memo(specs: list[StrategySpec], key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()``, once per ``Group`` (every call on a plain list)."""
    if not isinstance(specs, Group):
        return compute()
    if key not in specs.memo:
        specs.memo[key] = compute()
    return specs.memo[key]


def _ints(specs: list[StrategySpec], name: str) -> list[int]:
    return list(_memo(specs, ("int", name), lambda: [_int(spec, name) for spec in specs]))


def _nums(specs: list[StrategySpec], name: str) -> np.ndarray:
    return _memo(
        specs,
        ("num", name),
        lambda: np.array([_num(spec, name) for spec in specs], dtype=np.float64),
    ).copy()


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
# Each reader sets the group's conditions from every spec's parameters at once.


def _roc(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    periods = _ints(specs, "roc_period")
    thr = _nums(specs, "roc_threshold")
    roc = _distinct(periods, lambda p: bars.cached(("roc", p), lambda: ind.roc(bars.close, p)))
    out.hold(np.array(periods), roc)
    out.long_entry = _compare(np.greater, roc, thr)
    out.long_exit = _compare(np.less, roc, np.zeros(out.k))
    out.short_entry = _compare(np.less, roc, -thr)
    out.short_exit = _compare(np.greater, roc, np.zeros(out.k))


def _cross(kind: str) -> Callable[[list[StrategySpec], Bars, Conditions], None]:
    average = ind.sma if kind == "sma" else ind.ema

    def read(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
        plan = _memo(specs, ("cross",), lambda: _CrossPlan.of(specs))
        averages = np.stack(
            [bars.cached((kind, p), partial(average, bars.close, p)) for p in plan.periods]
        )
        f = Rows(averages, plan.at[: out.k])
        s = Rows(averages, plan.at[out.k :])
        out.hold(plan.fast - 1, f)
        out.hold(plan.slow - 1, s)
        out.hold(plan.both + 1)
        up, down = ind.crossings(averages, plan.pair_a, plan.pair_b, plan.first_of)
        _cross_signals(Rows(up, plan.pair_at), Rows(down, plan.pair_at), out)

    return read


@dataclass(frozen=True)
class _CrossPlan:
    """What a crossover group reads from its parameters: the distinct periods, each spec's
    pair of averages, each distinct pair's first crossing bar (the same on every window)."""

    fast: np.ndarray
    slow: np.ndarray
    periods: list[int]
    at: np.ndarray  # fast's rows, then slow's, in ``periods``
    both: np.ndarray  # max(fast, slow) - 1
    pair_a: np.ndarray
    pair_b: np.ndarray
    pair_at: np.ndarray
    first_of: np.ndarray

    @classmethod
    def of(cls, specs: list[StrategySpec]) -> _CrossPlan:
        fast = np.array(_ints(specs, "fast_period"), dtype=np.int64)
        slow = np.array(_ints(specs, "slow_period"), dtype=np.int64)
        periods, at = _index(fast.tolist() + slow.tolist())
        k = len(specs)
        both = np.maximum(fast, slow) - 1
        pairs, pair_at = _index(list(zip(at[:k].tolist(), at[k:].tolist(), strict=True)))
        first_of = np.empty(len(pairs), dtype=np.int64)
        first_of[pair_at] = both
        plan = cls(
            fast=fast,
            slow=slow,
            periods=periods,
            at=at,
            both=both,
            pair_a=np.array([a for a, _ in pairs], dtype=np.int64),
            pair_b=np.array([b for _, b in pairs], dtype=np.int64),
            pair_at=pair_at,
            first_of=first_of,
        )
        for a in (fast, slow, at, both, plan.pair_a, plan.pair_b, pair_at, first_of):
            a.setflags(write=False)  # shared by every window: read only
        return plan


def _cross_signals(up: Rows, down: Rows, out: Conditions) -> None:
    out.long_entry, out.long_exit = up, down
    out.short_entry, out.short_exit = down, up


def _macd(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    keys = [
        tuple(_int(spec, k) for k in ("macd_fast", "macd_slow", "macd_signal")) for spec in specs
    ]

    def compute(me1: int, me2: int, sig: int):
        line = ind.ema(bars.close, me1) - ind.ema(bars.close, me2)
        line_first = max(me1, me2) - 1
        signal = ind.ema(line, sig, start=line_first)
        both = line_first + sig - 1
        up, down = ind.crossings(np.stack([line, signal]), [0], [1], [both])
        return line, signal, both, up[0], down[0]

    distinct, at = _index(keys)
    got = [bars.cached(("macd", *key), partial(compute, *key)) for key in distinct]
    both = np.array([g[2] for g in got], dtype=np.int64)[at]
    out.hold(both, Rows(np.stack([g[0] for g in got]), at), Rows(np.stack([g[1] for g in got]), at))
    out.hold(both + 1)
    _cross_signals(
        Rows(np.stack([g[3] for g in got]), at), Rows(np.stack([g[4] for g in got]), at), out
    )


def _rsi(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    periods = _ints(specs, "rsi_period")
    rsi = _distinct(periods, lambda p: bars.cached(("rsi", p), lambda: ind.rsi_safe(bars.close, p)))
    out.hold(np.array(periods), rsi)
    out.long_entry = _compare(np.less, rsi, _nums(specs, "rsi_oversold"))
    out.long_exit = _compare(np.greater, rsi, _nums(specs, "rsi_exit"))


def _bbands(specs: list[StrategySpec], bars: Bars) -> tuple[Rows, Rows, Rows, np.ndarray]:
    keys = [(_int(spec, "bb_period"), _num(spec, "bb_width")) for spec in specs]
    distinct, at = _index(keys)
    got = [
        bars.cached(("bbands", *key), partial(ind.bollinger, bars.close, *key)) for key in distinct
    ]
    mid, top, bot = (Rows(np.stack([g[j] for g in got]), at) for j in range(3))
    return mid, top, bot, np.array([p for p, _ in keys], dtype=np.int64) - 1


def _bb_reversion(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    mid, _, bot, first = _bbands(specs, bars)
    out.hold(first, bot, mid)
    close = bars.close
    out.long_entry, out.long_exit = (
        Rows(close < bot.values, bot.at),
        Rows(close > mid.values, mid.at),
    )


def _bb_breakout(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    mid, top, bot, first = _bbands(specs, bars)
    out.hold(first, top, mid, bot)
    close = bars.close
    out.long_entry, out.long_exit = (
        Rows(close > top.values, top.at),
        Rows(close < mid.values, mid.at),
    )
    out.short_entry = Rows(close < bot.values, bot.at)
    out.short_exit = Rows(close > mid.values, mid.at)


def _donchian(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    periods = _ints(specs, "donchian_period")
    exits = _ints(specs, "donchian_exit_period")

    def channel(name: str, src: np.ndarray, edge: Callable, keys: list[int]) -> Rows:
        return _distinct(keys, lambda p: bars.cached((name, p), lambda: edge(src, p)))

    upper = channel("highest", bars.high, ind.highest_before, periods)
    lower = channel("lowest", bars.low, ind.lowest_before, periods)
    exit_low = channel("lowest", bars.low, ind.lowest_before, exits)
    exit_high = channel("highest", bars.high, ind.highest_before, exits)
    out.hold(np.array(periods), upper, lower)
    out.hold(np.array(exits), exit_low, exit_high)
    close = bars.close
    out.long_entry = Rows(close > upper.values, upper.at)
    out.long_exit = Rows(close < exit_low.values, exit_low.at)
    out.short_entry = Rows(close < lower.values, lower.at)
    out.short_exit = Rows(close > exit_high.values, exit_high.at)


ENTRY_READERS: dict[str, Callable[[list[StrategySpec], Bars, Conditions], None]] = {
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


def _trend_sma(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    periods = _ints(specs, "trend_period")
    trend = _distinct(periods, lambda p: bars.cached(("sma", p), lambda: ind.sma(bars.close, p)))
    out.hold(np.array(periods) - 1, trend)
    close = bars.close
    out.also(Rows(close > trend.values, trend.at), Rows(close < trend.values, trend.at))


def _adx(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    # ADX's own ATR: the very ATR(14) the exits or the sizing may hold, computed once
    atr = bars.cached(
        ("atr", ADX_PERIOD), lambda: ind.atr(bars.high, bars.low, bars.close, ADX_PERIOD)
    )
    adx = bars.cached(
        ("adx", ADX_PERIOD),
        lambda: ind.adx(bars.high, bars.low, bars.close, ADX_PERIOD, atr_values=atr),
    )
    out.hold(2 * ADX_PERIOD - 1, shared(adx, out.k))
    ok = _compare(np.greater, shared(adx, out.k), _nums(specs, "adx_min"))
    out.also(ok, ok)


def _volume(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    avg = bars.cached(("volume_sma", VOLUME_PERIOD), lambda: ind.sma(bars.volume, VOLUME_PERIOD))
    out.hold(VOLUME_PERIOD - 1, shared(avg, out.k))
    # volume > avg * mult, once per distinct multiplier
    mult, at = _index(_nums(specs, "volume_mult").tolist())
    ok = Rows(bars.volume > avg * np.array(mult)[:, None], at)
    out.also(ok, ok)


def _vol_regime(specs: list[StrategySpec], bars: Bars, out: Conditions) -> None:
    # atr < atr_max_pct * close, once per distinct cap; the ATR is held through the needs
    cap, at = _index(_nums(specs, "atr_max_pct").tolist())
    ok = Rows(bars.atr() < np.array(cap)[:, None] * bars.close, at)
    out.also(ok, ok)


FILTER_READERS: dict[str, Callable[[list[StrategySpec], Bars, Conditions], None]] = {
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
    check_parameters(spec, check_blocks(spec))


def shape(spec: StrategySpec) -> tuple:
    """Everything of ``spec`` that ``check_blocks`` reads (sets of one shape share its
    answer)."""
    return (
        spec.is_custom,
        spec.scope,
        spec.family,
        spec.entry,
        tuple(spec.filters),
        tuple(spec.exits),
        spec.sizing,
    )


def check_parameters(spec: StrategySpec, needed: Iterable[str]) -> None:
    """Raise ``Unsupported`` for the first of the blocks' ``needed`` parameters that ``spec``
    lacks or holds an unusable value for."""
    missing = [p for p in needed if p not in spec.parameters]
    if missing:
        raise Unsupported("parameters", f"missing {missing} (see families.reconcile)")
    for name in needed:
        (_int if name in INT_PARAMS else _num)(spec, name)


def check_blocks(spec: StrategySpec) -> list[str]:
    """Raise ``Unsupported`` naming the first block the screen cannot reproduce; else the
    parameters the blocks read, in their reading order (``check_parameters``)."""
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
    return list(required_params(spec.entry, spec.filters, spec.exits, spec.sizing))


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


def conditions(specs: list[StrategySpec], bars: Bars, shorts: bool) -> Conditions:
    """The entry (AND its filters), the entry's own exits, the readiness checks, minperiods of
    ``specs``, one row each: specs sharing their blocks, shorting alike (a sweep's sets, or one
    spec), that differ in their parameters."""
    spec = specs[0]
    out = Conditions(n=len(bars), k=len(specs))
    out.hold(0, shared(bars.close, out.k))
    if needs_atr(spec):
        out.atr = shared(bars.atr(), out.k)
        out.hold(ATR_PERIOD, out.atr)
    ENTRY_READERS[spec.entry](specs, bars, out)
    if out.short_entry is None or not shorts:
        # one all-false array per window (never written to)
        none = bars.cached(("false",), lambda: np.zeros(out.n, dtype=bool))
        out.short_entry = out.short_exit = shared(none, out.k)
    for f in spec.filters:
        FILTER_READERS[f](specs, bars, out)
    if spec.sizing == "volatility_target":
        lookbacks = _ints(specs, "vol_lookback")

        def realised(lookback: int) -> np.ndarray:
            returns = bars.cached(("pct_change", 1), lambda: ind.pct_change(bars.close, 1))
            return ind.stddev(returns, lookback, start=1)

        out.realised_sd = _distinct(
            lookbacks, lambda b: bars.cached(("realised_sd", b), lambda: realised(b))
        )
        out.firsts.append(np.ones(out.k, dtype=np.int64))  # the PercentChange the strategy holds
        out.hold(np.array(lookbacks), out.realised_sd)
    return out
