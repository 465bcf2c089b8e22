"""The market impact of one dated item, from the closes research may see.

The base is the last close strictly before the item became known (an item known at 07:00
New York compares against the previous session's close; one known after the close, against
that close). Horizon ``h`` ends at the ``h``-th session after the base. A horizon that ends
after ``as_of`` is unknown, never computed: bars after the research date are the holdout's,
so the closes are cut at ``as_of`` here even if a caller passes more.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pandas as pd

from altdata.pit import utc
from altdata.sessions import decision_time

HORIZONS = (1, 5)  # sessions: the first session after the item, and a week of trading
UNKNOWN_AFTER_AS_OF = "unknown: after the research date"
UNKNOWN_NO_BASE = "unknown: no close before the item in the research bars"


@dataclass(frozen=True)
class Impact:
    """Close-to-close return over ``sessions`` sessions from ``start`` (the base close) to
    ``end``; ``ret`` None with ``note`` saying why when it cannot be known at ``as_of``."""

    sessions: int
    start: dt.date | None = None
    end: dt.date | None = None
    ret: float | None = None
    note: str | None = None

    def describe(self) -> str:
        """The impact in words: sessions, the return and its closes, or why there is none."""
        label = f"{self.sessions} session{'s' if self.sessions != 1 else ''}"
        if self.ret is None:
            return f"{label}: {self.note}"
        return f"{label}: {self.ret:+.2%} (close {self.start} to close {self.end})"


def market_impact(
    closes: pd.Series,
    known_at: pd.Timestamp,
    *,
    as_of: dt.date,
    horizons: tuple[int, ...] = HORIZONS,
) -> tuple[Impact, ...]:
    """The return of ``closes`` (indexed by session date) from the last close before
    ``known_at`` to the close ``h`` sessions later, for each ``h`` in ``horizons``; only
    closes dated on or before ``as_of`` are read."""
    closes = closes.dropna()
    days = pd.DatetimeIndex(closes.index).normalize()
    if days.tz is not None:
        days = days.tz_localize(None)
    visible = days <= pd.Timestamp(as_of)
    days, values = days[visible], closes.to_numpy(dtype=float)[visible]
    known = utc(known_at)
    base = int(days.searchsorted(pd.Timestamp(known.date()), side="right")) - 1
    if base >= 0 and decision_time(days[base]) >= known:  # that session closed after the item
        base -= 1
    out = []
    for h in horizons:
        if base < 0:
            out.append(Impact(h, note=UNKNOWN_NO_BASE))
        elif base + h >= len(days):
            out.append(Impact(h, start=days[base].date(), note=UNKNOWN_AFTER_AS_OF))
        else:
            ret = values[base + h] / values[base] - 1.0
            out.append(Impact(h, days[base].date(), days[base + h].date(), float(ret)))
    return tuple(out)
