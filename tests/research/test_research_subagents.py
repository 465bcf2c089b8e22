from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import read_real_bars

from swarm.research import subagents as sa
from swarm.research.features import FeatureBundle, compute_features
from swarm.research.models import Domain, Finding
from swarm.research.news import NewsItem, load_news_csv, score_headline
from swarm.research.subagents import SUBAGENTS, ResearchContext, run_subagent, run_swarm


@pytest.fixture(scope="module")
def aapl() -> FeatureBundle:
    return compute_features("AAPL", read_real_bars("AAPL", "2018-01-01", "2020-06-10"))


def _item(day: dt.date, headline: str, ticker: str = "AAPL") -> NewsItem:
    return NewsItem(date=day, ticker=ticker, headline=headline, source="planted")


def _run(spec: str, bundle: FeatureBundle, ctx: ResearchContext) -> Finding:
    return run_subagent(spec, symbol=bundle.symbol, bundle=bundle, context=ctx)


@pytest.mark.unit
def test_fifteen_subagents_five_per_domain() -> None:
    assert len(SUBAGENTS) == 15 and len({s.id for s in SUBAGENTS}) == 15
    for d in Domain:
        assert sum(s.domain == d for s in SUBAGENTS) == 5
    assert all(s.id == f"{s.domain.value}.{s.specialization}" for s in SUBAGENTS)
    with pytest.raises(KeyError):
        sa.subagent("technical.astrology")


@pytest.mark.integration
def test_every_subagent_returns_a_finding(aapl: FeatureBundle) -> None:
    for spec in SUBAGENTS:
        f = _run(spec.id, aapl, ResearchContext())
        assert isinstance(f, Finding)
        assert (f.symbol, f.type, f.specialization, f.as_of) == (
            "AAPL",
            spec.domain,
            spec.specialization,
            aapl.as_of,
        )
        assert f.interpretation
        if f.abstained:
            assert f.reason and f.signal == 0 and f.confidence == 0
    with pytest.raises(ValueError):
        run_subagent("technical.trend", symbol="MSFT", bundle=aapl, context=ResearchContext())


@pytest.mark.integration
def test_fundamentals_abstain_without_provider_and_use_one_when_given(aapl) -> None:
    for spec in (s for s in SUBAGENTS if s.domain == Domain.FUNDAMENTAL):
        f = _run(spec.id, aapl, ResearchContext())
        assert f.abstained and "no fundamentals source" in f.reason

    calls: list[str] = []

    def provider(symbol: str) -> dict:
        calls.append(symbol)
        return {
            "trailingPE": 30.0,
            "forwardPE": 25.0,
            "priceToBook": 20.0,
            "debtToEquity": 150.0,
            "currentRatio": 1.5,
            "freeCashflow": 6e10,
            "marketCap": 1.5e12,
            "profitMargins": 0.21,
            "returnOnEquity": 0.6,
            "revenueGrowth": 0.05,
            "sector": "Technology",
            "industry": "Consumer Electronics",
            "beta": 1.2,
        }

    ctx = ResearchContext(fundamentals=provider)
    found = {
        s.specialization: _run(s.id, aapl, ctx) for s in SUBAGENTS if s.domain == Domain.FUNDAMENTAL
    }
    assert calls == ["AAPL"]  # fetched once for five subagents
    assert not any(f.abstained for f in found.values())
    assert found["valuation"].evidence["trailingPE"] == 30.0
    assert found["cash_flow"].evidence["freeCashflow"] == 6e10
    assert "Technology" in found["industry"].interpretation
    assert all(0 < f.confidence <= 0.4 for f in found.values())

    def broken(symbol: str) -> dict:
        raise ConnectionError("dns")

    f = _run("fundamental.valuation", aapl, ResearchContext(fundamentals=broken))
    assert f.abstained and "ConnectionError" in f.reason

    def future(symbol: str) -> dict:
        return {"trailingPE": 20.0, "as_of": "2024-01-02"}

    f = _run("fundamental.valuation", aapl, ResearchContext(fundamentals=future))
    assert f.abstained and "after as_of" in f.reason


@pytest.mark.integration
def test_news_never_uses_headlines_after_as_of(aapl: FeatureBundle) -> None:
    as_of = dt.date.fromisoformat(aapl.as_of)
    before = "Analysts upgrade Apple to buy after it beats estimates"
    after = "Apple downgraded to sell as it misses badly and shares plunge"
    ctx = ResearchContext(
        news_items=[
            _item(as_of - dt.timedelta(days=2), before),
            _item(as_of + dt.timedelta(days=1), after),
        ]
    )
    f = _run("sentiment.news", aapl, ctx)
    assert not f.abstained
    assert f.evidence["news_count_30d"] == 1.0
    assert f.evidence["news_compound_mean"] == score_headline(before) > 0
    assert score_headline(after) < 0
    # Headline text is untrusted: only counts and scores leave the subagent.
    assert before not in f.interpretation and "upgrade" not in f.interpretation.lower()

    only_future = ResearchContext(news_items=[_item(as_of + dt.timedelta(days=1), after)])
    f = _run("sentiment.news", aapl, only_future)
    assert f.abstained and "dated on or before" in f.reason


@pytest.mark.integration
def test_news_abstains_with_reason(aapl: FeatureBundle) -> None:
    f = _run("sentiment.news", aapl, ResearchContext())
    assert f.abstained and "no news source loaded" in f.reason
    as_of = dt.date.fromisoformat(aapl.as_of)
    old = as_of - dt.timedelta(days=60)
    f = _run("sentiment.news", aapl, ResearchContext(news_items=[_item(old, "Apple rallies")]))
    assert f.abstained and old.isoformat() in f.reason and "60 days earlier" in f.reason
    other = ResearchContext(news_items=[_item(as_of, "Microsoft rallies", ticker="MSFT")])
    assert _run("sentiment.news", aapl, other).abstained


@pytest.mark.integration
def test_real_headline_corpus(shared_data: Path, aapl: FeatureBundle) -> None:
    items = load_news_csv(shared_data / "news" / "benzinga_analyst_ratings_subset.csv")
    mine = [i for i in items if i.ticker == "AAPL"]
    assert len(mine) == 469
    assert min(i.date for i in mine) == dt.date(2020, 3, 9)
    assert all(i.datetime_utc is None or len(i.datetime_utc) == 19 for i in mine)
    ctx = ResearchContext(news_items=items)
    news = _run("sentiment.news", aapl, ctx)
    in_window = [i for i in mine if dt.date(2020, 5, 11) <= i.date <= dt.date(2020, 6, 10)]
    assert news.evidence["news_count_30d"] == len(in_window) > 0
    analyst = _run("sentiment.analyst", aapl, ctx)
    assert not analyst.abstained and analyst.evidence["analyst_pt_raises_90d"] > 0
    # Truncated earlier: the same corpus has nothing on or before as_of.
    early = compute_features("AAPL", read_real_bars("AAPL", "2018-01-01", "2019-12-31"))
    f = _run("sentiment.news", early, ctx)
    assert f.abstained and "dated on or before 2019-12-31" in f.reason


@pytest.mark.integration
def test_analyst_rating_actions_from_headlines(aapl: FeatureBundle) -> None:
    as_of = dt.date.fromisoformat(aapl.as_of)
    ctx = ResearchContext(
        news_items=[
            _item(as_of - dt.timedelta(days=3), "Big Bank Upgrades Apple to Outperform"),
            _item(as_of - dt.timedelta(days=4), "Other Bank Lowers Apple Price Target to $300"),
            _item(as_of + dt.timedelta(days=1), "Third Bank Downgrades Apple to Sell"),
        ]
    )
    f = _run("sentiment.analyst", aapl, ctx)
    ev = f.evidence
    assert (ev["analyst_upgrades_90d"], ev["analyst_downgrades_90d"]) == (1.0, 0.0)
    assert ev["analyst_pt_cuts_90d"] == 1.0
    assert f.signal == pytest.approx((1 - 0.5) / 1.5)


@pytest.mark.integration
def test_provider_hooks_and_abstention(aapl: FeatureBundle) -> None:
    for spec in ("social", "options_flow", "insider"):
        f = _run(f"sentiment.{spec}", aapl, ResearchContext())
        assert f.abstained and f.reason.startswith("no ")

    def social(symbol: str, as_of: str) -> dict:
        return {
            "signal": 0.4,
            "confidence": 0.3,
            "value": 0.4,
            "source": "test-feed",
            "evidence": {"mentions": 120.0, "bull_share": 0.7},
            "as_of": as_of,
        }

    f = _run("sentiment.social", aapl, ResearchContext(providers={"social": social}))
    assert not f.abstained and f.signal == 0.4 and f.evidence["mentions"] == 120.0

    def leaky(symbol: str, as_of: str) -> dict:
        return {"signal": 0.9, "as_of": "2030-01-01"}

    f = _run("sentiment.insider", aapl, ResearchContext(providers={"insider": leaky}))
    assert f.abstained and "lookahead" in f.reason


@pytest.mark.integration
def test_run_swarm_records_failures_without_stopping(aapl, monkeypatch) -> None:
    def boom(bundle, context):
        raise RuntimeError("bug")

    monkeypatch.setitem(sa._BRAINS, "technical.volume", boom)
    run = run_swarm({"AAPL": aapl}, ResearchContext())
    assert len(run.findings) == 14
    assert run.failed == {"technical.volume:AAPL": "RuntimeError: bug"}
    assert run.failed_specializations(Domain.TECHNICAL) == ["volume"]


@pytest.mark.unit
def test_short_window_technical_abstains_or_degrades() -> None:
    bars = read_real_bars("AAPL", "2019-01-01", "2019-02-15")
    b = compute_features("AAPL", bars)
    trend = _run("technical.trend", b, ResearchContext())
    assert trend.abstained and "too few" in trend.reason
    mom = _run("technical.momentum", b, ResearchContext())
    assert mom.abstained and "MACD_12_26_9" in mom.reason
    assert not _run("technical.volatility", b, ResearchContext()).abstained


@pytest.mark.unit
def test_yfinance_fundamentals_provider_reads_its_disk_cache_offline(aapl, tmp_path) -> None:
    import json as _json

    from swarm.research.fundamental import yfinance_fundamentals

    folder = tmp_path / "fundamentals"
    folder.mkdir()
    snap = {"trailingPE": 15.0, "priceToBook": 2.0, "as_of": aapl.as_of, "sector": "Tech"}
    (folder / "AAPL.json").write_text(_json.dumps(snap))
    provider = yfinance_fundamentals(tmp_path, offline=True)
    assert provider("AAPL") == snap and provider("MSFT") is None  # offline: never fetched
    f = _run("fundamental.valuation", aapl, ResearchContext(fundamentals=provider))
    assert not f.abstained and f.evidence == {"trailingPE": 15.0, "priceToBook": 2.0}
    later = {**snap, "as_of": "2099-01-01"}  # a current snapshot for a past window
    (folder / "AAPL.json").write_text(_json.dumps(later))
    f = _run("fundamental.valuation", aapl, ResearchContext(fundamentals=provider))
    assert f.abstained and "lookahead" in f.reason


@pytest.mark.unit
def test_yfinance_fundamentals_fetch_failure_is_quiet_and_cached_under_ours(
    aapl, tmp_path, monkeypatch, capsys, caplog
) -> None:
    """Online but no network: yfinance's own warnings never reach the terminal; the provider
    raises (the subagent turns it into a gap) and yfinance's caches stay in our cache dir."""
    import logging

    import yfinance as yf

    from swarm.research.fundamental import yfinance_fundamentals

    where: dict = {}

    class FailingTicker:
        def __init__(self, symbol: str) -> None:
            self.symbol = symbol

        @property
        def info(self):
            logging.getLogger("yfinance").warning(
                "Cookie/crumb fetch failed (DNSError), continuing without crumb"
            )
            raise ConnectionError("DNSError: could not resolve query1.finance.yahoo.com")

    monkeypatch.setattr(yf, "Ticker", FailingTicker)
    monkeypatch.setattr(yf, "set_tz_cache_location", lambda p: where.setdefault("cache", p))
    provider = yfinance_fundamentals(tmp_path, offline=False)
    with pytest.raises(ConnectionError):
        provider("AAPL")
    assert where["cache"] == str(tmp_path / "yfinance")
    captured = capsys.readouterr()
    assert "crumb" not in captured.err and "crumb" not in captured.out
    assert not [r for r in caplog.records if r.name.startswith("yfinance")]
    f = _run("fundamental.valuation", aapl, ResearchContext(fundamentals=provider))
    assert f.abstained and "ConnectionError" in f.reason
