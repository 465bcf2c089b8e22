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
* **analyst revisions** (``analyst_revision``): after each day the family's defaults trigger
  on (a rating upgrade +1 or downgrade -1, the family's ``events`` and ``triggers``: first
  tradable day, one firm's repeats and news roundups dropped, a day with both ways left out),
  the return from that day's close over the next ``REV_HOLD`` bars, signed by the revision
  and less the symbol's mean ``REV_HOLD``-bar return; the t-stat over the events.
* **sentiment momentum** (``sentiment_momentum``): the family's default tone z-score (its
  ``series`` and ``ToneZ``: tweets, smoothed, against its lookback) on a bar against the
  next ``SENT_HORIZON`` bars' return, every ``SENT_HORIZON``-th bar (non-overlapping); the
  Spearman correlation pooled over the symbols (each symbol's ranks standardised, so a
  symbol's level of tone or return does not count), its t-stat from the per-date sums
  (dates clustered: symbols moving together on one date are not independent evidence).
* **put/call regime** (``putcall_regime``): market-wide, the family's default z-score of the
  smoothed equity put/call ratio (keyed by its first tradable day) on a bar against the
  universe's equal-weight next ``PC_STEP`` bars' return, every ``PC_STEP`` bars
  (non-overlapping); the Spearman correlation and its t-stat. Positive is the family's
  contrarian edge (fear before higher returns).

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
from strategies import analyst_revision as revision
from strategies import putcall_regime as putcall
from strategies import sentiment_momentum as sentiment
from strategies.earnings_drift import events
from strategies.value_quality import Snapshot, snapshots

T_MIN = 2.0
DRIFT_THRESHOLD_PCT = 5.0
DRIFT_HOLD = 20
DRIFT_MIN_EVENTS = 8
VQ_STEP = 63
VQ_MIN_SYMBOLS = 3
VQ_MIN_PERIODS = 6
REV_TABLE = "ratings"  # swarm.families.analyst_revision.TABLE (importing it registers the family)
REV_HOLD = 20
REV_MIN_EVENTS = 8
SENT_HORIZON = 5
SENT_MIN_DAYS = 100  # symbol-days sampled (every SENT_HORIZON-th bar with a z-score)
PC_STEP = 20
PC_MIN_PERIODS = 20


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


def _signed_returns(close: pd.Series, moves: Iterable[tuple[int, float]], hold: int) -> list[float]:
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


def _keys(index: pd.Index) -> list[int]:
    return [d.year * 10000 + d.month * 100 + d.day for d in index]


def _verdict(family: str, t: float) -> str:
    return f"supports {family}" if t >= T_MIN else f"t < {T_MIN:g}, no support"


def revision_study(
    ratings: AltTable, closes: Mapping[str, pd.Series], *, through: date
) -> AltStudy:
    """The signed, de-drifted return after the family's default triggers (upgrades and
    downgrades), its t-stat over the events."""
    family = revision.KIND
    p = revision.DEFAULTS
    table = revision.events(ratings, list(closes), through=through)
    signed: list[float] = []
    for ticker, rows in table.items():
        moves = revision.triggers(
            rows,
            min_actions=int(p["min_actions"]),
            lookback_days=int(p["lookback_days"]),
            count_targets=bool(p["count_targets"]),
        )
        signed += _signed_returns(closes[ticker], [(d, float(s)) for d, s in moves], REV_HOLD)
    if len(signed) < REV_MIN_EVENTS:
        return AltStudy(
            family=family,
            supported=False,
            n=len(signed),
            line=f"analyst revisions: {len(signed)} upgrades/downgrades with a whole "
            f"{REV_HOLD}-bar window in-sample (< {REV_MIN_EVENTS}): not measured",
        )
    mean, t = _t(signed)
    return AltStudy(
        family=family,
        supported=t >= T_MIN,
        statistic=round(mean, 6),
        t=round(t, 3),
        n=len(signed),
        line=f"analyst revisions: {len(signed)} upgrades/downgrades: the next {REV_HOLD} "
        f"bars' return the revision's way, less the symbols' mean, {100 * mean:+.2f}% "
        f"(t {t:+.2f}): " + _verdict(family, t),
    )


def tone_z(rows: tuple[sentiment.Day, ...], days: list[int]) -> list[float | None]:
    """The family's default tone z-score on each bar dated ``days`` (yyyymmdd), fed as its
    strategy feeds it (``decisions``: each bar takes the sessions since the previous one)."""
    p = sentiment.DEFAULTS
    tz = sentiment.ToneZ(p["lookback"], p["smooth"], p["min_items"], p["weighted"])
    cursor, out = 0, []
    for now, today in enumerate(days, start=1):
        count, tone_sum = 0, 0.0
        while cursor < len(rows) and rows[cursor].day <= today:
            d = rows[cursor]
            cursor += 1
            if now == 1 and d.day < today:
                continue  # a session before the first bar
            count, tone_sum = count + d.count, tone_sum + d.count * d.tone
        out.append(tz.update(count, tone_sum))
    return out


def _std_ranks(values: list[float]) -> np.ndarray:
    ranks = pd.Series(values, dtype=float).rank().to_numpy(dtype=np.float64)
    sd = float(ranks.std())
    return (ranks - ranks.mean()) / sd if sd > 0 else np.zeros(len(ranks))


def sentiment_study(
    scored: Mapping[str, AltTable], closes: Mapping[str, pd.Series], *, through: date
) -> AltStudy:
    """The Spearman correlation of the default tone z-score with the next
    ``SENT_HORIZON`` bars' return, pooled over the symbols, t-stat clustered by date.

    ``scored``: the family's scored tables (``strategies.sentiment_momentum.scored``; the
    family plugin's ``scored_tables``). Each symbol's bars every ``SENT_HORIZON`` bars with a
    z-score are its sample (non-overlapping returns); within a symbol both the z-scores and
    the returns are ranked and standardised, so the pooled mean of their products is the
    symbols' Spearman correlations weighted by their samples. The products are summed per
    date, and the t-stat is that of the mean of the date sums: the symbols on one date share
    the market's move and are not counted as independent."""
    family = sentiment.KIND
    source = sentiment.SOURCES[int(sentiment.DEFAULTS["source"])]
    table = sentiment.series(scored, list(closes), through=through).get(source, {})
    by_date: dict[int, float] = {}
    n = 0
    for ticker, rows in table.items():
        close = closes[ticker].dropna()
        if not rows or len(close) <= SENT_HORIZON:
            continue
        keys = _keys(close.index)
        values = close.to_numpy(dtype=np.float64)
        zs = tone_z(rows, keys)
        at = [i for i in range(0, len(values) - SENT_HORIZON, SENT_HORIZON) if zs[i] is not None]
        if len(at) < 3:
            continue
        a = _std_ranks([float(zs[i]) for i in at])  # type: ignore[arg-type]
        b = _std_ranks([values[i + SENT_HORIZON] / values[i] - 1.0 for i in at])
        for i, x in zip(at, a * b, strict=True):
            by_date[keys[i]] = by_date.get(keys[i], 0.0) + float(x)
        n += len(at)
    what = f"{source} tone z-score vs the next {SENT_HORIZON} bars"
    if n < SENT_MIN_DAYS:
        return AltStudy(
            family=family,
            supported=False,
            n=n,
            line=f"sentiment momentum: {n} symbol-days with a {source} tone z-score, every "
            f"{SENT_HORIZON}th bar in-sample (< {SENT_MIN_DAYS}): not measured",
        )
    sums = list(by_date.values())
    rho = sum(sums) / n
    _, t = _t(sums)
    return AltStudy(
        family=family,
        supported=t >= T_MIN,
        statistic=round(rho, 6),
        t=round(t, 3),
        n=n,
        line=f"sentiment momentum: Spearman of the {what} {rho:+.3f} (t {t:+.2f} over "
        f"{len(sums)} dates, {n} symbol-days): " + _verdict(family, t),
    )


def putcall_z(ratios: AltTable, days: list[int], *, through: date) -> list[float | None]:
    """The family's default score (equity ratio, its span and lookback) a bar dated each of
    ``days`` (yyyymmdd) reads, as its strategy reads it: the ratios known by the close of
    ``through``, keyed by their first tradable day; None while warming up or once the series
    is stale (``STALE_DAYS``)."""
    p = putcall.DEFAULTS
    points = putcall.series(ratios, through=through)[bool(p["total_ratio"])]
    scores = putcall.scores([pt.ratio for pt in points], int(p["span"]), int(p["lookback"]))
    keys = np.asarray([pt.day for pt in points], dtype=np.int64)
    out: list[float | None] = []
    for day in days:
        j = int(np.searchsorted(keys, day, side="right")) - 1
        if j < 0:
            out.append(None)
            continue
        k = int(keys[j])
        gap = date(day // 10000, day // 100 % 100, day % 100) - date(
            k // 10000, k // 100 % 100, k % 100
        )
        out.append(scores[j] if gap.days <= putcall.STALE_DAYS else None)
    return out


def putcall_study(ratios: AltTable, closes: Mapping[str, pd.Series], *, through: date) -> AltStudy:
    """The Spearman correlation of the put/call score with the universe's equal-weight
    next-period return, over non-overlapping ``PC_STEP``-bar periods; positive supports."""
    family = putcall.KIND
    frame = pd.DataFrame(dict(closes)).dropna()
    days = _keys(frame.index)
    zs = putcall_z(ratios, days, through=through)
    values = frame.to_numpy(dtype=np.float64)
    pairs = [
        (float(z), float(np.mean(values[i + PC_STEP] / values[i] - 1.0)))
        for i in range(0, len(frame) - PC_STEP, PC_STEP)
        if (z := zs[i]) is not None
    ]
    if len(pairs) < PC_MIN_PERIODS:
        return AltStudy(
            family=family,
            supported=False,
            n=len(pairs),
            line=f"put/call regime: {len(pairs)} {PC_STEP}-bar periods with a put/call score "
            f"in-sample (< {PC_MIN_PERIODS}): not measured",
        )
    score, fwd = zip(*pairs, strict=True)
    rho = pd.Series(score).corr(pd.Series(fwd), method="spearman")
    rho = float(rho) if math.isfinite(rho) else 0.0
    n = len(pairs)
    t = rho * math.sqrt((n - 2) / (1.0 - rho * rho)) if abs(rho) < 1 else math.copysign(99.0, rho)
    return AltStudy(
        family=family,
        supported=t >= T_MIN,
        statistic=round(rho, 6),
        t=round(t, 3),
        n=n,
        line=f"put/call regime: Spearman of the put/call score vs the universe's equal-weight "
        f"next {PC_STEP} bars {rho:+.3f} (t {t:+.2f}, {n} periods; positive is contrarian): "
        + _verdict(family, t),
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
    ratings = alt.table(REV_TABLE)
    if ratings is not None:
        out.append(revision_study(ratings, closes, through=through))
    if alt.table(sentiment.TWEETS) is not None:  # the family's default source
        from swarm.families import registry

        # The family's own scores (each item scored once per folder, shared with its code).
        scored_tables = getattr(registry().for_kind(sentiment.KIND), "scored_tables", None)
        if scored_tables is not None:
            out.append(sentiment_study(scored_tables(alt.root), closes, through=through))
    ratios = alt.table(putcall.TABLE)
    if ratios is not None:
        out.append(putcall_study(ratios, closes, through=through))
    return out
