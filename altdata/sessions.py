"""The NYSE calendar the availability rules use (``exchange_calendars``, XNYS).

A row known before a session's open can drive that session's decisions; one known after its
close, the next session's. A daily bar's decision is taken at its close (orders fill at the
next open), so a row is visible to the bar of session ``d`` when it was known by ``d``'s close.
"""

from __future__ import annotations

from functools import lru_cache

import exchange_calendars as xcals
import pandas as pd

from backtest.data import xnys_calendar

FIRST = "1990-01-02"


@lru_cache(maxsize=1)
def nyse() -> xcals.ExchangeCalendar:
    """The NYSE trading calendar from ``FIRST`` on."""
    return xnys_calendar(FIRST)


def _day(d: object) -> pd.Timestamp:
    ts = pd.Timestamp(d)
    return (ts.tz_convert("UTC").tz_localize(None) if ts.tzinfo else ts).normalize()


def session_on_or_after(d: object) -> pd.Timestamp:
    """The first NYSE session on or after calendar day ``d`` (naive date)."""
    return nyse().date_to_session(_day(d), direction="next")


def session_after(d: object) -> pd.Timestamp:
    """The first NYSE session strictly after calendar day ``d``."""
    return nyse().next_session(nyse().date_to_session(_day(d), direction="previous"))


def first_sessions(
    days: pd.DatetimeIndex,
) -> tuple[pd.DatetimeIndex, list[pd.Timestamp], pd.DatetimeIndex] | None:
    """For naive calendar days, looked up at once: the first session on or after each
    (``session_on_or_after``), its close (UTC, ``session_close``) and the session after it
    (``session_after``). None when a day is outside the calendar (the one-day functions then
    say why)."""
    cal = nyse()
    sessions = cal.sessions
    if len(days) == 0:
        return sessions[:0], [], sessions[:0]
    at = sessions.searchsorted(days, side="left")
    if days.min() < sessions[0] or at.max() + 1 >= len(sessions):
        return None
    return sessions[at], cal.closes.iloc[at].tolist(), sessions[at + 1]


def session_open(session: object) -> pd.Timestamp:
    """The open of ``session`` (UTC)."""
    return nyse().session_open(_day(session))


def session_close(session: object) -> pd.Timestamp:
    """The close of ``session`` (UTC; 13:00 New York on a half day)."""
    return nyse().session_close(_day(session))


def decision_time(day: object) -> pd.Timestamp:
    """When a daily bar dated ``day`` decides: its session's close, or for a day that is no
    session (a weekend bar of 24/7 data) the end of that calendar day, UTC."""
    d = _day(day)
    if nyse().is_session(d):
        return session_close(d)
    return (d + pd.Timedelta(days=1)).tz_localize("UTC") - pd.Timedelta(microseconds=1)
