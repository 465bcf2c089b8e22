"""Which days a market trades, so gaps and coverage count only bars it should have printed.

An exchange holiday (the 2012 hurricane closure, 2012-10-29/30) is no missing bar, and a
crypto weekend is a trading day. A frame carries no exchange name, so the calendar is read
off the bars themselves:

- ``ALWAYS``: bars on weekends (a 24/7 market such as crypto): every calendar day trades;
- ``XNYS``: (nearly) every bar falls on an NYSE session: the NYSE calendar from
  ``exchange_calendars`` (the one ``altdata.sessions`` uses), holidays and closures included;
- ``WEEKDAYS``: anything else (another exchange, synthetic business days): Monday to Friday,
  with unknown holidays, so ``backtest.data.quality`` keeps its long-weekend tolerance there.
"""

from __future__ import annotations

import warnings
from enum import StrEnum
from functools import lru_cache

import exchange_calendars as xcals
import numpy as np
import pandas as pd

WEEKEND_SHARE_ALWAYS = 0.1  # as backtest.data.periods_per_year: bars on weekends mean 24/7
# Share of bars on NYSE sessions above which a series is read as NYSE-listed: the daily
# corpus is at 1.0; synthetic business days (holidays included) sit near 0.96.
EXCHANGE_MATCH = 0.99
CALENDAR_START = "1970-01-02"  # the corpus' oldest US bars; earlier days count as weekdays


class MarketDays(StrEnum):
    ALWAYS = "24/7"
    XNYS = "XNYS"
    WEEKDAYS = "weekdays"


def xnys_calendar(start: str) -> xcals.ExchangeCalendar:
    """The NYSE calendar from ``start`` on, built without exchange_calendars' pandas-3
    deprecation warning (its ``Series.values`` on tz-aware opens; the values are the same)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Series.values returning", category=Warning)
        return xcals.get_calendar("XNYS", start=start)


@lru_cache(maxsize=1)
def _xnys_sessions() -> pd.DatetimeIndex:
    cal = xnys_calendar(CALENDAR_START)
    return pd.DatetimeIndex(cal.sessions).tz_localize(None).as_unit("ns")


def market_days(index: pd.DatetimeIndex) -> MarketDays:
    """The calendar ``index``'s bars follow (see the module docstring)."""
    days = pd.DatetimeIndex(index).normalize().unique()
    if not len(days):
        return MarketDays.WEEKDAYS
    if float((days.day_of_week >= 5).mean()) > WEEKEND_SHARE_ALWAYS:
        return MarketDays.ALWAYS
    sessions = _xnys_sessions()
    inside = days[(days >= sessions[0]) & (days <= sessions[-1])]
    if len(inside) and float(inside.isin(sessions).mean()) >= EXCHANGE_MATCH:
        return MarketDays.XNYS
    return MarketDays.WEEKDAYS


def trading_days(kind: MarketDays, start: pd.Timestamp, end: pd.Timestamp) -> pd.DatetimeIndex:
    """The days in [start, end] (normalised, inclusive) on which a ``kind`` market trades."""
    lo, hi = pd.Timestamp(start).normalize(), pd.Timestamp(end).normalize()
    if kind == MarketDays.ALWAYS:
        return pd.date_range(lo, hi, freq="D").as_unit("ns")
    weekdays = pd.bdate_range(lo, hi).as_unit("ns")
    if kind == MarketDays.WEEKDAYS:
        return weekdays
    sessions = _xnys_sessions()
    known = sessions[(sessions >= lo) & (sessions <= hi)]
    outside = weekdays[(weekdays < sessions[0]) | (weekdays > sessions[-1])]
    return known.append(outside).sort_values()


def missing_between(days: pd.DatetimeIndex, expected: pd.DatetimeIndex) -> np.ndarray:
    """For each pair of consecutive ``days``, how many ``expected`` days lie strictly between."""
    pos = expected.searchsorted(pd.DatetimeIndex(days).normalize())
    # A bar on a day the calendar has no session for (left) still ends the hole before it.
    after = expected.searchsorted(pd.DatetimeIndex(days).normalize(), side="right")
    return np.maximum(pos[1:] - after[:-1], 0)
