"""Point-in-time alternative data: every row is invisible before the moment it was known."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED_DATA

from altdata.corpus import DATASETS, AltData, find_alt_root, load
from altdata.pit import KNOWN_AT, AltTable
from altdata.sessions import decision_time

pytestmark = pytest.mark.unit


def _corpus(tmp_path: Path, name: str, frame: pd.DataFrame) -> AltData:
    path = tmp_path / DATASETS[name].source
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return AltData(tmp_path)


def test_a_put_call_row_planted_one_bar_ahead_is_invisible(tmp_path):
    """The put/call ratio of 2016-03-24 is published after that day's close: the bars of
    03-23 and 03-24 (deciding at their close) never see it, the next bar does."""
    frame = pd.DataFrame(
        {"date": ["2016-03-22", "2016-03-23", "2016-03-24"], "equity_pc": [0.6, 0.7, 9.9]}
    )
    table = _corpus(tmp_path, "put_call", frame).table("put_call")
    assert 9.9 not in table.as_of_day("2016-03-23")["equity_pc"].tolist()
    assert 9.9 not in table.as_of_day("2016-03-24")["equity_pc"].tolist()
    assert table.as_of_day("2016-03-28")["equity_pc"].tolist()[-1] == 9.9  # after Good Friday


def test_statements_are_known_the_first_session_after_period_end_plus_90_days(tmp_path):
    frame = pd.DataFrame(
        {
            "ticker": ["AAPL", "AAPL"],
            "period_end": ["2013-09-28", "2014-09-27"],
            "total_revenue": [1.0, 2.0],
        }
    )
    table = _corpus(tmp_path, "statements", frame).table("statements")
    # 2014-09-27 + 90 days = 2014-12-26 (a Friday session): known the next session, 12-29.
    assert table.frame[KNOWN_AT].iloc[1] == pd.Timestamp("2014-12-29 14:30", tz="UTC")
    assert table.for_ticker("AAPL", decision_time("2014-12-26"))["total_revenue"].tolist() == [1.0]
    assert table.for_ticker("AAPL", decision_time("2014-12-29"))["total_revenue"].tolist() == [
        1.0,
        2.0,
    ]


def test_an_earnings_surprise_is_known_at_the_open_when_pre_market_else_at_the_close(tmp_path):
    frame = pd.DataFrame(
        {
            "report_date": ["2015-04-27", "2015-04-28"],
            "ticker": ["AAPL", "MSFT"],
            "fiscal_qtr": ["15-Mar", "15-Mar"],
            "eps_consensus_est": [2.0, 0.5],
            "eps_reported": [2.3, 0.6],
            "surprise": [0.3, 0.1],
            "release_time": ["post", "pre"],
        }
    )
    table = _corpus(tmp_path, "surprises", frame).table("surprises")
    known = dict(zip(table.frame["ticker"], table.frame[KNOWN_AT], strict=True))
    assert known["AAPL"] == pd.Timestamp("2015-04-27 20:30", tz="UTC")  # after 16:00 New York
    assert known["MSFT"] == pd.Timestamp("2015-04-28 13:30", tz="UTC")  # 09:30 New York
    # The post-market report is not visible to the bar that decides at that day's close.
    assert table.for_ticker("AAPL", decision_time("2015-04-27")).empty
    assert len(table.for_ticker("AAPL", decision_time("2015-04-28"))) == 1


def test_a_headline_is_known_at_its_timestamp_and_a_tweet_at_its_creation(tmp_path):
    heads = pd.DataFrame(
        {
            "date": ["2018-05-01"],
            "datetime": ["2018-05-01T17:05:00-04:00"],
            "ticker": ["NVDA"],
            "headline": ["x"],
        }
    )
    table = _corpus(tmp_path, "headlines", heads).table("headlines")
    assert table.frame[KNOWN_AT].iloc[0] == pd.Timestamp("2018-05-01 21:05", tz="UTC")
    assert table.as_of_day("2018-05-01").empty  # after the close: the next bar's
    assert len(table.as_of_day("2018-05-02")) == 1


def test_tables_reject_unsorted_or_naive_known_at():
    frame = pd.DataFrame({KNOWN_AT: pd.to_datetime(["2020-01-02", "2020-01-01"], utc=True)})
    with pytest.raises(ValueError, match="sorted"):
        AltTable("x", "x.csv", frame, False, "")
    naive = pd.DataFrame({KNOWN_AT: pd.to_datetime(["2020-01-01"])})
    with pytest.raises(ValueError, match="UTC"):
        AltTable("x", "x.csv", naive, False, "")


def test_a_missing_folder_is_an_abstention_that_names_it(tmp_path):
    alt = AltData(tmp_path)
    assert alt.table("tweets") is None
    assert "social" in alt.missing("tweets") and "stocknet" in alt.missing("tweets")
    assert "--alt-data" in AltData(None).missing("statements")


def test_a_file_without_the_corpus_columns_is_a_clear_error(tmp_path):
    path = tmp_path / DATASETS["surprises"].source
    path.parent.mkdir(parents=True)
    pd.DataFrame({"report_date": ["2015-01-01"], "ticker": ["A"]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="release_time"):
        load(tmp_path, DATASETS["surprises"])


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="real corpus not found")
def test_the_corpus_is_found_above_the_daily_folder_and_every_file_loads():
    root = find_alt_root(SHARED_DATA / "ohlcv" / "daily")
    assert root == SHARED_DATA.resolve()
    alt = AltData(root)
    for name in DATASETS:
        table = alt.table(name)
        assert table is not None and len(table.frame) > 0, name
        assert table.frame[KNOWN_AT].is_monotonic_increasing
    assert find_alt_root(Path("/")) is None
