"""The sentiment subagents on point-in-time alternative data (``context.alt``): every one with
data speaks, citing the rows it used; a missing file or an empty window abstains saying why."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import SHARED_DATA, read_real_bars

from altdata.corpus import DATASETS, AltData
from swarm.research.context import ResearchContext
from swarm.research.features import FeatureBundle, compute_features
from swarm.research.models import Finding
from swarm.research.subagents import run_subagent

pytestmark = pytest.mark.unit

AS_OF = "2015-06-30"


def _bundle(symbol: str) -> FeatureBundle:
    return compute_features(symbol, read_real_bars(symbol, "2014-06-01", AS_OF))


@pytest.fixture(scope="module")
def real_alt() -> AltData:
    if not (SHARED_DATA / "social").is_dir():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return AltData(SHARED_DATA)


@pytest.fixture(scope="module")
def aapl() -> FeatureBundle:
    if not SHARED_DATA.exists():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return _bundle("AAPL")


@pytest.fixture(scope="module")
def nvda() -> FeatureBundle:
    if not SHARED_DATA.exists():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return _bundle("NVDA")


def _run(spec: str, bundle: FeatureBundle, ctx: ResearchContext) -> Finding:
    return run_subagent(f"sentiment.{spec}", symbol=bundle.symbol, bundle=bundle, context=ctx)


def _cited_days(f: Finding, source: str) -> list[str]:
    """The dates the interpretation cites for ``source``."""
    m = re.search(re.escape(source) + r": \d+ rows dated ([0-9, -]+)", f.interpretation)
    assert m, f.interpretation
    return re.findall(r"\d{4}-\d{2}-\d{2}", m.group(1))


@pytest.mark.parametrize(
    ("spec", "symbol", "sources"),
    [
        # AAPL has no Benzinga headlines or rating actions before 2020: NVDA for those.
        ("news", "NVDA", [DATASETS["headlines"].source]),
        ("analyst", "NVDA", [DATASETS["ratings"].source, DATASETS["surprises"].source]),
        ("analyst", "AAPL", [DATASETS["surprises"].source]),
        ("social", "AAPL", [DATASETS["tweets"].source]),
        ("options_flow", "AAPL", [DATASETS["put_call"].source]),
    ],
)
def test_each_subagent_speaks_where_data_exists(spec, symbol, sources, real_alt, request):
    bundle = request.getfixturevalue(symbol.lower())
    f = _run(spec, bundle, ResearchContext(alt=real_alt))
    print(f"\n{spec} {symbol} {AS_OF}: signal {f.signal:+.3f} confidence {f.confidence:.3f}")
    assert not f.abstained, f.reason
    assert f.confidence > 0 and f.evidence and f.as_of == AS_OF
    for source in sources:
        days = _cited_days(f, source)
        assert days and max(days) <= AS_OF


def test_options_flow_is_a_market_level_finding(aapl, nvda, real_alt):
    ctx = ResearchContext(alt=real_alt)
    a, n = _run("options_flow", aapl, ctx), _run("options_flow", nvda, ctx)
    assert a.interpretation.startswith("MARKET-level finding")
    assert "market-wide" in a.indicator
    assert (a.signal, a.confidence, a.evidence) == (n.signal, n.confidence, n.evidence)
    assert a.confidence <= 0.3


def test_a_ticker_without_rows_in_the_window_abstains_saying_so(aapl, real_alt):
    f = _run("news", aapl, ResearchContext(alt=real_alt))
    assert f.abstained
    assert f.reason.startswith(f"no AAPL headlines known by {AS_OF}")


def test_missing_files_abstain_naming_the_folder(tmp_path, aapl):
    ctx = ResearchContext(alt=AltData(tmp_path))
    for spec, file in [
        ("news", "benzinga_headlines"),
        ("analyst", "benzinga_rating_actions"),
        ("social", "stocknet_tweets"),
        ("options_flow", "cboe_putcall"),
    ]:
        f = _run(spec, aapl, ctx)
        assert f.abstained and f"{tmp_path}" in f.reason and file in f.reason, f.reason


def test_rows_known_after_the_close_are_invisible(tmp_path, aapl):
    path = tmp_path / DATASETS["tweets"].source
    path.parent.mkdir(parents=True)
    pd.DataFrame(
        {
            "date_utc": ["2015-06-30", "2015-06-30"],
            "created_at_utc": ["2015-06-30 19:59:00", "2015-06-30 20:01:00"],  # close: 20:00 UTC
            "ticker": "AAPL",
            "tweet_id": [1, 2],
            "user_id": [1, 2],
            "followers": [10, 10],
            "text": ["$AAPL steady", "$AAPL crash, terrible, sell everything"],
        }
    ).to_csv(path, index=False)
    f = _run("social", aapl, ResearchContext(alt=AltData(tmp_path)))
    assert not f.abstained and f.evidence["social_tweets_7d"] == 1
    assert f.signal == 0.0  # only the neutral tweet


def test_insider_abstains_offline_naming_edgar(aapl, real_alt):
    for ctx in (ResearchContext(alt=real_alt), ResearchContext()):
        f = _run("insider", aapl, ctx)
        assert f.abstained and f.reason.startswith("no ")
        assert "SEC EDGAR" in f.reason and "Form 4" in f.reason and "offline" in f.reason


def test_without_alt_data_the_hooks_still_abstain(aapl):
    for spec in ("social", "options_flow"):
        f = _run(spec, aapl, ResearchContext())
        assert f.abstained and f.reason.startswith("no ")


def test_alt_data_without_news_files_falls_back_to_the_run_headlines(tmp_path, aapl):
    from swarm.research.news import NewsItem

    item = NewsItem(
        date=pd.Timestamp(AS_OF).date(),
        ticker="AAPL",
        source="planted",
        headline="Apple beats estimates",
    )
    f = _run("news", aapl, ResearchContext(alt=AltData(tmp_path), news_items=[item]))
    assert not f.abstained and f.evidence["news_count_30d"] == 1
