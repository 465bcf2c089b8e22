"""One key per bar: daily bars by date, intraday bars by timestamp (regression: hourly
returns were keyed by date, so the gate averaged a day's hours into one observation and then
annualised it with 8,760 bars a year)."""

from __future__ import annotations

from datetime import datetime

import backtrader as bt
import pandas as pd
import pytest

from backtest.period_keys import backtrader_keys, index_keys

pytestmark = pytest.mark.unit


def test_daily_index_keys_are_dates() -> None:
    idx = pd.bdate_range("2020-01-01", periods=3)
    assert index_keys(idx) == ["2020-01-01", "2020-01-02", "2020-01-03"]


def test_intraday_index_keys_are_timestamps_in_utc() -> None:
    idx = pd.date_range("2020-01-01 22:00", periods=4, freq="h", tz="UTC")
    keys = index_keys(idx)
    assert keys == [
        "2020-01-01T22:00:00",
        "2020-01-01T23:00:00",
        "2020-01-02T00:00:00",
        "2020-01-02T01:00:00",
    ]
    assert len(set(keys)) == 4 and keys == sorted(keys)
    assert index_keys(idx.tz_convert("America/New_York")) == keys


def test_backtrader_numbers_give_the_same_keys_as_the_index() -> None:
    stamps = [datetime(2021, 3, 1, h) for h in (0, 9, 15, 23)]
    nums = [bt.date2num(s) for s in stamps]
    assert backtrader_keys(nums) == index_keys(pd.DatetimeIndex(stamps))
    days = [datetime(2021, 3, d) for d in (1, 2, 3)]
    assert backtrader_keys([bt.date2num(d) for d in days]) == [
        "2021-03-01",
        "2021-03-02",
        "2021-03-03",
    ]
