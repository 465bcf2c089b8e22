"""Studies that tie the alternative data to a strategy family: research -> strategy.

Each study measures, on in-sample closes and the alt-data rows known by the in-sample end
(never the holdout), whether the edge a family trades was there in this universe and window:

* **earnings drift** (``earnings_drift``): after each report whose surprise is at least
  ``DRIFT_THRESHOLD_PCT`` of the consensus, the return from the close of its first tradable
  day over the next ``DRIFT_HOLD`` bars, signed by the surprise and less the symbol's mean
  ``DRIFT_HOLD``-bar return over the window (its drift, which a long-only book earns anyway);
  the t-stat of the mean over the reports.
* **value/quality** (``value_quality``): every ``VQ_STEP`` bars, the rank IC (Spearman
  across the symbols a statement covers) of the value/quality score (the family's defaults:
  half value, half quality) against the next ``VQ_STEP`` bars' return; the t-stat of the
  mean IC over the non-overlapping periods.

A study supports its family when the t-stat is at least ``T_MIN`` on at least its minimum
sample; the leader then lists the family in ``ResearchSynthesis.proposed_families`` and the
strategy node gives it a slot in runs that named no family (``swarm.nodes.strategy``). A
study that cannot run (no table, too few events) says why and supports nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date

import numpy as np
import pandas as pd
from pydantic import BaseModel

from altdata.corpus import AltData
from altdata.pit import AltTable
from strategies.earnings_drift import events
from strategies.value_quality import Snapshot, snapshots

T_MIN = 2.0
DRIFT_THRESHOLD_PCT = 5.0
DRIFT_HOLD = 20
DRIFT_MIN_EVENTS = 8
VQ_STEP = 63
VQ_MIN_SYMBOLS = 3
VQ_MIN_PERIODS = 6


class AltStudy(BaseModel):
    """What one family's study found: its statistic, t-stat and sample, and one line."""

    family: str
    supported: bool
    statistic: float | None = None
    t: float | None = None
    n: int = 0
    line: str


def _t(values: list[float]) -> tuple[float, float]:
    """(mean, t-stat of the mean); t 0 when it cannot be computed."""
    arr = np.asarray(values, dtype=np.float64)
    mean = float(arr.mean())
    sd = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return mean, (mean / sd * math.sqrt(len(arr)) if sd > 0 else 0.0)


def _signed_returns(close: pd.Series, moves: Iterable[tuple[int, int]], hold: int) -> list[float]:
    """For each (first tradable yyyymmdd, sign) in ``moves``: the return from the close of
    that day's bar (or the next bar) over the next ``hold`` bars, less the symbol's mean
    ``hold``-bar return over the window (its drift, which a long-only book earns anyway),
    times the sign. A move before the first bar or without a whole window is left out."""
    close = close.dropna()
    if len(close) <= hold:
        return []
    values = close.to_numpy(dtype=np.float64)
    keys = np.asarray([d.year * 10000 + d.month * 100 + d.day for d in close.index])
    base = float(np.mean(values[hold:] / values[:-hold] - 1.0))
    out = []
    for day, sign in moves:
        i = int(np.searchsorted(keys, day))  # the first tradable day's bar (or later)
        if i >= len(values) - hold or i == 0 and keys[0] > day:
            continue  # its holding window is not in the window's bars
        ret = values[i + hold] / values[i] - 1.0
        out.append(sign * (ret - base))
    return out


def drift_study(surprises: AltTable, closes: Mapping[str, pd.Series], *, through: date) -> AltStudy:
    """The signed, de-drifted return after large surprises, its t-stat over the reports."""
    family = "earnings_drift"
    table = events(surprises, list(closes), through=through)
    signed: list[float] = []
    for ticker, rows in table.items():
        moves = [
            (e.day, 1.0 if e.surprise_pct > 0 else -1.0)
            for e in rows
            if abs(e.surprise_pct) >= DRIFT_THRESHOLD_PCT
        ]
        signed += _signed_returns(closes[ticker], moves, DRIFT_HOLD)
    if len(signed) < DRIFT_MIN_EVENTS:
        return AltStudy(
            family=family,
            supported=False,
            n=len(signed),
            line=f"earnings drift: {len(signed)} reports with |surprise| >= "
            f"{DRIFT_THRESHOLD_PCT:g}% and a whole {DRIFT_HOLD}-bar window in-sample "
            f"(< {DRIFT_MIN_EVENTS}): not measured",
        )
    mean, t = _t(signed)
    ok = t >= T_MIN
    return AltStudy(
        family=family,
        supported=ok,
        statistic=round(mean, 6),
        t=round(t, 3),
        n=len(signed),
        line=f"earnings drift: {len(signed)} reports with |surprise| >= "
        f"{DRIFT_THRESHOLD_PCT:g}%: the next {DRIFT_HOLD} bars' return the surprise's way, "
        f"less the symbols' mean, {100 * mean:+.2f}% (t {t:+.2f}): "
        + ("supports earnings_drift" if ok else f"t < {T_MIN:g}, no support"),
    )


def _latest(rows: tuple[Snapshot, ...], key: int) -> Snapshot | None:
    known = [s for s in rows if s.day <= key]
    return max(known, key=lambda s: (s.period_end, s.day)) if known else None


def _score(snaps: dict[str, Snapshot], prices: dict[str, float]) -> dict[str, float]:
    """The family's default score: mean of the value and quality percentile ranks."""
    names = sorted(snaps)
    measures = {
        "ey": {s: snaps[s].eps / prices[s] for s in names if snaps[s].eps is not None},
        "fy": {s: snaps[s].fcf_ps / prices[s] for s in names if snaps[s].fcf_ps is not None},
        "by": {s: snaps[s].book_ps / prices[s] for s in names if snaps[s].book_ps is not None},
        "om": {s: snaps[s].op_margin for s in names if snaps[s].op_margin is not None},
        "gm": {s: snaps[s].gross_margin for s in names if snaps[s].gross_margin is not None},
        "roe": {s: snaps[s].roe for s in names if snaps[s].roe is not None},
    }
    ranks = {
        k: pd.Series(v, dtype=float).rank(pct=False).sub(1).div(max(1, len(v) - 1)).to_dict()
        for k, v in measures.items()
        if len(v) >= 2
    }
    out = {}
    for s in names:
        value = [ranks[k][s] for k in ("ey", "fy", "by") if k in ranks and s in ranks[k]]
        quality = [ranks[k][s] for k in ("om", "gm", "roe") if k in ranks and s in ranks[k]]
        if value or quality:
            v = float(np.mean(value)) if value else 0.5
            q = float(np.mean(quality)) if quality else 0.5
            out[s] = 0.5 * v + 0.5 * q
    return out


def value_quality_study(
    statements: AltTable, closes: Mapping[str, pd.Series], *, through: date
) -> AltStudy:
    """The rank IC of the value/quality score against the next period's return."""
    family = "value_quality"
    table = snapshots(statements, list(closes), through=through)
    frame = pd.DataFrame({s: c for s, c in closes.items() if table.get(s)}).dropna()
    ics: list[float] = []
    for t in range(0, len(frame) - VQ_STEP, VQ_STEP):
        day = frame.index[t]
        key = day.year * 10000 + day.month * 100 + day.day
        snaps = {s: snap for s in frame.columns if (snap := _latest(table[s], key)) is not None}
        prices = {s: float(frame[s].iloc[t]) for s in snaps}
        score = _score(snaps, prices)
        if len(score) < VQ_MIN_SYMBOLS:
            continue
        names = sorted(score)
        fwd = [float(frame[s].iloc[t + VQ_STEP] / frame[s].iloc[t] - 1.0) for s in names]
        ic = pd.Series([score[s] for s in names]).corr(pd.Series(fwd), method="spearman")
        if math.isfinite(ic):
            ics.append(float(ic))
    if len(ics) < VQ_MIN_PERIODS:
        return AltStudy(
            family=family,
            supported=False,
            n=len(ics),
            line=f"value/quality: {len(ics)} {VQ_STEP}-bar periods with >= {VQ_MIN_SYMBOLS} "
            f"symbols a statement covers (< {VQ_MIN_PERIODS}): not measured",
        )
    mean, t = _t(ics)
    ok = t >= T_MIN
    return AltStudy(
        family=family,
        supported=ok,
        statistic=round(mean, 6),
        t=round(t, 3),
        n=len(ics),
        line=f"value/quality: rank IC of the score vs the next {VQ_STEP} bars {mean:+.3f} "
        f"(t {t:+.2f}, {len(ics)} periods): "
        + ("supports value_quality" if ok else f"t < {T_MIN:g}, no support"),
    )


def alt_family_studies(
    alt: AltData | None, closes: Mapping[str, pd.Series], *, through: date
) -> list[AltStudy]:
    """Every study whose table the alt-data folder has (none without one)."""
    if alt is None or alt.root is None:
        return []
    out = []
    surprises = alt.table("surprises")
    if surprises is not None:
        out.append(drift_study(surprises, closes, through=through))
    statements = alt.table("statements")
    if statements is not None:
        out.append(value_quality_study(statements, closes, through=through))
    return out
