"""Many parameter sets on one window: each indicator once, one compiled call for every set.

Why: screened one by one (``screening.evaluate``), a (set, window) pair paid ~60 us of Python
around a ~30 us kernel: the checks, the conditions, the readiness, the kernel's arguments, its
dispatch and the returns. A sweep (``backtest.screen.sweep``) screens hundreds of sets that
differ mostly in a few parameters, so here the sets are prepared once (``prepare``: checked, their
``modes`` and ``knobs`` rows), the conditions are built once per window for each distinct
condition key (the blocks and the parameters ``blocks.conditions`` reads: sets that differ only in
their exits' or sizing's knobs share them; the indicators come from the window's cache as
before), and ``fills.simulate_many`` runs ``fills.simulate`` for every set in one call. The
arrays are the per-set path's, so the values, fills and returns are bit for bit the same
(``tests/backtest/test_bt_screen_batch.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from backtest.contracts import CostModel
from backtest.screen import blocks
from backtest.screen import fills as sf
from backtest.screen.equity import BooksEquity
from backtest.screen.indicators import IndicatorZeroDivision
from backtest.screen.screening import _KNOB_PARAMS, Window, kernel_settings
from strategies.codegen import is_short_enabled
from strategies.spec import StrategySpec

# Parameters only ``simulate``'s knobs read: sets differing in these alone share conditions.
KNOB_ONLY = frozenset({name for _, name in _KNOB_PARAMS} | {"max_hold_bars"})


def condition_key(spec: StrategySpec) -> tuple:
    """Everything of ``spec`` that ``blocks.conditions`` may read: its blocks, whether it
    shorts, and every parameter but those only the kernel's knobs read."""
    params = tuple(sorted((k, v) for k, v in spec.parameters.items() if k not in KNOB_ONLY))
    return (
        spec.entry,
        tuple(spec.filters),
        tuple(sorted(set(spec.exits))),
        spec.sizing,
        is_short_enabled(spec),
        params,
    )


@dataclass
class Prepared:
    """The sets of a sweep, checked once: their condition keys and kernel rows."""

    specs: list[StrategySpec]  # one spec per condition key (the first set that has it)
    key_of: np.ndarray  # each set's key index
    modes: np.ndarray  # sets x ``N_MODES`` (``M_START`` and ``M_FIRST`` set per window)
    knobs: np.ndarray  # sets x ``N_KNOBS``
    cash: float


def prepare(specs: list[StrategySpec], costs: CostModel, bars_per_year: int) -> Prepared:
    """Check every set (``Unsupported`` names the first the screen cannot reproduce) and build
    its kernel rows."""
    keys: dict[tuple, int] = {}
    firsts: list[StrategySpec] = []
    key_of, modes, knobs = [], [], []
    for spec in specs:
        blocks.check_supported(spec)
        key = condition_key(spec)
        if key not in keys:
            keys[key] = len(firsts)
            firsts.append(spec)
        key_of.append(keys[key])
        m, k = kernel_settings(spec, costs, bars_per_year)
        modes.append(m)
        knobs.append(k)
    return Prepared(
        specs=firsts,
        key_of=np.array(key_of, dtype=np.int64),
        modes=np.array(modes, dtype=np.int64).reshape(len(specs), sf.N_MODES),
        knobs=np.array(knobs, dtype=np.float64).reshape(len(specs), sf.N_KNOBS),
        cash=costs.cash,
    )


class _Rows:
    """Arrays stacked once each (by identity: the window's cache hands out the same array)."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self._at: dict[int, int] = {}

    def row(self, array: np.ndarray) -> int:
        at = self._at.get(id(array))
        if at is None:
            at = self._at[id(array)] = len(self.arrays)
            self.arrays.append(array)
        return at

    def stack(self, n: int, dtype: type) -> np.ndarray:
        return np.stack(self.arrays) if self.arrays else np.zeros((1, n), dtype=dtype)


@dataclass
class _Keys:
    """The window's conditions of every key, as ``simulate_many``'s arguments."""

    checks: _Rows = field(default_factory=_Rows)
    signals: _Rows = field(default_factory=_Rows)
    series: _Rows = field(default_factory=_Rows)
    check_rows: list[list[int]] = field(default_factory=list)
    signal_rows: list[list[int]] = field(default_factory=list)
    series_rows: list[list[int]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)  # key -> the division by zero


def _conditions(prepared: Prepared, window: Window) -> _Keys:
    """Each key's conditions on ``window`` (a key whose indicator divides by zero: its error)."""
    bars, out = window.bars, _Keys()
    zeros = np.zeros(len(bars))
    for k, spec in enumerate(prepared.specs):
        try:
            cond = blocks.conditions(spec, bars, is_short_enabled(spec))
        except IndicatorZeroDivision as exc:
            out.errors[k] = str(exc)
            cond = None
        if cond is None:  # a placeholder row: no set of this key is run
            out.check_rows.append([])
            out.signal_rows.append([out.signals.row(np.zeros(len(bars), dtype=bool))] * 4)
            out.series_rows.append([out.series.row(zeros)] * 2)
            out.starts.append(0)
            continue
        out.check_rows.append([out.checks.row(a) for a in cond.checks])
        four = (cond.long_entry, cond.short_entry, cond.long_exit, cond.short_exit)
        out.signal_rows.append([out.signals.row(a) for a in four])  # type: ignore[arg-type]
        atr = zeros if cond.atr is None else cond.atr
        sd = zeros if cond.realised_sd is None else cond.realised_sd
        out.series_rows.append([out.series.row(atr), out.series.row(sd)])
        out.starts.append(max(cond.firsts))
    return out


def _padded(rows: list[list[int]]) -> np.ndarray:
    """A ragged list of row indices as a matrix, ``-1`` after each list's end."""
    width = max((len(r) for r in rows), default=0) or 1
    out = np.full((len(rows), width), -1, dtype=np.int64)
    for k, r in enumerate(rows):
        out[k, : len(r)] = r
    return out


@dataclass
class WindowRun:
    """Every set on one window: what the sweep accumulates."""

    whole: np.ndarray  # the sets whose returns span the window's return keys...
    returns: np.ndarray  # ...len(whole) x the window's return keys
    ragged: dict[int, np.ndarray]  # every other set run -> its returns (the books' rules)
    trades: np.ndarray  # closed round trips per set (0 where it did not run)
    errors: dict[int, str]  # set -> the indicator's division by zero


@dataclass(frozen=True)
class _Books(BooksEquity):
    """One set's values on the window, for the books' own equity rules (a bankruptcy, or a
    fold starting at the window's first bar)."""

    window: Window
    values: np.ndarray
    cash: float


def run_window(prepared: Prepared, window: Window) -> WindowRun:
    """Every prepared set on ``window`` through one ``simulate_many`` call."""
    bars = window.bars
    keys = _conditions(prepared, window)
    failed = np.array([k in keys.errors for k in range(len(prepared.specs))], dtype=bool)
    live = np.flatnonzero(~failed[prepared.key_of])
    key_of = prepared.key_of[live]
    modes = prepared.modes[live]
    modes[:, sf.M_START] = np.array(keys.starts, dtype=np.int64)[key_of]
    modes[:, sf.M_FIRST] = window.first
    values, n_fills = sf.simulate_many(
        bars.open,
        bars.high,
        bars.low,
        bars.close,
        keys.checks.stack(len(bars), np.float64),
        _padded(keys.check_rows),
        keys.signals.stack(len(bars), np.bool_),
        _padded(keys.signal_rows),
        keys.series.stack(len(bars), np.float64),
        _padded(keys.series_rows),
        key_of,
        modes,
        prepared.knobs[live],
    )
    trades = np.zeros(prepared.key_of.size, dtype=np.int64)
    trades[live] = n_fills // 2
    errors: dict[int, str] = {}
    if keys.errors:
        for s in np.flatnonzero(failed[prepared.key_of]).tolist():
            errors[s] = keys.errors[int(prepared.key_of[s])]
    return _returns(values, live, window, prepared.cash, trades, errors)


def _returns(
    values: np.ndarray,
    live: np.ndarray,
    window: Window,
    cash: float,
    trades: np.ndarray,
    errors: dict[int, str],
) -> WindowRun:
    """``BooksEquity.returns`` of every row: at once where the value before the fold's first
    bar is on record and no set goes bankrupt, else row by row by the books' rules."""
    first = window.first
    # from the fold's first bar the equity starts at the cash: the books' rules for every row
    whole = (values[:, first:] > 0.0).all(axis=1) if first else np.zeros(len(live), dtype=bool)
    broke = ~whole
    ragged = {
        int(live[r]): _Books(window, values[r], cash).returns() for r in np.flatnonzero(broke)
    }
    if broke.any():
        values, live = values[~broke], live[~broke]
    if first == 0:
        returns = np.zeros((0, len(window.return_keys)))
    else:
        returns = values[:, first:] / values[:, first - 1 : -1] - 1.0
    return WindowRun(whole=live, returns=returns, ragged=ragged, trades=trades, errors=errors)
