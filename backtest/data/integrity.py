"""Bars no market can print: refused, or with ``--repair`` mended and reported change by change.

A non-positive price, two bars with one timestamp, or a bar whose high is below its open or
close (its low above them, its high below its low) is a broken file, not a market event. Run
on such bars, a strategy trades on prices that never existed and the failure analysis then
blames the strategy. So the loader refuses them, naming the file, the line, the date and the
fix; ``--repair`` instead applies the one mend each defect has and lists every change, so it
reaches stderr and the run's manifest and report.

Only the rows inside the requested window are checked: a broken bar from 1995 does not stop a
2015 backtest that never reads it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel

from backtest.errors import DataError

PRICE_COLUMNS = ("open", "high", "low", "close")
MAX_QUOTED = 3  # defects quoted in a refusal; the rest are counted

DefectKind = Literal["non_positive", "duplicate", "ohlc"]

# What --repair does to each kind, said once for the refusal's hint and the change log.
REPAIR_ACTION: dict[str, str] = {
    "non_positive": "row dropped",
    "duplicate": "earlier row dropped, the last one kept",
    "ohlc": "high and low widened to the bar's open/close",
}


class BarDefect(BaseModel):
    """One broken row, and (under ``--repair``) what was done to it."""

    date: str
    line: int | None  # 1-based line in the file (header is line 1); None for a non-file source
    kind: DefectKind
    detail: str  # e.g. "close -3.0 is not positive"
    action: str  # what --repair does (did) about it

    def describe(self) -> str:
        """The defect with where it is, for messages."""
        where = f"line {self.line} ({self.date})" if self.line is not None else self.date
        return f"{where}: {self.detail}"


def _fmt(x: float) -> str:
    return f"{x:g}"


def find_defects(frame: pd.DataFrame, lines: np.ndarray | None = None) -> list[BarDefect]:
    """Every broken row of ``frame`` (DatetimeIndex, lower-case price columns), in file order.

    ``lines`` are the rows' line numbers in their file, when there is one.
    """
    index = pd.DatetimeIndex(frame.index)
    intraday = bool(len(index)) and bool((index != index.normalize()).any())
    px = {c: pd.to_numeric(frame[c], errors="coerce").to_numpy(float) for c in PRICE_COLUMNS}
    o, h, lo, c = (px[k] for k in PRICE_COLUMNS)
    tol = 1e-9 * np.maximum(np.abs(h), 1.0)  # float noise only, as in backtest.data.quality
    with np.errstate(invalid="ignore"):
        non_pos = np.logical_or.reduce([v <= 0 for v in (o, h, lo, c)])
        high_low = h + tol < np.maximum(o, c)
        low_high = lo - tol > np.minimum(o, c)
        crossed = h + tol < lo
    dup = index.duplicated(keep="last")  # every copy but the last is dropped on repair
    found: list[tuple[int, DefectKind, str]] = []
    for i in np.flatnonzero(non_pos | high_low | low_high | crossed | dup):
        if non_pos[i]:
            bad = [f"{k} {_fmt(px[k][i])}" for k in PRICE_COLUMNS if px[k][i] <= 0]
            found.append((int(i), "non_positive", f"{', '.join(bad)} not positive"))
        else:
            why = []
            if high_low[i]:
                why.append(f"high {_fmt(h[i])} below max(open, close) {_fmt(max(o[i], c[i]))}")
            if low_high[i]:
                why.append(f"low {_fmt(lo[i])} above min(open, close) {_fmt(min(o[i], c[i]))}")
            if crossed[i] and not why:
                why.append(f"high {_fmt(h[i])} below low {_fmt(lo[i])}")
            if why:
                found.append((int(i), "ohlc", "; ".join(why)))
        if dup[i]:
            stamp = index[i].isoformat() if intraday else index[i].date().isoformat()
            found.append((int(i), "duplicate", f"timestamp {stamp} repeated later in the file"))
    return [
        BarDefect(
            date=index[i].isoformat() if intraday else index[i].date().isoformat(),
            line=None if lines is None else int(lines[i]),
            kind=kind,
            detail=detail,
            action=REPAIR_ACTION[kind],
        )
        for i, kind, detail in found
    ]


def repair_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The mends ``REPAIR_ACTION`` names: drop non-positive rows and earlier duplicates, widen
    high/low to hold open and close (and each other)."""
    px = frame[list(PRICE_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    positive = ~(px <= 0).any(axis=1)
    keep = positive.to_numpy() & ~pd.DatetimeIndex(frame.index).duplicated(keep="last")
    out = frame.loc[keep].copy()
    px = px.loc[keep]
    out["high"] = px.max(axis=1)
    out["low"] = px.min(axis=1)
    return out


def check_bars(
    frame: pd.DataFrame,
    *,
    what: str,
    repair: bool,
    lines: np.ndarray | None = None,
) -> tuple[pd.DataFrame, list[BarDefect]]:
    """``frame`` unchanged when clean; mended with its defects listed under ``repair``; else a
    DataError naming ``what`` (the argument and file), the first rows, and the two fixes."""
    defects = find_defects(frame, lines)
    if not defects:
        return frame, []
    if repair:
        return repair_frame(frame), defects
    quoted = "; ".join(d.describe() for d in defects[:MAX_QUOTED])
    more = f" (+{len(defects) - MAX_QUOTED} more)" if len(defects) > MAX_QUOTED else ""
    kinds = sorted({d.kind for d in defects})
    mends = "; ".join(f"{k.replace('_', '-')}: {REPAIR_ACTION[k]}" for k in kinds)
    raise DataError(
        f"{what} has {len(defects)} broken bar(s): {quoted}{more}; correct the file, or pass "
        f"--repair to mend and report each change ({mends})"
    )
