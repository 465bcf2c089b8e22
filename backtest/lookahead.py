"""Lookahead check by truncated re-runs.

A strategy that only uses the past must make the same decisions on bar t
whether or not bars after t exist. So: run the full window once, then re-run on
the data cut at ``n_cuts`` points spread over the fold, and require that up to
each cut

* the orders placed (date, side, size, limit or stop price, type, as the engine's recorder
  copied them at placement; the books matched every fill to one),
* the fills (created and executed dates, side, size, price, commission),
  both with the symbol when the job has several feeds (a portfolio, or a symbol with a
  regime filter's index feed, which is cut with it),
* every line of every indicator the strategy holds (found through the
  strategy's ``_lineiterators``, i.e. ``getindicators()``, recursively)

are identical between the cut run and the full run. The fills compared are the ones
the trusted side's books accepted (``backtest.books``), on bars the trusted side cut:
nothing a run clears or edits inside its child can hide a difference, and a run whose
claimed fills do not match its books (an integrity error) fails the check closed
(``biased`` with ``integrity`` naming it).

No run can tell it is checked: every run, scored or not, is fed its window's real bars and
nothing else (a cut run: the bars up to its cut), with the same job parameters; no
placeholder bars, no check-only parameter. Code that reads ahead (``close[1]``) therefore
fails on the last bar of every run alike; the check compares where runs fail: a cut run
that fails or times out on a bar the full run got past is a mismatch (the full run saw a
bar the cut run could not), one that fails on the same bar as the full run with the same
error is not. When the full run failed and no cut run contradicts it, the check could not
run (``checked`` False: the gate vetoes it too).

Bounded: the check waits at most ``budget_s`` (default ``BUDGET_TIMEOUTS`` job timeouts)
and keeps at most one run per worker in flight, so a check ends within about
``budget_s + timeout_s``; a check that did not finish is not ``checked``, one with
mismatches already found is ``biased``. Each cut run only gets the bars up to its cut, so
a whole check costs about ``n_cuts / 2`` full runs of CPU; every run is sandboxed like any
backtest.

Alternative data embedded in the code (an earnings table, a sentiment series) is cut like the
bars when the caller passes ``code_at``: a cut run gets ``code_at(its last bar's date)``, the
source with only the rows known by that bar's close, as a scored run whose window ended there
would; the full run gets ``code`` as scored. A strategy that acts on a row before it was known
then decides differently in a cut run. Without ``code_at`` every run gets ``code``, and a peek
into an embedded table goes unseen (the table is the same in every run).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from datetime import date
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.sandbox import DEFAULT_POLICY, SandboxOutcome, SandboxPolicy
from backtest.trace import decode_line

MAX_MISMATCHES = 20
REL_TOL = 1e-12
INTEGRITY = JobStatus.INTEGRITY_ERROR
BUDGET_TIMEOUTS = 3.0  # a whole check waits at most this many job timeouts (``budget_s``)


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

    Not used by the check any more (placeholder bars told a cut run from a scored run);
    kept for callers that want such a frame.
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
    budget_s: float | None = None,
    job_id: str | None = None,
    variant_id: str | None = None,
    code_at: Callable[[date], str] | None = None,
) -> LookaheadReport:
    """Compare the full run with ``n_cuts`` truncated runs; never raises.

    ``executor``: any backend with ``submit_trace`` (``ProcessPoolBackend``,
    ``RayBackend``, ``SerialBackend``); cut runs are submitted one per worker at a time
    so they run in parallel and a check can stop. None: a sandboxed ``SerialBackend`` in
    this process. ``policy`` (default: the executor's own) applies to every run of the
    check; ``SandboxPolicy(validate=False)`` (tests only) lets deliberately biased fixtures
    run. ``budget_s``: the most the check waits (default ``BUDGET_TIMEOUTS * timeout_s``).
    ``job_id``/``variant_id``: the scored job's, so every run carries the same ones.
    ``code_at``: the source with the alternative data known by the close of a day; each cut
    run gets it for its last bar's date (the full run keeps ``code``). None: every run gets
    ``code``.
    """
    started = time.perf_counter()
    budget = BUDGET_TIMEOUTS * timeout_s if budget_s is None else budget_s
    try:
        report = _check(
            code,
            bars,
            fold,
            costs or CostModel(),
            n_cuts,
            dict(params or {}),
            executor,
            symbol,
            timeout_s,
            policy,
            started + budget,
            (job_id, variant_id),
            code_at,
        )
    except Exception as exc:  # never raise into the gate
        report = LookaheadReport(
            biased=False, checked=False, error=f"{type(exc).__name__}: {exc}"[:500]
        )
    report.duration_s = round(time.perf_counter() - started, 3)
    return report


def _failed_apart(full: SandboxOutcome, cut: SandboxOutcome, pos: int, last: int) -> str | None:
    """Why a cut run's failure (or the full run's) contradicts the other run, or None.

    The cut run is fed bars 0..``pos``, the full run 0..``last``; ``bars`` is how many each
    completed. The full run got past bar ``pos`` when it succeeded or failed later: the cut
    run must then have succeeded. When the full run failed on a bar up to the cut, the cut
    run must fail on that bar alike. Both failing the same way after their last bar (in
    ``stop``) is no contradiction."""
    f_ok, c_ok = full.result.status == JobStatus.OK, cut.result.status == JobStatus.OK
    if c_ok and f_ok:
        return None
    alike = cut.result.status == full.result.status and cut.result.error == full.result.error
    if alike and cut.bars == pos + 1 and full.bars == last + 1:
        return None
    c_status = cut.result.status.value
    failed_later = full.result.status == JobStatus.ERROR and (full.bars or 0) > pos
    if f_ok or failed_later:
        if c_ok:
            return None
        return f"truncated run {c_status} where the full run went on: {cut.result.error}"
    if full.result.status != JobStatus.ERROR:  # a full run that timed out proves nothing
        return None
    if c_ok or not alike or cut.bars != full.bars:
        return (
            f"truncated run {c_status} after {cut.bars} bars ({cut.result.error}) where the "
            f"full run failed after {full.bars} ({full.result.error})"
        )
    return None


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
    deadline: float,
    ids: tuple[str | None, str | None],
    code_at: Callable[[date], str] | None,
) -> LookaheadReport:
    from backtest.books import feed_frames
    from backtest.executors import SerialBackend

    # A portfolio job's feeds are cut together, on their common calendar.
    feeds = feed_frames(list(bars.items()) if isinstance(bars, dict) else [(symbol, bars)], fold)
    frame = feeds[0][1]
    dates = [ts.date() for ts in frame.index]
    positions = cut_positions(pd.DatetimeIndex(frame.index), fold, n_cuts)
    last = len(frame) - 1
    # Each cut's source, made before any run starts so a failing ``code_at`` starts none.
    codes: dict[int, str] = {}
    if code_at is not None:
        codes = {pos: code_at(dates[pos]) for pos in positions if pos != last}

    def job(pos: int) -> BacktestJob:
        # The same kind of job as a scored one: the window's real bars (up to the cut),
        # the scored job's ids, no other parameter.
        data: Any = (
            {name: f.iloc[: pos + 1] for name, f in feeds}
            if isinstance(bars, dict)
            else frame.iloc[: pos + 1]
        )
        return BacktestJob(
            job_id=ids[0] or f"{ids[1] or 'lookahead'}|{symbol}",
            variant_id=ids[1] or "lookahead",
            code=codes.get(pos, code),
            symbol=symbol,
            bars=data,
            fold=fold if pos == last else fold.model_copy(update={"end": dates[pos]}),
            costs=costs,
            params=params,
            timeout_s=timeout_s,
        )

    own = executor is None
    ex = SerialBackend(policy=policy or DEFAULT_POLICY) if own else executor
    slots = max(1, int(getattr(ex, "workers", 0) or os.cpu_count() or 1))
    outcomes: dict[int, SandboxOutcome] = {}
    pending: dict[Future[SandboxOutcome], int] = {}
    queue = [last, *positions]  # the full run first
    try:
        while queue or pending:
            while queue and len(pending) < slots and time.perf_counter() < deadline:
                pos = queue.pop(0)
                pending[ex.submit_trace(job(pos), policy=policy)] = pos
            if not pending:
                break
            left = deadline - time.perf_counter()
            done, _ = wait(list(pending), timeout=max(0.0, left), return_when=FIRST_COMPLETED)
            for fut in done:
                outcomes[pending.pop(fut)] = fut.result()
            if not done:  # the budget is spent: what still runs is not waited for
                break
            if last in outcomes and _decided(outcomes, last, positions):
                break
    finally:
        if own:
            ex.close()
    return _report(outcomes, last, positions, dates, finished=not queue and not pending)


def _decided(outcomes: dict[int, SandboxOutcome], last: int, positions: list[int]) -> bool:
    """Enough mismatches to stop: more runs would not change the verdict."""
    full = outcomes[last]
    failed = [p for p in positions if p in outcomes and outcomes[p].result.status != JobStatus.OK]
    bad = sum(1 for p in failed if _failed_apart(full, outcomes[p], p, last))
    return bad >= MAX_MISMATCHES


def _report(
    outcomes: dict[int, SandboxOutcome],
    last: int,
    positions: list[int],
    dates: list[date],
    *,
    finished: bool,
) -> LookaheadReport:
    n = len(positions)
    runs = [("full run", outcomes[last])] if last in outcomes else []
    runs += [(f"cut at {dates[p].isoformat()}", outcomes[p]) for p in positions if p in outcomes]
    broken = [(t, out.result.error) for t, out in runs if out.result.status == INTEGRITY]
    if broken:
        why = f"{broken[0][0]}: {broken[0][1]}"
        return LookaheadReport(biased=True, mismatches=[why], n_cuts=n, integrity=why)
    full = outcomes.get(last)
    mismatches: list[str] = []
    if full is not None:
        for pos in positions:
            out = outcomes.get(pos)
            if out is None:
                continue
            label = f"cut at {dates[pos].isoformat()}"
            apart = _failed_apart(full, out, pos, last)
            if apart:
                mismatches.append(f"{label}: {apart}")
            elif full.trace is not None and out.trace is not None:
                diff = compare_traces(full.trace, out.trace, pos, dates)
                if diff:
                    mismatches.append(diff)
            if len(mismatches) >= MAX_MISMATCHES:
                break
    if mismatches:
        return LookaheadReport(biased=True, mismatches=mismatches, n_cuts=n)
    if full is None or full.result.status != JobStatus.OK or full.trace is None:
        status = "not run" if full is None else full.result.status.value
        error = None if full is None else full.result.error
        return LookaheadReport(
            biased=False, checked=False, n_cuts=0, error=f"full run {status}: {error}"
        )
    if not finished:
        done = sum(1 for p in positions if p in outcomes)
        return LookaheadReport(
            biased=False,
            checked=False,
            n_cuts=n,
            error=f"the check did not finish within its time budget ({done} of {n} cuts run)",
        )
    return LookaheadReport(biased=False, mismatches=[], n_cuts=n)
