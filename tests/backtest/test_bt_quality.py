"""Quality report on planted defects; sha256 stability."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars

from backtest.data import assess_quality, bars_sha256


def _clean_bars(n: int = 60, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    index = pd.bdate_range("2021-01-04", periods=n, name="date")
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = np.concatenate([[100.0], close[:-1]])
    return pd.DataFrame(
        {
            "open": open_,
            "high": np.maximum(open_, close) * 1.005,
            "low": np.minimum(open_, close) * 0.995,
            "close": close,
            "volume": np.full(n, 1e6),
        },
        index=index,
    )


@pytest.mark.unit
def test_clean_series_has_no_issues() -> None:
    q = assess_quality(_clean_bars())
    assert q.issues == [] and q.ok
    assert q.coverage_pct == 100.0 and q.n_bars == 60 and q.expected_bars == 60
    assert q.start == "2021-01-04"


@pytest.mark.unit
def test_planted_defects_are_reported() -> None:
    bars = _clean_bars()
    d = bars.index
    bars.loc[d[5], "high"] = bars.loc[d[5], "close"] * 0.98  # high below close
    bars.loc[d[8], "low"] = bars.loc[d[8], "open"] * 1.02  # low above open
    bars.loc[d[12], "volume"] = 0.0
    # An unadjusted 2:1 split from bar 40 on: every price halves.
    bars.loc[d[40] :, ["open", "high", "low", "close"]] *= 0.5
    bars.loc[d[40], "open"] = bars.loc[d[39], "close"] * 0.5  # keep the bar itself valid
    bars.loc[d[40], "high"] = bars.loc[d[40], ["open", "close"]].max() * 1.005
    bars = bars.drop(d[20:26])  # a hole of 6 business days
    q = assess_quality(bars)

    assert q.ohlc_violations == 2
    assert q.ohlc_violation_dates == [d[5].date().isoformat(), d[8].date().isoformat()]
    assert q.zero_volume_bars == 1
    assert q.n_gaps == 1
    gap = q.gaps[0]
    assert (gap.from_, gap.to) == (d[19].date().isoformat(), d[26].date().isoformat())
    assert gap.calendar_days == (d[26] - d[19]).days
    assert gap.model_dump()["from"] == gap.from_  # serialised as {"from", "to", ...}
    assert [s.date for s in q.suspected_splits] == [d[40].date().isoformat()]
    assert q.suspected_splits[0].nearest_split_ratio == 2.0
    assert d[40].date().isoformat() in q.outlier_bars
    assert q.coverage_pct == pytest.approx(100 * 54 / 60)
    assert len(q.issues) == 5  # coverage is 90%: not flagged


@pytest.mark.unit
def test_long_weekend_is_not_a_gap_and_low_coverage_is_flagged() -> None:
    bars = _clean_bars(20)
    q = assess_quality(bars.drop(bars.index[4]))  # Fri 2021-01-08 dropped: Thu -> Mon = 4 days
    assert q.n_gaps == 0
    sparse = assess_quality(bars.iloc[::2])
    assert sparse.coverage_pct < 60 and any("coverage" in s for s in sparse.issues)


@pytest.mark.unit
def test_sha256_is_canonical() -> None:
    bars = _clean_bars()
    h = bars_sha256(bars)
    assert h == bars_sha256(bars.copy())
    noisy = bars + 1e-12  # float noise below the 6-decimal canonical precision
    assert bars_sha256(noisy) == h
    reordered = bars[["close", "volume", "open", "low", "high"]].assign(extra=1.0)
    assert bars_sha256(reordered) == h
    changed = bars.copy()
    changed.iloc[3, 0] += 0.01
    assert bars_sha256(changed) != h


@pytest.mark.integration
def test_sha256_same_across_sources(tmp_path) -> None:
    bars = read_real_bars("AAPL", "2015-01-01", "2016-12-31")
    path = tmp_path / "x.parquet"
    bars.to_parquet(path)
    assert bars_sha256(pd.read_parquet(path)) == bars_sha256(bars)
    csv = tmp_path / "x.csv"
    bars.to_csv(csv)
    back = pd.read_csv(csv, parse_dates=["date"], index_col="date")
    assert bars_sha256(back) == bars_sha256(bars)


@pytest.mark.integration
def test_real_corpus_quality() -> None:
    q = assess_quality(read_real_bars("AAPL", "2015-01-01", "2016-12-31"))
    assert q.n_bars == 504 and q.ohlc_violations == 0 and q.suspected_splits == []
    assert 95 < q.coverage_pct <= 100
    amd = assess_quality(read_real_bars("AMD", "2016-01-01", "2016-12-31"))
    assert [s.date for s in amd.suspected_splits] == ["2016-04-22"]  # a real +52% day
