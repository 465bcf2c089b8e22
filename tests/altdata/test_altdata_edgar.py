"""SEC EDGAR company facts: the client (User-Agent, retries, cache) and the point-in-time table.

Fixtures are SEC's own formats, trimmed by hand: ``company_tickers.json`` (three entries) and
Apple's ``companyfacts`` (FY2014-FY2016 and one quarter; real values) with one invented
restatement: FY2015 net income re-filed in a 10-K/A on 2016-02-12 (53,394M -> 53,000M)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pandas as pd
import pytest

from altdata import fundamentals as fa
from altdata.corpus import AltData
from altdata.edgar import (
    USER_AGENT_ENV,
    EdgarClient,
    EdgarError,
    EdgarSettings,
    NotFound,
    RateLimiter,
    UserAgentMissing,
    cik_map,
)
from altdata.edgar_facts import statements_from_companyfacts
from altdata.errors import SourceOffline
from altdata.pit import KNOWN_AT
from altdata.sessions import decision_time, session_close
from altdata.statements import StatementsFeed

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures" / "edgar"
UA = "Strategy Lab tests lab@example.com"
FACTS_PATH = "/api/xbrl/companyfacts/CIK0000320193.json"


def _body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def _facts() -> dict:
    return json.loads(_body("CIK0000320193.json"))


class Sec:
    """A fake SEC: serves the fixtures, optionally failing first with given statuses."""

    def __init__(self, fail_first: tuple[int, ...] = ()):
        self.requests: list[httpx.Request] = []
        self.fail = list(fail_first)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.fail:
            return httpx.Response(self.fail.pop(0), headers={"Retry-After": "2"})
        if request.url.path == "/files/company_tickers.json":
            return httpx.Response(200, content=_body("company_tickers.json"))
        if request.url.path == FACTS_PATH:
            return httpx.Response(200, content=_body("CIK0000320193.json"))
        return httpx.Response(404)


def _client(tmp_path: Path, sec: Sec, sleeps: list[float] | None = None, **kw) -> EdgarClient:
    settings = EdgarSettings(user_agent=UA, cache_dir=tmp_path, **kw)
    sleep = sleeps.append if sleeps is not None else lambda s: None
    return EdgarClient(settings, transport=httpx.MockTransport(sec), sleep=sleep)


# ---------------------------------------------------------------------------- the client


def test_the_cik_map_reads_secs_numbered_entries_and_dash_spelt_classes(tmp_path) -> None:
    assert cik_map(json.loads(_body("company_tickers.json")))["AAPL"] == 320193
    client = _client(tmp_path, Sec())
    assert client.cik("aapl") == 320193
    assert client.cik("BRK.B") == 1067983  # SEC spells share classes with a dash
    with pytest.raises(NotFound, match="ZZZZ: not in SEC's ticker map"):
        client.cik("ZZZZ")


def test_every_request_declares_the_user_agent(tmp_path) -> None:
    sec = Sec()
    _client(tmp_path, sec).company_facts("AAPL")
    assert [r.headers["User-Agent"] for r in sec.requests] == [UA, UA]


def test_a_missing_user_agent_is_refused_before_any_request_and_names_the_setting(
    tmp_path,
) -> None:
    for ua in ("", "   ", "just a name"):
        with pytest.raises(UserAgentMissing, match=USER_AGENT_ENV):
            EdgarClient(EdgarSettings(user_agent=ua, cache_dir=tmp_path))
    with pytest.raises(UserAgentMissing, match="--offline"):
        EdgarClient(EdgarSettings.from_env({}, cache_dir=tmp_path))
    assert EdgarSettings.from_env({USER_AGENT_ENV: UA}).user_agent == UA
    EdgarClient(EdgarSettings(cache_dir=tmp_path, offline=True))  # the cache needs no agent


def test_throttling_429_is_retried_after_the_servers_wait_then_succeeds(tmp_path) -> None:
    sec, sleeps = Sec(fail_first=(429, 503)), []
    facts = _client(tmp_path, sec, sleeps, backoff_seconds=0.5).company_facts("AAPL")
    assert facts["entityName"] == "Apple Inc."
    assert len(sec.requests) == 4  # 429, 503, then the map and the facts
    assert sleeps.count(2.0) == 2  # Retry-After honoured on both


def test_retries_run_out_with_a_typed_error_and_a_404_is_not_found(tmp_path) -> None:
    sec = Sec(fail_first=(500,) * 3)
    with pytest.raises(EdgarError, match="HTTP 500 after 3 tries"):
        _client(tmp_path, sec, retries=2).cik("AAPL")
    assert len(sec.requests) == 3

    def gone(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("company_tickers.json"):
            return httpx.Response(200, content=_body("company_tickers.json"))
        return httpx.Response(404)

    client = EdgarClient(
        EdgarSettings(user_agent=UA, cache_dir=tmp_path / "b"), transport=httpx.MockTransport(gone)
    )
    with pytest.raises(NotFound, match="404"):
        client.company_facts("MSFT")


def test_a_cached_response_is_used_without_a_second_request(tmp_path) -> None:
    sec = Sec()
    first = _client(tmp_path, sec).company_facts("AAPL")
    assert len(sec.requests) == 2
    again = _client(tmp_path, sec).company_facts("AAPL")  # a new client, same cache
    assert again == first and len(sec.requests) == 2
    assert (tmp_path / "edgar" / "companyfacts" / "CIK0000320193.json").is_file()
    # Offline, the cache is all there is; a miss says how to fill it.
    offline = EdgarClient(EdgarSettings(cache_dir=tmp_path, offline=True))
    assert offline.company_facts("AAPL") == first
    with pytest.raises(SourceOffline, match="no cached EDGAR company facts of MSFT"):
        offline.company_facts("MSFT")


def test_a_stale_cache_is_refetched_online(tmp_path) -> None:
    sec = Sec()
    _client(tmp_path, sec).company_facts("AAPL")
    _client(tmp_path, sec, max_age_hours=0).company_facts("AAPL")
    assert len(sec.requests) == 4


def test_the_rate_limiter_spaces_requests_under_secs_ten_per_second() -> None:
    now, sleeps = [0.0], []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    limiter = RateLimiter(8.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(3):
        limiter.wait()
    assert sleeps == pytest.approx([0.125, 0.125])
    with pytest.raises(ValueError):
        EdgarSettings(user_agent=UA, max_requests_per_second=11)


# ---------------------------------------------------------------------------- point in time


def _statements_table():
    feed = StatementsFeed(
        source="sec-edgar companyfacts",
        rule="filed",
        fetch=lambda t: statements_from_companyfacts(_facts(), t),
    )
    feed.want(["AAPL"])
    return AltData(None, statements=feed)


def test_known_at_is_after_the_filing_dates_close_never_the_period_end() -> None:
    rows = statements_from_companyfacts(_facts(), "AAPL")
    for known, filed, end in zip(rows[KNOWN_AT], rows["filed"], rows["period_end"], strict=True):
        assert known > session_close(pd.Timestamp(filed))  # after the filing day's close
        assert known > pd.Timestamp(end, tz="UTC") + pd.Timedelta(days=20)
    fy15 = rows[(rows["period_end"] == "2015-09-26")].iloc[0]
    assert fy15["filed"] == "2015-10-28"
    assert fy15[KNOWN_AT] == pd.Timestamp("2015-10-28 20:30", tz="UTC")  # 16:00 NY + 30 min


def test_a_restatement_shows_the_first_value_until_its_filing_is_known() -> None:
    alt = _statements_table()
    table = alt.table("statements")
    assert table is not None and table.source == "sec-edgar companyfacts"
    before = fa.statements_at(table, "AAPL", decision_time("2016-02-11")).iloc[-1]
    on_day = fa.statements_at(table, "AAPL", decision_time("2016-02-12")).iloc[-1]
    after = fa.statements_at(table, "AAPL", decision_time("2016-02-16")).iloc[-1]
    assert before["period_end"] == on_day["period_end"] == after["period_end"] == "2015-09-26"
    assert before["net_income"] == on_day["net_income"] == 53_394_000_000  # known after close
    assert after["net_income"] == 53_000_000_000 and after["form"] == "10-K/A"
    # One row per period for the facts: growth compares FY2015 with FY2014, not with itself.
    growth = {
        f.name: f.value for f in fa.financial_metrics(table, "AAPL", decision_time("2016-03-01"))
    }
    assert growth["revenue_growth"] == pytest.approx(233_715 / 182_795 - 1)
    assert growth["net_margin"] == pytest.approx(53_000 / 233_715)


def test_annual_and_quarterly_periods_come_from_the_facts_own_dates() -> None:
    rows = statements_from_companyfacts(_facts(), "AAPL")
    annual = rows[rows["period"] == "annual"]
    quarterly = rows[rows["period"] == "quarterly"]
    assert sorted(set(annual["period_end"])) == ["2014-09-27", "2015-09-26", "2016-09-24"]
    # The 9-month year-to-date revenue of the Q3 10-Q is no period; Q1 FY2016 is.
    assert list(quarterly["period_end"]) == ["2015-12-26"]
    q1 = quarterly.iloc[0]
    assert q1["total_revenue"] == 75_872_000_000 and q1["total_assets"] == 293_284_000_000
    fy15 = annual[annual["period_end"] == "2015-09-26"].iloc[0]
    assert fy15["capital_expenditures"] == -11_247_000_000  # the corpus's sign: an outflow
    assert fy15["earnings_per_share"] == 9.28
    # Revenue is SalesRevenueNet until the FY2016 10-K files it as Revenues, same value: no
    # new version; FY2014 liabilities are derived (assets - equity) as no Liabilities was filed.
    assert len(annual[annual["period_end"] == "2015-09-26"]) == 2  # original and the 10-K/A
    fy14 = annual[annual["period_end"] == "2014-09-27"].iloc[0]
    assert fy14["total_liabilities"] == 231_839_000_000 - 111_547_000_000
    alt = _statements_table()
    assert alt.table("statements_quarterly").frame["period"].eq("quarterly").all()


def test_a_fetch_failure_is_the_tickers_gap_not_a_crash(tmp_path) -> None:
    client = EdgarClient(EdgarSettings(cache_dir=tmp_path, offline=True))
    feed = StatementsFeed(source="sec-edgar companyfacts", rule="filed", fetch=client.statements)
    feed.want(["AAPL"])
    alt = AltData(None, statements=feed)
    assert alt.table("statements") is None
    assert "offline and no cached EDGAR ticker map" in feed.gaps["AAPL"]
    assert alt.missing("statements").startswith("AAPL: offline")


def test_the_corpus_has_no_quarterly_statements_and_says_which_flag_gives_them() -> None:
    alt = AltData(None)
    assert alt.table("statements_quarterly") is None
    assert "--fundamentals edgar" in alt.missing("statements_quarterly")
