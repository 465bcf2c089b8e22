"""The key of a return period: what strategy, benchmark and aggregate series are aligned on.

Daily bars are keyed by ISO date (``2020-01-02``), intraday bars by their timestamp to the
second (``2020-01-02T10:00:00``, naive UTC), so one key is one bar whatever the timeframe;
ISO keys sort chronologically as strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta

import pandas as pd

STAMP = "%Y-%m-%dT%H:%M:%S"


def index_keys(index: pd.DatetimeIndex | Sequence[pd.Timestamp]) -> list[str]:
    """Keys of a bar index: dates when every bar is at midnight, timestamps otherwise."""
    idx = pd.DatetimeIndex(index)
    if idx.tz is not None:
        idx = idx.tz_convert("UTC").tz_localize(None)
    if len(idx) and (idx != idx.normalize()).any():
        return [t.strftime(STAMP) for t in idx]
    return [t.date().isoformat() for t in idx]


def backtrader_keys(nums: Sequence[float]) -> list[str]:
    """Keys of backtrader date numbers (proleptic ordinal + the time as a fraction of a day)."""
    fractions = [n - int(n) for n in nums]
    if not any(f > 1e-9 for f in fractions):
        return [date.fromordinal(int(n)).isoformat() for n in nums]
    out = []
    for n, f in zip(nums, fractions, strict=True):
        stamp = datetime.fromordinal(int(n)) + timedelta(seconds=round(f * 86_400))
        out.append(stamp.strftime(STAMP))
    return out
