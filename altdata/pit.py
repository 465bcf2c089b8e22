"""The point-in-time contract: every row carries ``known_at``, the moment it became known
(UTC), and no consumer sees a row before it.

An ``AltTable`` is one dataset, sorted by ``known_at``; ``as_of(t)`` is the only way to its
rows for a decision at ``t``. The trusted side cuts it by bar time exactly as it cuts bars.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from altdata.sessions import decision_time

KNOWN_AT = "known_at"
TICKER = "ticker"


def utc(t: object) -> pd.Timestamp:
    """``t`` as a UTC moment (a naive one is read as UTC)."""
    ts = pd.Timestamp(t)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


@dataclass(frozen=True)
class AltTable:
    """One alternative dataset, point in time.

    ``frame``: the corpus columns plus ``known_at`` (tz-aware UTC), sorted by it; ``ticker``
    when ``per_ticker``. ``source``: the file, as findings cite it (relative to the alt-data
    root). ``rule``: the availability rule, in words, for reports."""

    name: str
    source: str
    frame: pd.DataFrame
    per_ticker: bool
    rule: str

    def __post_init__(self) -> None:
        known = self.frame.get(KNOWN_AT)
        if known is None or str(getattr(known.dtype, "tz", "")) != "UTC":
            raise ValueError(
                f"{self.source}: a point-in-time table needs a UTC {KNOWN_AT!r} column"
            )
        if not known.is_monotonic_increasing:
            raise ValueError(f"{self.source}: rows must be sorted by {KNOWN_AT!r}")

    def as_of(self, t: object) -> pd.DataFrame:
        """The rows known at ``t`` (a tz-aware moment, or a naive one read as UTC): a copy."""
        end = self.frame[KNOWN_AT].array.searchsorted(utc(t), side="right")
        return self.frame.iloc[:end].copy()

    def as_of_day(self, day: object) -> pd.DataFrame:
        """The rows a daily bar dated ``day`` may decide on (known by its session's close)."""
        return self.as_of(decision_time(day))

    def for_ticker(self, ticker: str, t: object) -> pd.DataFrame:
        """The rows known at ``t`` for ``ticker`` (all of them for a table not keyed by ticker)."""
        rows = self.as_of(t)
        return rows[rows[TICKER] == ticker] if self.per_ticker else rows

    def tickers(self) -> list[str]:
        """The tickers the table covers, sorted; empty for a table not keyed by ticker."""
        return sorted(self.frame[TICKER].dropna().unique()) if self.per_ticker else []

    @property
    def path(self) -> Path:
        """The file the table was read from."""
        return Path(self.source)
