"""Point-in-time fundamental facts: what a moment may see, units on the real file, splits."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import SHARED_DATA

from altdata import fundamentals as fa
from altdata.corpus import DATASETS, AltData
from altdata.pit import KNOWN_AT, AltTable
from altdata.sessions import decision_time

pytestmark = pytest.mark.unit

STATEMENT_COLUMNS = {
    "total_revenue": 100.0,
    "net_income": 10.0,
    "operating_income": 15.0,
    "total_equity": 50.0,
    "total_liabilities": 40.0,
    "long_term_debt": 20.0,
    "short_term_debt_current_portion_of_long_term_debt": 5.0,
    "total_current_assets": 30.0,
    "total_current_liabilities": 20.0,
    "inventory": 4.0,
    "net_cash_flow_operating": 12.0,
    "capital_expenditures": -3.0,
    "earnings_per_share": 1.0,
    "estimated_shares_outstanding": 10.0,
}


def _table(name: str, rows: list[dict]) -> AltTable:
    ds = DATASETS[name]
    frame = pd.DataFrame(rows)
    frame[KNOWN_AT] = ds.known_at(frame)
    frame = frame.sort_values(KNOWN_AT, kind="stable").reset_index(drop=True)
    return AltTable(name, ds.source, frame, True, ds.rule)


def _statements() -> AltTable:
    old = {"ticker": "XYZ", "period_end": "2014-12-31", **STATEMENT_COLUMNS}
    new = {**old, "period_end": "2015-12-31", "total_revenue": 120.0, "net_income": 18.0}
    return _table("statements", [old, new])


@pytest.fixture(scope="module")
def corpus() -> AltData:
    if not (SHARED_DATA / DATASETS["statements"].source).is_file():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return AltData(SHARED_DATA)


def test_a_statement_known_one_session_after_as_of_is_invisible() -> None:
    st = _statements()
    # FY2015 (period end 2015-12-31) is known at the open of 2016-03-31, the first session
    # after period end + 90 days: the close of 2016-03-30 still sees FY2014 only.
    before = fa.financial_metrics(st, "XYZ", decision_time("2016-03-30"))
    after = fa.financial_metrics(st, "XYZ", decision_time("2016-03-31"))
    margin = {f.name: f for f in before}["net_margin"]
    assert margin.value == pytest.approx(0.10) and margin.cites[0].date == "2014-12-31"
    assert "revenue_growth" not in {f.name for f in before}  # no year before FY2014
    growth = {f.name: f for f in after}["revenue_growth"]
    assert growth.value == pytest.approx(0.20)
    assert [c.date for c in growth.cites] == ["2015-12-31", "2014-12-31"]


def test_trailing_pe_uses_only_eps_reported_by_t() -> None:
    reports = ["2015-04-20", "2015-07-20", "2015-10-19", "2016-01-19", "2016-04-19"]
    rows = [
        {"ticker": "XYZ", "report_date": d, "eps_reported": eps, "release_time": "post"}
        for d, eps in zip(reports, [1.0, 1.0, 1.0, 1.0, 3.0], strict=True)
    ]
    su = _table("surprises", rows)
    # The report after the close of 2016-04-19 is not known at that close: the next bar's.
    (pe,) = fa.valuation(None, su, "XYZ", decision_time("2016-04-19"), 40.0, price_basis="2016")
    assert pe.value == pytest.approx(10.0)
    assert [c.date for c in pe.cites] == reports[:4]
    (pe,) = fa.valuation(None, su, "XYZ", decision_time("2016-04-20"), 40.0, price_basis="2016")
    assert pe.value == pytest.approx(40.0 / 6.0) and pe.cites[-1].date == "2016-04-19"


def test_balance_sheet_cash_flow_and_valuation_formulas() -> None:
    st, t = _statements(), decision_time("2016-06-30")
    bs = {f.name: f.value for f in fa.balance_sheet(st, "XYZ", t)}
    assert bs == pytest.approx(
        {
            "liabilities_to_equity": 0.8,
            "debt_to_equity": 0.5,
            "current_ratio": 1.5,
            "quick_ratio": 1.3,
        }
    )
    # shares = net income / EPS = 18; market cap at 5.0 = 90
    cf = {f.name: f.value for f in fa.cash_flow(st, "XYZ", t, 5.0, price_basis=t)}
    assert cf == pytest.approx({"fcf_yield": 9.0 / 90.0, "capex_intensity": 3.0 / 120.0})
    val = {f.name: f.value for f in fa.valuation(st, None, "XYZ", t, 5.0, price_basis=t)}
    assert val == pytest.approx({"price_to_book": 90.0 / 50.0, "price_to_sales": 90.0 / 120.0})


def test_split_factor_counts_splits_between_the_two_bases() -> None:
    assert fa.split_factor("AAPL", "2013-09-28", "2016-06-30") == 7.0
    assert fa.split_factor("AAPL", "2013-09-28", "2020-12-11") == 28.0
    assert fa.split_factor("AAPL", "2019-08-15", "2020-12-11") == 4.0
    assert fa.split_factor("MSFT", "2013-06-30", "2020-12-11") == 1.0


def test_industry_ranks_the_ticker_among_its_sector_peers() -> None:
    rows = []
    for sym, margin in (("AAA", 5.0), ("BBB", 10.0), ("CCC", 20.0), ("DDD", 30.0)):
        base = {"ticker": sym, **STATEMENT_COLUMNS}
        rows.append({**base, "period_end": "2014-12-31"})
        rows.append({**base, "period_end": "2015-12-31", "net_income": margin})
    st = _table("statements", rows)
    sectors = _table(
        "sectors",
        [
            {"ticker": s, "gics_sector": "Tech" if s != "DDD" else "Energy"}
            for s in ("AAA", "BBB", "CCC", "DDD")
        ],
    )
    facts = {f.name: f for f in fa.industry(st, sectors, "CCC", decision_time("2016-06-30"))}
    assert facts["net_margin_rank"].value == 1.0  # top of AAA, BBB, CCC (DDD is not a peer)
    assert "among 3 sector peers" in facts["net_margin_rank"].text
    assert facts["net_margin_rank"].cites[1].source == DATASETS["sectors"].source


def test_units_on_the_real_file_aapl_fy2015(corpus: AltData) -> None:
    st, su = corpus.table("statements"), corpus.table("surprises")
    assert st is not None and su is not None
    t = decision_time("2016-06-30")
    row = fa.statements_at(st, "AAPL", t).iloc[-1]
    assert str(row["period_end"]) == "2015-09-26"
    assert row["total_revenue"] == 233_715_000_000  # whole dollars: 233.7 bn
    assert row["current_ratio"] == 111  # the file's ratio columns: percent x100
    assert row["capital_expenditures"] < 0  # capex is an outflow: FCF = OCF + capex
    facts = {f.name: f.value for f in fa.financial_metrics(st, "AAPL", t)}
    assert facts["revenue_growth"] == pytest.approx(233_715 / 182_795 - 1)
    assert facts["net_margin"] == pytest.approx(53_394 / 233_715)
    bs = {f.name: f.value for f in fa.balance_sheet(st, "AAPL", t)}
    assert bs["current_ratio"] == pytest.approx(1.11, abs=0.005)  # matches the x100 column
    # Close 2016-06-30 in the corpus: 23.90 (adjusted for the 2020 4:1 split; 95.60 traded).
    val = {
        f.name: f.value
        for f in fa.valuation(st, su, "AAPL", t, 23.9, price_basis=fa.CORPUS_PRICE_BASIS)
    }
    assert val["trailing_pe"] == pytest.approx(95.6 / (1.85 + 1.96 + 3.28 + 1.90), rel=1e-3)
    cap = 95.6 * 53_394e6 / 9.28
    assert val["price_to_sales"] == pytest.approx(cap / 233_715e6, rel=1e-3)


def test_a_ticker_without_statements_has_none_known(corpus: AltData) -> None:
    st = corpus.table("statements")
    assert st is not None
    assert fa.statements_at(st, "GOOGL", decision_time("2016-06-30")).empty
    with pytest.raises(LookupError, match="annual_statements_2012_2016.csv"):
        fa.balance_sheet(st, "GOOGL", decision_time("2016-06-30"))
