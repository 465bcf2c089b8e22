"""Gaps and coverage count the days a market trades: an NYSE holiday or closure is no gap, a
crypto weekend is an expected bar, and data starting or ending inside the requested window
says so instead of reporting "coverage 100 %"."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SHARED_DATA, read_real_bars

from backtest.data import MarketDays, assess_quality, load_bars, market_days

pytestmark = pytest.mark.unit


def _bars(index: pd.DatetimeIndex) -> pd.DataFrame:
    close = 100 * np.exp(np.cumsum(np.random.default_rng(5).normal(0, 0.01, len(index))))
    return pd.DataFrame(
        {"open": close, "high": close * 1.01, "low": close * 0.99, "close": close, "volume": 1e6},
        index=index.rename("date"),
    )


@pytest.mark.integration
def test_the_2012_hurricane_closure_is_not_a_gap() -> None:
    bars = read_real_bars("SPY", "2012-01-01", "2012-12-31")
    assert pd.Timestamp("2012-10-29") not in bars.index  # the exchange was shut
    q = assess_quality(bars)
    assert q.calendar == MarketDays.XNYS
    assert q.n_gaps == 0 and q.coverage_pct == 100.0


def test_a_missing_nyse_session_is_a_gap_and_its_holidays_are_not() -> None:
    sessions = pd.DatetimeIndex(
        [
            d
            for d in pd.bdate_range("2012-10-01", "2012-12-31")
            if d.strftime("%m-%d") not in ("10-29", "10-30", "11-22", "12-25")
        ]
    )
    assert market_days(sessions) == MarketDays.XNYS
    assert assess_quality(_bars(sessions)).n_gaps == 0
    q = assess_quality(_bars(sessions.drop(pd.Timestamp("2012-11-07"))))  # a Wednesday
    assert q.n_gaps == 1 and q.gaps[0].missing_days == 1
    assert (q.gaps[0].from_, q.gaps[0].to) == ("2012-11-06", "2012-11-08")


def test_crypto_trades_every_day() -> None:
    days = pd.date_range("2021-01-01", "2021-03-31", freq="D")
    q = assess_quality(_bars(days))
    assert q.calendar == MarketDays.ALWAYS and q.n_gaps == 0 and q.coverage_pct == 100.0
    holed = assess_quality(_bars(days.drop(pd.Timestamp("2021-02-06"))))  # a Saturday
    assert holed.n_gaps == 1 and holed.gaps[0].missing_days == 1
    assert holed.coverage_pct == pytest.approx(100 * 89 / 90, abs=1e-3)


def test_data_starting_inside_the_window_is_warned(tmp_path: Path) -> None:
    days = pd.date_range("2019-06-01", "2020-12-31", freq="D")
    bars = _bars(days)
    bars.index = bars.index.strftime("%Y-%m-%d")
    bars.rename_axis("date").to_csv(tmp_path / "COIN-USD.csv")
    loaded = load_bars(
        "COIN-USD",
        start=date(2018, 1, 1),
        end=date(2020, 12, 31),
        source="csv",
        data_dir=tmp_path,
    )
    q = loaded.quality
    assert q.coverage_pct == 100.0  # of its own span
    assert q.window_coverage_pct == pytest.approx(100 * len(days) / 1096, abs=0.01)
    assert len(q.coverage_warnings) == 1
    assert q.coverage_warnings[0].startswith("data starts 2019-06-01, 516 days after")
    inside = load_bars(
        "COIN-USD",
        start=date(2019, 6, 3),
        end=date(2020, 12, 29),
        source="csv",
        data_dir=tmp_path,
    )
    assert inside.quality.coverage_warnings == []  # a few days short: the tolerance


@pytest.mark.integration
def test_real_eth_starts_inside_a_2012_window() -> None:
    crypto = SHARED_DATA / "ohlcv" / "crypto"
    if not crypto.exists():
        pytest.skip("no crypto corpus")
    q = load_bars(
        "ETH-USD", start=date(2012, 1, 1), end=date(2020, 12, 31), source="csv", data_dir=crypto
    ).quality
    assert q.calendar == MarketDays.ALWAYS and q.coverage_pct == 100.0
    assert any(w.startswith("data starts 2017-11-09") for w in q.coverage_warnings)
    assert q.window_coverage_pct < 40
