"""``--fundamentals corpus|edgar|yfinance``: the fundamental subagents read an online source's
statements exactly as the corpus file, and abstain with the source's reason when it fails."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pandas as pd
import pytest

from altdata.corpus import AltData
from altdata.edgar import SOURCE, USER_AGENT_ENV, EdgarClient, EdgarSettings
from altdata.statements import StatementsFeed
from swarm.cli_args import check_fundamentals
from swarm.errors import UserInputError
from swarm.research.context import ResearchContext
from swarm.research.features import FeatureBundle
from swarm.research.fundamental import run_fundamental
from swarm.research.inputs import statements_source

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "altdata" / "fixtures" / "edgar"


def _bundle(symbol: str = "AAPL", end: str = "2016-06-30") -> FeatureBundle:
    index = pd.bdate_range("2016-01-04", end)
    return FeatureBundle(symbol, index, {"CLOSE": np.full(len(index), 95.6)})


def _sec(request: httpx.Request) -> httpx.Response:
    name = Path(request.url.path).name
    path = FIXTURES / name
    return httpx.Response(200, content=path.read_bytes()) if path.is_file() else httpx.Response(404)


def _edgar_context(tmp_path: Path) -> ResearchContext:
    settings = EdgarSettings(user_agent="Lab tests lab@example.com", cache_dir=tmp_path)
    client = EdgarClient(settings, transport=httpx.MockTransport(_sec), sleep=lambda s: None)
    feed = StatementsFeed(source=SOURCE, rule="filed", fetch=client.statements)
    return ResearchContext(fundamentals_alt=AltData(None, statements=feed))


def test_the_subagents_read_edgar_statements_as_they_read_the_corpus(tmp_path) -> None:
    ctx = _edgar_context(tmp_path)
    for spec in ("financial_metrics", "balance_sheet", "cash_flow"):
        f = run_fundamental(spec, _bundle(), ctx)
        assert not f.abstained, f.reason
        assert f"{SOURCE} period_end 2015-09-26" in f.interpretation
        assert "2016-09-24" not in f.interpretation  # FY2016 is filed after as_of
    fm = run_fundamental("financial_metrics", _bundle(), ctx)
    assert fm.evidence["net_margin"] == pytest.approx(53_000 / 233_715)  # the 10-K/A's value
    early = run_fundamental("financial_metrics", _bundle(end="2016-02-11"), ctx)
    assert early.evidence["net_margin"] == pytest.approx(53_394 / 233_715)  # before it


def test_a_symbol_edgar_does_not_know_abstains_with_edgars_reason(tmp_path) -> None:
    f = run_fundamental("financial_metrics", _bundle("ZZZZ"), _edgar_context(tmp_path))
    assert f.abstained and f.confidence == 0
    assert (
        f.reason
        == f"{SOURCE} for ZZZZ: ZZZZ: not in SEC's ticker map (not an SEC registrant, or renamed)"
    )


def test_offline_without_a_cache_the_lab_keeps_working_and_says_why(tmp_path) -> None:
    config = SimpleNamespace(fundamentals="edgar", cache_dir=tmp_path)
    alt = statements_source(SimpleNamespace(config=config), None, offline=True)
    assert alt is not None and alt.statements is not None
    f = run_fundamental("balance_sheet", _bundle(), ResearchContext(fundamentals_alt=alt))
    assert f.abstained and "offline and no cached EDGAR ticker map" in (f.reason or "")
    config = SimpleNamespace(fundamentals="yfinance", cache_dir=tmp_path)
    alt = statements_source(SimpleNamespace(config=config), None, offline=True)
    f = run_fundamental("cash_flow", _bundle(), ResearchContext(fundamentals_alt=alt))
    assert f.abstained and "yfinance statements need the network" in (f.reason or "")
    corpus = SimpleNamespace(config=SimpleNamespace(fundamentals="corpus"))
    assert statements_source(corpus, None, offline=True) is None  # the subagents read --alt-data


def test_the_flag_is_checked_at_the_boundary(monkeypatch) -> None:
    monkeypatch.delenv(USER_AGENT_ENV, raising=False)
    args = argparse.Namespace(fundamentals="edgar", offline=False)
    with pytest.raises(UserInputError, match=f"--fundamentals edgar: .*{USER_AGENT_ENV}="):
        check_fundamentals(args)
    assert check_fundamentals(argparse.Namespace(fundamentals="edgar", offline=True)) == "edgar"
    monkeypatch.setenv(USER_AGENT_ENV, "Jane Doe jane@example.com")
    assert check_fundamentals(args) == "edgar"
    with pytest.raises(UserInputError, match="corpus, edgar, yfinance"):
        check_fundamentals(argparse.Namespace(fundamentals="bloomberg", offline=False))
