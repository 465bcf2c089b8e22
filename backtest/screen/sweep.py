"""TUNE through the screen: many parameter sets ranked in-sample, the best few for Backtrader.

Why: a Backtrader job costs tens of milliseconds, so a TUNE iteration could only try five
parameter sets; the screen (``backtest.screen``) reproduces a catalogue spec's trades for a
fraction of a millisecond. A sweep screens hundreds of sets around the parent on every symbol x
in-sample fold (the very windows, costs and ``bars_per_year`` of the Backtrader jobs: the
holdout stays sealed), ranks them, and hands the top k back as ordinary variants. Backtrader
still judges: only its confirmed results reach the gate. Every screened set is a trial all
the same (the gate's ledger counts it, and the deflation clusters them: ``gate.effective``).

The in-sample score a sweep ranks on is the annualised Sharpe of the set's equal-weight
portfolio over the symbols, folds concatenated: the figure ``gate.aggregate`` computes for a
variant from its Backtrader results, so a confirmed variant's Sharpe is the one it was ranked
on. Sets below the gate's trade floor (a hard veto) rank after every set above it.

A portfolio-scope spec (``cross_sectional_momentum``, ``rotation``: ``backtest.screen.portfolio``)
is one job per fold over the whole universe: its windows are the universe's per fold
(``portfolio_windows_for``) and its series is the portfolio's own returns, folds concatenated,
the figure ``gate.aggregate`` computes from its one result per fold. Its trades are the
reducing fills the books realise (a portfolio job's ``trade_pnls``).

Pure: no I/O; the node writes the batch (``write_batch``) and the records.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from backtest.contracts import CostModel, Fold
from backtest.screen import batch, split
from backtest.screen.blocks import Unsupported, check_supported
from backtest.screen.indicators import IndicatorZeroDivision
from backtest.screen.portfolio import LABEL as PORTFOLIO
from backtest.screen.portfolio import PortfolioWindow
from backtest.screen.portfolio import check_supported as check_portfolio
from backtest.screen.portfolio import evaluate as evaluate_portfolio
from backtest.screen.portfolio import warm as warm_portfolio
from backtest.screen.screening import Window, evaluate
from strategies.spec import StrategySpec


def supported(spec: StrategySpec) -> bool:
    """Whether the screen reproduces ``spec`` (else TUNE proposes as it always did)."""
    try:
        check_supported(spec)
    except Unsupported:
        return False
    return True


def supported_portfolio(spec: StrategySpec) -> bool:
    """Whether the portfolio screen reproduces ``spec`` (cross-sectional momentum and rotation
    without a regime filter; else the portfolio families tune as they always did)."""
    try:
        check_portfolio(spec)
    except Unsupported:
        return False
    return True


@dataclass(frozen=True)
class ScreenedSet:
    """One screened parameter set: its in-sample portfolio figures."""

    spec: StrategySpec
    trial_key: str
    sharpe: float | None  # annualised, the equal-weight portfolio over symbols and folds
    sharpe_per_period: float | None
    n_obs: int
    n_trades: int  # closed round trips over every window
    error: str | None = None  # a window failed (Backtrader would fail there too)


@dataclass
class Sweep:
    """A screened batch, best first, with every set's portfolio returns (one row per set)."""

    sets: list[ScreenedSet]
    dates: list[str]
    returns: np.ndarray  # len(sets) x len(dates); 0.0 where a set has no return that day
    n_symbols: int
    n_folds: int
    seconds: float = 0.0
    min_trades: int = 0
    ranked: list[int] = field(default_factory=list)  # order of ``sets`` by rank (best first)

    def top(self, k: int) -> list[ScreenedSet]:
        """The ``k`` best sets, best first."""
        return [self.sets[i] for i in self.ranked[: max(0, k)]]


def windows_for(
    frames: dict[str, pd.DataFrame], folds: list[Fold]
) -> dict[tuple[str, int], Window]:
    """Every symbol x fold window, as the engine feeds them (built once per run: the windows
    keep the indicator cache a sweep shares)."""
    return {
        (symbol, fold.index): Window.from_frame(frame, fold, symbol)
        for symbol, frame in frames.items()
        for fold in folds
    }


def portfolio_windows_for(
    frames: dict[str, pd.DataFrame], folds: list[Fold]
) -> dict[tuple[str, int], PortfolioWindow]:
    """The universe's window per fold (``frames`` in the jobs' feed order: the universe's),
    keyed as ``windows_for``'s under the portfolio label."""
    return {(PORTFOLIO, fold.index): PortfolioWindow.from_frames(frames, fold) for fold in folds}


def _run(
    spec: StrategySpec, window: Window | PortfolioWindow, costs: CostModel, bars_per_year: int
) -> tuple[np.ndarray, int]:
    """(the window's returns from the fold's start, trades as the gate counts them)."""
    if isinstance(window, PortfolioWindow):
        prun = evaluate_portfolio(spec, window, costs=costs, bars_per_year=bars_per_year)
        return prun.returns(), len(prun.pnls)  # every reducing fill realises a trade (books)
    run = evaluate(spec, window, costs=costs, bars_per_year=bars_per_year)
    return run.returns(), int(run.fill_sizes.size // 2)


def screen_sets(
    specs: list[StrategySpec],
    windows: dict[tuple[str, int], Window] | dict[tuple[str, int], PortfolioWindow],
    *,
    costs: CostModel,
    bars_per_year: int,
    periods_per_year: int,
    min_trades: int = 0,
    batched: bool = True,
    workers: int = 1,
) -> Sweep:
    """Screen every spec on every window; rank (trade floor met, Sharpe) best first.

    ``windows``: every symbol x fold (``windows_for``), or the universe per fold for
    portfolio-scope specs (``portfolio_windows_for``). Raises ``Unsupported`` when a spec
    holds a block the screen cannot reproduce. Symbol windows are screened a window at a time,
    every set in one compiled call (``backtest.screen.batch``); portfolio windows, or
    ``batched=False``, set by set (the same figures, bit for bit), their sets split over up
    to ``workers`` processes (``backtest.screen.split``: the same figures with any number).
    """
    started = time.perf_counter()
    keys = sorted({d for w in windows.values() for d in w.return_keys})
    position = {d: i for i, d in enumerate(keys)}
    slots = {
        wk: np.fromiter((position[d] for d in w.return_keys), dtype=np.int64)
        for wk, w in windows.items()
    }
    portfolio = any(isinstance(w, PortfolioWindow) for w in windows.values())
    sums = _Sums(len(specs), len(keys))
    if batched and not portfolio and specs and windows:
        _sum_batched(sums, specs, windows, slots, costs, bars_per_year)
    else:
        _sum_per_set(sums, specs, windows, slots, costs, bars_per_year, workers)
    returns, have = sums.means()
    out: list[ScreenedSet] = []
    if have.ndim == 1:  # every set has returns on the same dates
        sharpes = _sharpes_alike(returns, have)
        n_obs = [int(have.sum())] * len(specs)
    else:
        sharpes = sharpes_pp(returns, have)
        n_obs = have.sum(axis=1).tolist()
    for row, spec in enumerate(specs):
        sr_pp = sharpes[row]
        out.append(
            ScreenedSet(
                spec=spec,
                trial_key=spec.trial_key(),
                sharpe=None if sr_pp is None else sr_pp * math.sqrt(periods_per_year),
                sharpe_per_period=sr_pp,
                n_obs=int(n_obs[row]),
                n_trades=int(sums.trades[row]),
                error=sums.errors.get(row),
            )
        )
    ranked = sorted(range(len(out)), key=lambda i: _rank_key(out[i], min_trades))
    return Sweep(
        sets=out,
        dates=keys,
        returns=returns,
        n_symbols=_n_symbols(windows),
        n_folds=len({f for _, f in windows}),
        seconds=time.perf_counter() - started,
        min_trades=min_trades,
        ranked=ranked,
    )


class _Sums:
    """Every set's returns summed per date over the windows, with their counts and trades."""

    def __init__(self, n_sets: int, n_dates: int) -> None:
        self.total = np.zeros((n_sets, n_dates))
        self._count: np.ndarray | None = None  # per-set counts, made by the first ragged add
        self.trades = np.zeros(n_sets, dtype=np.int64)
        self.errors: dict[int, str] = {}  # set -> its last failed window
        self.every = np.zeros(n_dates)  # counts a window adds to every set (kept apart)

    @property
    def count(self) -> np.ndarray:
        """The counts added set by set (on top of ``every``)."""
        if self._count is None:
            self._count = np.zeros(self.total.shape)
        return self._count

    def add(self, row: int, at: np.ndarray, r: np.ndarray) -> None:
        """One set's returns on one window (``at``: the window's date slots)."""
        at = at[: r.size]
        self.total[row, at] += r
        self.count[row, at] += 1

    def means(self) -> tuple[np.ndarray, np.ndarray]:
        """(each set's mean return per date, 0.0 where it has none; where it has some): the
        sums divided in place. ``have`` is one row for every set when no window was added set
        by set, else a row per set."""
        if self._count is None:
            count, have = self.every, self.every > 0
        else:
            count = self._count + self.every
            have = count > 0
        # where a date has no return its sum is still the 0.0 it started at
        return np.divide(self.total, count, out=self.total, where=have), have


def _sum_per_set(sums: _Sums, specs, windows, slots, costs, bars_per_year, workers=1) -> None:
    """Set by set, window by window (``evaluate`` or the portfolio screen for each pair), the
    sets in contiguous chunks over up to ``workers`` processes; each chunk's rows summed apart
    (a set's sums only ever see its own returns) and copied in."""

    def compute(rows: range) -> _Sums:
        part = _Sums(len(rows), len(sums.every))
        for i, row in enumerate(rows):
            for wk, window in windows.items():
                try:
                    r, n_trades = _run(specs[row], window, costs, bars_per_year)
                except IndicatorZeroDivision as exc:
                    part.errors[row] = f"{wk[0]}/fold{wk[1]}: ZeroDivisionError: {exc}"
                    continue
                part.add(i, slots[wk], r)
                part.trades[i] += n_trades
        return part

    parts = split.chunks(len(specs), workers)
    if len(parts) > 1:  # what every set reads, built once here and shared with the forks
        for window in windows.values():
            if isinstance(window, PortfolioWindow):
                warm_portfolio(specs, window)
    for rows, part in zip(parts, split.map_chunks(compute, parts), strict=True):
        cut = slice(rows.start, rows.stop)
        sums.total[cut] = part.total
        if part._count is not None:
            sums.count[cut] = part._count
        sums.trades[cut] = part.trades
        sums.errors.update(part.errors)


def _sum_batched(sums: _Sums, specs, windows, slots, costs, bars_per_year) -> None:
    """Window by window, every set in one compiled call; the windows in the same order as
    ``_sum_per_set``, so each date's sum adds the same returns in the same order."""
    prepared = batch.prepare(specs, costs, bars_per_year)
    for wk, window in windows.items():
        at = slots[wk]
        # the kernel adds each whole set's returns to its row (no window matrix)
        run = batch.run_window(prepared, window, total=sums.total, at=at)
        for row, why in run.errors.items():
            sums.errors[row] = f"{wk[0]}/fold{wk[1]}: ZeroDivisionError: {why}"
        if run.whole.size == len(specs):
            cols = _span(at)  # a slice when the window's dates are adjacent: no gather
            if not run.added:
                sums.total[:, cols] += run.returns
            sums.every[cols] += 1  # one row for every set: not a matrix pass per window
        elif run.whole.size:
            cells = np.ix_(run.whole, at)
            if not run.added:
                sums.total[cells] += run.returns
            sums.count[cells] += 1
        for row, r in run.ragged.items():
            sums.add(row, at, r)
        sums.trades += run.trades


def _span(at: np.ndarray) -> slice | np.ndarray:
    """``at`` as a slice when it is a run of adjacent slots (the same columns, in order)."""
    if at.size and at[-1] - at[0] == at.size - 1 and (at.size < 2 or (np.diff(at) == 1).all()):
        return slice(int(at[0]), int(at[-1]) + 1)
    return at


def combine(sweeps: list[Sweep], min_trades: int) -> Sweep:
    """One sweep of several screened on the same windows (a sampler's batches, in order),
    ranked again as one."""
    first = sweeps[0]
    if any(s.dates != first.dates for s in sweeps):
        raise ValueError("combine: the sweeps were screened on different windows")
    sets = [s for sw in sweeps for s in sw.sets]
    return Sweep(
        sets=sets,
        dates=first.dates,
        returns=np.vstack([sw.returns for sw in sweeps]),
        n_symbols=first.n_symbols,
        n_folds=first.n_folds,
        seconds=sum(sw.seconds for sw in sweeps),
        min_trades=min_trades,
        ranked=sorted(range(len(sets)), key=lambda i: _rank_key(sets[i], min_trades)),
    )


def _n_symbols(windows: dict) -> int:
    """The symbols screened: the universe's for portfolio windows."""
    universes = {len(w.symbols) for w in windows.values() if isinstance(w, PortfolioWindow)}
    return max(universes) if universes else len({s for s, _ in windows})


def sharpe_pp(rets: np.ndarray) -> float | None:
    """The per-period Sharpe as ``backtest.metrics.compute_metrics`` defines it."""
    if rets.size < 2:
        return None
    std = float(rets.std(ddof=1))
    return float(rets.mean()) / std if std > 1e-15 else None


def sharpes_pp(returns: np.ndarray, have: np.ndarray) -> list[float | None]:
    """``sharpe_pp`` of each row's dates with returns (``have``), the same floats: the rows
    that share the first row's dates (every set of a batched sweep without a failed window)
    in one reduction over a contiguous block, whose per-row sums are the 1-D ones; the
    others row by row."""
    n = returns.shape[0]
    out: list[float | None] = [None] * n
    if n == 0:
        return out
    same = np.flatnonzero((have == have[0]).all(axis=1))
    cols = np.flatnonzero(have[0])
    rest = np.ones(n, dtype=bool)
    if same.size > 1 and cols.size >= 2:
        block = np.ascontiguousarray(returns[np.ix_(same, cols)])
        means, stds = block.mean(axis=1), block.std(axis=1, ddof=1)
        for row, mean, std in zip(same.tolist(), means.tolist(), stds.tolist(), strict=True):
            out[row] = mean / std if std > 1e-15 else None
        rest[same] = False
    for row in np.flatnonzero(rest).tolist():
        out[row] = sharpe_pp(returns[row][have[row]])
    return out


def _sharpes_alike(returns: np.ndarray, have: np.ndarray) -> list[float | None]:
    """``sharpes_pp`` when every row has returns on the dates ``have`` (one row): the same
    floats, over ``returns`` itself when that is every date (no copy), the mean summed once."""
    n = returns.shape[0]
    cols = np.flatnonzero(have)
    if n < 2 or cols.size < 2:
        return sharpes_pp(returns, np.broadcast_to(have, returns.shape))
    block = returns if cols.size == have.size else np.ascontiguousarray(returns[:, cols])
    means = block.mean(axis=1)
    # ``ndarray.std``'s own mean is this one (the same sum, divided alike): passed, not redone
    stds = block.std(axis=1, ddof=1, mean=means[:, None])
    return [
        m / sd if sd > 1e-15 else None for m, sd in zip(means.tolist(), stds.tolist(), strict=True)
    ]


def _rank_key(s: ScreenedSet, min_trades: int) -> tuple[int, int, float, str]:
    """Failed sets last, then sets under the trade floor, then by Sharpe (ties: the key)."""
    return (
        int(s.error is not None or s.sharpe is None),
        int(s.n_trades < min_trades),
        -(s.sharpe if s.sharpe is not None else -math.inf),
        s.trial_key,
    )


# --- the batch file: a run folder's record of every screened set's returns ----------------


# A batch's file name: ``iNN.npz`` or ``iNN-<scope>.npz`` (never a writer's temp file).
BATCH_NAME = re.compile(r"i\d+(-[A-Za-z0-9_]+)*\.npz")


def batch_files(folder: Path) -> list[Path]:
    """The batches written to ``folder`` (``write_batch``), in name order."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if BATCH_NAME.fullmatch(p.name))


def write_batch(path: Path, sweep: Sweep) -> None:
    """The batch's return series beside the run (not in the checkpointed state), so the
    effective trial count can be recomputed from the run folder alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A hidden temp name that no batch pattern matches: a kill before the rename leaves a file
    # the readers never take for a batch (``BATCH_NAME``); written through a handle, since
    # numpy appends ".npz" to a path that lacks it.
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        np.savez_compressed(
            fh,
            keys=np.array([s.trial_key for s in sweep.sets]),
            dates=np.array(sweep.dates),
            # float32: ~7 significant digits are plenty for correlations, at half the size.
            returns=sweep.returns.astype(np.float32),
        )
    tmp.replace(path)


def read_batch(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """(trial keys, dates, returns matrix) of a batch written by ``write_batch``."""
    with np.load(path, allow_pickle=False) as z:
        return z["keys"].tolist(), z["dates"].tolist(), z["returns"].astype(np.float64)
