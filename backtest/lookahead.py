"""Lookahead check by truncated re-runs.

A strategy that only uses the past must make the same decisions on bar t
whether or not bars after t exist. So: run the full window once, then re-run on
the data cut at ``n_cuts`` points spread over the fold, and require that up to
each cut

* the orders placed (created date, side, size, price),
* the fills (created and executed dates, side, size, price, commission),
  both with the symbol when the job has several feeds (a portfolio, or a symbol with a
  regime filter's index feed, which is cut with it),
* every line of every indicator the strategy holds (found through the
  strategy's ``_lineiterators``, i.e. ``getindicators()``, recursively)

are identical between the cut run and the full run. The fills compared are the ones
the trusted side's books accepted (``backtest.books``), on bars the trusted side cut:
nothing a run clears or edits inside its child can hide a difference, and a run whose
claimed fills do not match its books (an integrity error) fails the check closed
(``biased`` with ``integrity`` naming it). A cut run that fails while
the full run succeeds (``close[1]`` on the last bar is an IndexError) is a
mismatch too. Each cut run only gets the bars up to its cut, so the check costs
about ``n_cuts / 2`` full runs of CPU, spread over the executor's workers; every
run is sandboxed like any backtest.
"""

from __future__ import annotations

import math
from concurrent.futures import Future
from datetime import date
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.sandbox import DEFAULT_POLICY, SandboxOutcome, SandboxPolicy
from backtest.trace import decode_line

MAX_MISMATCHES = 20
PAD_BARS = 5  # placeholders after every run's last real bar (see ``padded``)
REL_TOL = 1e-12


class LookaheadReport(BaseModel):
    """``biased``: some cut disagreed with the full run. ``checked``: the check could
    run at all (False when the full run itself failed or was rejected; see ``error``).
    ``integrity``: a run's fill log failed the books (then ``biased``: fail closed)."""

    biased: bool
    mismatches: list[str] = Field(default_factory=list)
    n_cuts: int = 0
    checked: bool = True
    error: str | None = None
    integrity: str | None = None
    duration_s: float = 0.0


def cut_positions(index: pd.DatetimeIndex, fold: Fold, n_cuts: int) -> list[int]:
    """Bar positions (in the fed frame) of up to ``n_cuts`` cuts, spread evenly over
    the fold's bars but its last. Only the last bar of a day is a cut candidate,
    so "up to the cut" and "up to the cut's date" mean the same (intraday data)."""
    days = pd.DatetimeIndex(index).normalize()
    dates = days.date
    last_of_day = np.r_[days[1:] != days[:-1], True]
    in_fold = (dates >= fold.start) & (dates <= fold.end)
    candidates = np.flatnonzero(in_fold & last_of_day)[:-1]
    if len(candidates) == 0:
        return []
    picks = np.linspace(0, len(candidates) - 1, num=max(1, n_cuts)).round().astype(int)
    return sorted({int(candidates[i]) for i in picks})


def padded(frame: pd.DataFrame, pos: int, pad: int) -> pd.DataFrame:
    """Bars up to ``pos`` plus ``pad`` copies of bar ``pos`` dated the following days.

    The placeholders keep ``close[1]``-style code from crashing on the last real
    bar, so it makes (different) decisions instead and gets compared; they are
    dated after the cut, never enter the comparison, and the run stops after the
    first of them (``BacktestJob.stop_after``), so up to ``close[pad - 1]`` is safe.
    """
    real = frame.iloc[: pos + 1]
    if pad <= 0:
        return real
    last = frame.index[pos].normalize()
    extra = frame.iloc[[pos] * pad].copy()
    extra.index = pd.DatetimeIndex([last + pd.Timedelta(days=k) for k in range(1, pad + 1)])
    out = pd.concat([real, extra])
    out.index.name = frame.index.name
    return out


def _same(a: float, b: float) -> bool:
    if a == b:
        return True
    if math.isnan(a) and math.isnan(b):
        return True
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= REL_TOL * max(1.0, abs(a), abs(b))


def _same_row(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) or isinstance(y, float):
            if x is None or y is None or not _same(float(x), float(y)):
                return False
        elif x != y:
            return False
    return True


def compare_traces(
    full: dict[str, Any], cut: dict[str, Any], pos: int, dates: list[date]
) -> str | None:
    """First difference between a cut run's trace and the full run's, up to bar ``pos``."""
    cut_day = dates[pos].isoformat()
    label = f"cut at {cut_day}"

    def upto(rows: list[list[Any]], col: int) -> list[list[Any]]:
        return [r for r in rows if r[col] <= cut_day]

    for what, col in (("orders", 0), ("fills", 1)):
        a, b = upto(full[what], col), upto(cut[what], col)
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if not _same_row(x, y):
                return f"{label}: {what[:-1]} #{i + 1} differs: full run {x} vs truncated {y}"
        if len(a) != len(b):
            extra = (a if len(a) > len(b) else b)[min(len(a), len(b))]
            return (
                f"{label}: {len(a)} {what} up to the cut in the full run vs {len(b)} "
                f"in the truncated run (first unmatched: {extra})"
            )
    for key, text in full["lines"].items():
        other_text = cut["lines"].get(key)
        if other_text is None:
            return f"{label}: indicator line {key} missing in the truncated run"
        values, other = decode_line(text), decode_line(other_text)
        n = min(pos + 1, len(values), len(other))
        a, b = values[:n], other[:n]
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        close = np.abs(a - b) <= REL_TOL * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))
        bad = np.flatnonzero(~(same | (close & np.isfinite(a) & np.isfinite(b))))
        if len(bad):
            i = int(bad[0])
            day = dates[i].isoformat() if i < len(dates) else f"bar {i}"
            return (
                f"{label}: indicator {key} differs at {day}: "
                f"full run {float(a[i])!r} vs truncated {float(b[i])!r}"
            )
    return None


def check_lookahead(
    code: str,
    bars: pd.DataFrame | dict[str, pd.DataFrame],
    *,
    fold: Fold,
    costs: CostModel | None = None,
    n_cuts: int = 20,
    params: dict[str, float | int] | None = None,
    executor: Any = None,
    symbol: str = "SYMBOL",
    timeout_s: float = 120.0,
    policy: SandboxPolicy | None = None,
) -> LookaheadReport:
    """Compare the full run with ``n_cuts`` truncated runs; never raises.

    ``executor``: any backend with ``submit_trace`` (``ProcessPoolBackend``,
    ``RayBackend``, ``SerialBackend``); cut runs are submitted together so they
    run in parallel. None: a sandboxed ``SerialBackend`` in this process.
    ``policy`` (default: the executor's own) applies to every run of the check;
    ``SandboxPolicy(validate=False)`` (tests only) lets deliberately biased fixtures run.
    """
    import time

    started = time.perf_counter()
    try:
        report = _check(
            code, bars, fold, costs or CostModel(), n_cuts, dict(params or {}), executor,
            symbol, timeout_s, policy,
        )  # fmt: skip
    except Exception as exc:  # never raise into the gate
        report = LookaheadReport(
            biased=False, checked=False, error=f"{type(exc).__name__}: {exc}"[:500]
        )
    report.duration_s = round(time.perf_counter() - started, 3)
    return report


def _check(
    code: str,
    bars: pd.DataFrame | dict[str, pd.DataFrame],
    fold: Fold,
    costs: CostModel,
    n_cuts: int,
    params: dict[str, float | int],
    executor: Any,
    symbol: str,
    timeout_s: float,
    policy: SandboxPolicy | None,
) -> LookaheadReport:
    from backtest.books import feed_frames
    from backtest.executor import SerialBackend

    # A portfolio job's feeds are cut together, on their common calendar.
    feeds = feed_frames(list(bars.items()) if isinstance(bars, dict) else [(symbol, bars)], fold)
    frame = feeds[0][1]
    dates = [ts.date() for ts in frame.index]
    positions = cut_positions(pd.DatetimeIndex(frame.index), fold, n_cuts)

    def cut(pos: int) -> pd.DataFrame | dict[str, pd.DataFrame]:
        if not isinstance(bars, dict):
            return padded(frame, pos, PAD_BARS)
        return {name: padded(f, pos, PAD_BARS) for name, f in feeds}

    def end_of(data: pd.DataFrame | dict[str, pd.DataFrame]) -> date:
        first = next(iter(data.values())) if isinstance(data, dict) else data
        return first.index[-1].date()

    def job(tag: str, data: Any, end: date, cut_day: date) -> BacktestJob:
        return BacktestJob(
            job_id=f"lookahead-{tag}",
            variant_id="lookahead",
            code=code,
            symbol=symbol,
            bars=data,
            fold=fold.model_copy(update={"end": end}),
            costs=costs,
            params=params,
            timeout_s=timeout_s,
            stop_after=cut_day,
        )

    own = executor is None
    ex = SerialBackend(policy=policy or DEFAULT_POLICY) if own else executor
    last = len(frame) - 1
    try:
        full_bars = cut(last)
        full_fut: Future[SandboxOutcome] = ex.submit_trace(
            job("full", full_bars, end_of(full_bars), dates[last]), policy=policy
        )
        cut_futs = []
        for p in positions:
            cut_bars = cut(p)
            cut_futs.append(
                ex.submit_trace(job(f"cut{p}", cut_bars, end_of(cut_bars), dates[p]), policy=policy)
            )
        full = full_fut.result()
        cuts = [f.result() for f in cut_futs]
    finally:
        if own:
            ex.close()

    broken = [
        (tag, out.result.error)
        for tag, out in [("full run", full)]
        + [(f"cut at {dates[p].isoformat()}", c) for p, c in zip(positions, cuts, strict=True)]
        if out.result.status == JobStatus.INTEGRITY_ERROR
    ]
    if broken:
        why = f"{broken[0][0]}: {broken[0][1]}"
        return LookaheadReport(biased=True, mismatches=[why], n_cuts=len(positions), integrity=why)
    if full.result.status != JobStatus.OK or full.trace is None:
        return LookaheadReport(
            biased=False,
            checked=False,
            n_cuts=0,
            error=f"full run {full.result.status.value}: {full.result.error}",
        )
    mismatches: list[str] = []
    for pos, out in zip(positions, cuts, strict=True):
        if out.result.status != JobStatus.OK or out.trace is None:
            why = f"cut at {dates[pos].isoformat()}: truncated run {out.result.status.value}"
            mismatches.append(f"{why}: {out.result.error}")
        else:
            diff = compare_traces(full.trace, out.trace, pos, dates)
            if diff:
                mismatches.append(diff)
        if len(mismatches) >= MAX_MISMATCHES:
            break
    return LookaheadReport(biased=bool(mismatches), mismatches=mismatches, n_cuts=len(positions))
