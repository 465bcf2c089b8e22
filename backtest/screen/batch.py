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

from dataclasses import dataclass

import numpy as np

from backtest.contracts import CostModel
from backtest.screen import blocks
from backtest.screen import fills as sf
from backtest.screen.equity import BooksEquity
from backtest.screen.indicators import IndicatorZeroDivision
from backtest.screen.screening import KNOB_PARAMS, Window, kernel_settings
from strategies.codegen import is_short_enabled
from strategies.spec import StrategySpec

# Parameters only ``simulate``'s knobs read: sets differing in these alone share conditions.
KNOB_ONLY = frozenset({name for _, name in KNOB_PARAMS} | {"max_hold_bars"})


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
    """The sets of a sweep, checked once: their condition keys, groups and kernel rows."""

    specs: list[StrategySpec]  # one spec per condition key (the first set that has it)
    key_of: np.ndarray  # each set's key index
    groups: list[list[int]]  # keys sharing their blocks (``blocks.conditions`` stacks them)
    members: list[blocks.Group]  # each group's specs, read by every window
    modes: np.ndarray  # sets x ``N_MODES`` (``M_START`` and ``M_FIRST`` set per window)
    knobs: np.ndarray  # sets x ``N_KNOBS``
    cash: float


def prepare(specs: list[StrategySpec], costs: CostModel, bars_per_year: int) -> Prepared:
    """Check every set (``Unsupported`` names the first the screen cannot reproduce) and build
    its kernel rows."""
    keys: dict[tuple, int] = {}
    groups: dict[tuple, list[int]] = {}
    firsts: list[StrategySpec] = []
    needed: dict[tuple, list[str]] = {}  # each shape's blocks, checked once
    key_of, modes, knobs = [], [], []
    for spec in specs:
        shape = blocks.shape(spec)
        if shape not in needed:
            needed[shape] = blocks.check_blocks(spec)
        blocks.check_parameters(spec, needed[shape])
        key = condition_key(spec)
        if key not in keys:
            keys[key] = len(firsts)
            groups.setdefault(key[:-1], []).append(len(firsts))  # all but the parameters
            firsts.append(spec)
        key_of.append(keys[key])
        m, k = kernel_settings(spec, costs, bars_per_year)
        modes.append(m)
        knobs.append(k)
    return Prepared(
        specs=firsts,
        key_of=np.array(key_of, dtype=np.int64),
        groups=list(groups.values()),
        members=[blocks.Group([firsts[k] for k in g]) for g in groups.values()],
        modes=np.array(modes, dtype=np.int64).reshape(len(specs), sf.N_MODES),
        knobs=np.array(knobs, dtype=np.float64).reshape(len(specs), sf.N_KNOBS),
        cash=costs.cash,
    )


class _Stack:
    """Stacked arrays from several groups: one matrix, each group's rows offset."""

    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []
        self.size = 0

    def add(self, rows: blocks.Rows | None, fallback: np.ndarray) -> np.ndarray:
        """Each key's row in the stack (``fallback``'s one row when the group has no such
        array: every key reads it)."""
        if rows is None:
            rows = blocks.shared(fallback, 1)
        offset = self.size
        self.parts.append(rows.values)
        self.size += len(rows.values)
        return offset + rows.at

    def matrix(self, n: int, dtype: type) -> np.ndarray:
        """The stack (a placeholder row when every key failed: no set reads it)."""
        if not self.parts:
            return np.zeros((1, n), dtype=dtype)
        return self.parts[0] if len(self.parts) == 1 else np.concatenate(self.parts)


@dataclass
class _Keys:
    """The window's conditions of every key, as ``simulate_many``'s arguments."""

    stacks: list[_Stack]  # one per ``R_*`` column
    rows: np.ndarray  # keys x ``N_ROWS``
    starts: np.ndarray  # each key's ``M_START``
    errors: dict[int, str]  # key -> the division by zero


def _grouped(
    prepared: Prepared,
    bars: blocks.Bars,
    group: list[int],
    errors: dict[int, str],
    specs: list[StrategySpec] | None = None,
) -> list[tuple[list[int], blocks.Conditions]]:
    """The group's conditions (``specs``: its members, when the caller holds them); on a
    division by zero, key by key (the failing keys: their error), as the per-set path meets
    it."""
    specs = specs if specs is not None else [prepared.specs[k] for k in group]
    try:
        return [(group, blocks.conditions(specs, bars, is_short_enabled(specs[0])))]
    except IndicatorZeroDivision as exc:
        if len(group) == 1:
            errors[group[0]] = str(exc)
            return []
    return [part for k in group for part in _grouped(prepared, bars, [k], errors)]


def _conditions(prepared: Prepared, window: Window) -> _Keys:
    """Every key's conditions on ``window``, a group of keys at a time."""
    bars = window.bars
    zeros = np.zeros(len(bars))
    n_keys = len(prepared.specs)
    out = _Keys(
        stacks=[_Stack() for _ in range(sf.N_ROWS)],
        rows=np.zeros((n_keys, sf.N_ROWS), dtype=np.int64),
        starts=np.zeros(n_keys, dtype=np.int64),
        errors={},
    )
    for group, members in zip(prepared.groups, prepared.members, strict=True):
        for keys, cond in _grouped(prepared, bars, group, out.errors, members):
            start, ready = cond.readiness()
            out.starts[keys] = start
            arrays = (
                ready,
                cond.long_entry,
                cond.short_entry,
                cond.long_exit,
                cond.short_exit,
                cond.atr,
                cond.realised_sd,
            )
            for col, rows in enumerate(arrays):
                out.rows[keys, col] = out.stacks[col].add(rows, zeros)
    return out


@dataclass
class WindowRun:
    """Every set on one window: what the sweep accumulates."""

    whole: np.ndarray  # the sets whose returns span the window's return keys...
    returns: np.ndarray  # ...len(whole) x the window's return keys (no rows when ``added``)
    ragged: dict[int, np.ndarray]  # every other set run -> its returns (the books' rules)
    trades: np.ndarray  # closed round trips per set (0 where it did not run)
    errors: dict[int, str]  # set -> the indicator's division by zero
    added: bool = False  # the whole sets' returns are already in the caller's ``total``


@dataclass(frozen=True)
class _Books(BooksEquity):
    """One set's values on the window, for the books' own equity rules (a bankruptcy, or a
    fold starting at the window's first bar)."""

    window: Window
    values: np.ndarray
    cash: float


def run_window(
    prepared: Prepared,
    window: Window,
    total: np.ndarray | None = None,
    at: np.ndarray | None = None,
) -> WindowRun:
    """Every prepared set on ``window`` through one ``simulate_many`` call.

    With ``total`` (a row per prepared set) and ``at`` (the window's return keys' columns in
    it), the sets whose returns span the window add them to ``total[set, at]`` in the kernel,
    as ``total[whole, at] += returns`` would (``added``): no matrix of the window's returns is
    written and read back. A fold that starts at the window's first bar adds nothing there."""
    keys = _conditions(prepared, window)
    failed = np.zeros(len(prepared.specs), dtype=bool)
    failed[list(keys.errors)] = True
    live = np.flatnonzero(~failed[prepared.key_of])
    adding = (
        total is not None
        and at is not None
        and window.first > 0
        and len(at) == len(window.bars) - window.first
    )
    trades = np.zeros(prepared.key_of.size, dtype=np.int64)
    series, n_fills, solvent = _simulate(
        prepared, window, keys, live, total if adding else None, at
    )
    trades[live] = n_fills // 2
    errors: dict[int, str] = {}
    if keys.errors:
        for s in np.flatnonzero(failed[prepared.key_of]).tolist():
            errors[s] = keys.errors[int(prepared.key_of[s])]
    if not adding:
        return _returns(series, solvent, live, window, prepared.cash, trades, errors)
    broke = live[~solvent]
    ragged: dict[int, np.ndarray] = {}
    if broke.size:  # their values, run again (the same floats): the books' rules
        values = _simulate(prepared, window, keys, broke, None, at)[0]
        ragged = {
            int(s): _Books(window, values[r], prepared.cash).returns()
            for r, s in enumerate(broke.tolist())
        }
    returns = np.empty((0, len(window.bars) - window.first))
    return WindowRun(live[solvent], returns, ragged, trades, errors, added=True)


def _simulate(
    prepared: Prepared,
    window: Window,
    keys: _Keys,
    live: np.ndarray,
    total: np.ndarray | None,
    at: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``simulate_many`` over the sets ``live`` (adding to ``total`` when given)."""
    bars = window.bars
    key_of = prepared.key_of[live]
    modes = prepared.modes[live]
    modes[:, sf.M_START] = keys.starts[key_of]
    modes[:, sf.M_FIRST] = window.first
    m = [
        stack.matrix(len(bars), np.bool_ if col < sf.R_ATR else np.float64)
        for col, stack in enumerate(keys.stacks)
    ]
    if total is None:
        total, at = np.empty((0, 0)), np.empty(0, dtype=np.int64)
    return sf.simulate_many(
        bars.open,
        bars.high,
        bars.low,
        bars.close,
        m[0],
        m[1],
        m[2],
        m[3],
        m[4],
        m[5],
        m[6],
        keys.rows[key_of],
        modes,
        prepared.knobs[live],
        total,
        np.asarray(at, dtype=np.int64),
        np.asarray(live, dtype=np.int64),
    )


def _returns(
    series: np.ndarray,
    solvent: np.ndarray,
    live: np.ndarray,
    window: Window,
    cash: float,
    trades: np.ndarray,
    errors: dict[int, str],
) -> WindowRun:
    """``BooksEquity.returns`` of every row of ``simulate_many``'s series: its returns where
    the value before the fold's first bar is on record and the set stays solvent, else row by
    row by the books' rules."""
    first = window.first
    # from the fold's first bar the equity starts at the cash: the books' rules for every row
    whole = solvent if first else np.zeros(len(live), dtype=bool)
    broke = np.flatnonzero(~whole)
    ragged = {int(live[r]): _Books(window, series[r], cash).returns() for r in broke}
    if broke.size:
        series, live = series[whole], live[whole]
    returns = series[:, first:]  # a view: the kernel wrote the returns in place (none if 0)
    return WindowRun(whole=live, returns=returns, ragged=ragged, trades=trades, errors=errors)
