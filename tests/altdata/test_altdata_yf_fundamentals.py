"""yfinance statements as the point-in-time table: Yahoo's layout (line items x period ends,
newest first) built by hand, the Ticker object monkeypatched: no network."""

from __future__ import annotations

import pandas as pd
import pytest

from altdata import yf_fundamentals as yff
from altdata.corpus import AltData
from altdata.errors import AltDataError, SourceOffline
from altdata.pit import KNOWN_AT
from altdata.sessions import decision_time, session_after, session_open
from altdata.statements import StatementsFeed

pytestmark = pytest.mark.unit

YEARS = [pd.Timestamp("2016-09-30"), pd.Timestamp("2015-09-30")]  # newest first, as Yahoo
QUARTERS = [pd.Timestamp("2016-12-31"), pd.Timestamp("2016-09-30")]


def _frame(rows: dict[str, list[float]], ends: list[pd.Timestamp]) -> pd.DataFrame:
    return pd.DataFrame(rows, index=ends).T  # index: line items, columns: period ends


class FakeTicker:
    """``yfinance.Ticker``'s statement getters over hand-built frames (pretty labels for the
    income statement, Yahoo's raw keys for the others: both occur)."""

    def __init__(self, symbol: str):
        self.symbol = symbol

    def get_income_stmt(self, freq: str = "yearly") -> pd.DataFrame:
        if freq == "yearly":
            return _frame(
                {
                    "Total Revenue": [120.0, 100.0],
                    "Net Income": [18.0, 10.0],
                    "Operating Income": [20.0, 15.0],
                    "Basic EPS": [1.8, 1.0],
                },
                YEARS,
            )
        return _frame({"Operating Revenue": [33.0, 31.0], "Net Income": [5.0, 4.0]}, QUARTERS)

    def get_balance_sheet(self, freq: str = "yearly") -> pd.DataFrame:
        ends = YEARS if freq == "yearly" else QUARTERS
        return _frame(
            {
                "TotalAssets": [90.0, 80.0],
                "StockholdersEquity": [50.0, 45.0],
                "TotalLiabilitiesNetMinorityInterest": [40.0, 35.0],
            },
            ends,
        )

    def get_cash_flow(self, freq: str = "yearly") -> pd.DataFrame:
        if freq == "yearly":
            return _frame(
                {"OperatingCashFlow": [12.0, 11.0], "CapitalExpenditure": [-3.0, float("nan")]},
                YEARS,
            )
        return pd.DataFrame()


@pytest.fixture
def patched(monkeypatch) -> None:
    import yfinance

    monkeypatch.setattr(yfinance, "Ticker", FakeTicker)


def test_yahoo_statements_become_the_corpus_columns(patched) -> None:
    rows = yff.fetcher(offline=False)("xyz")
    annual = rows[rows["period"] == "annual"].set_index("period_end")
    assert list(annual.index) == ["2015-09-30", "2016-09-30"]  # oldest first
    fy16 = annual.loc["2016-09-30"]
    assert fy16["total_revenue"] == 120 and fy16["net_income"] == 18
    assert fy16["capital_expenditures"] == -3  # Yahoo's sign is already the corpus's
    assert fy16["earnings_per_share"] == 1.8 and fy16["total_liabilities"] == 40
    assert pd.isna(annual.loc["2015-09-30", "capital_expenditures"])
    quarterly = rows[rows["period"] == "quarterly"].set_index("period_end")
    assert quarterly.loc["2016-12-31", "total_revenue"] == 33  # the fallback line item
    assert set(rows["ticker"]) == {"XYZ"} and set(rows["form"]) == {"yahoo"}


def test_known_at_is_the_documented_lag_after_period_end_never_sooner(patched) -> None:
    rows = yff.fetcher(offline=False)("XYZ")
    for period, days in (("annual", 90), ("quarterly", 45)):
        part = rows[rows["period"] == period]
        for end, known in zip(part["period_end"], part[KNOWN_AT], strict=True):
            lagged = pd.Timestamp(end) + pd.Timedelta(days=days)
            assert known == session_open(session_after(lagged))
            assert known > lagged.tz_localize("UTC")
    # FY2016 (period end 2016-09-30) is known at the open of 2016-12-30: not on the 29th.
    feed = StatementsFeed(source=yff.SOURCE, rule=yff.RULE, fetch=yff.fetcher(offline=False))
    feed.want(["XYZ"])
    table = AltData(None, statements=feed).table("statements")
    assert table is not None
    assert table.for_ticker("XYZ", decision_time("2016-12-29"))["period_end"].max() == "2015-09-30"
    assert table.for_ticker("XYZ", decision_time("2016-12-30"))["period_end"].max() == "2016-09-30"


def test_offline_and_network_errors_are_data_gaps_that_say_what_to_do(monkeypatch) -> None:
    with pytest.raises(SourceOffline, match="drop --offline"):
        yff.fetcher(offline=True)("XYZ")

    class Down(FakeTicker):
        def get_income_stmt(self, freq: str = "yearly") -> pd.DataFrame:
            raise ConnectionError("DNS failure")

    with pytest.raises(AltDataError, match="ConnectionError: DNS failure"):
        yff.fetcher(offline=False, make_ticker=Down)("XYZ")

    class Empty(FakeTicker):
        def get_income_stmt(self, freq: str = "yearly") -> pd.DataFrame:
            return pd.DataFrame()

        get_balance_sheet = get_cash_flow = get_income_stmt

    with pytest.raises(AltDataError, match="no statements for XYZ"):
        yff.fetcher(offline=False, make_ticker=Empty)("XYZ")
