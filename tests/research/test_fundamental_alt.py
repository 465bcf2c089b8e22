"""The five fundamental subagents on point-in-time alternative data (``context.alt``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_DATA, read_real_bars

from altdata.corpus import DATASETS, AltData
from swarm.research.features import FeatureBundle
from swarm.research.fundamental import MAX_CONFIDENCE_PIT, PIT_FACTS, run_fundamental
from swarm.research.subagents import ResearchContext

pytestmark = pytest.mark.unit

STATEMENTS = DATASETS["statements"].source
SURPRISES = DATASETS["surprises"].source


def _bundle(symbol: str, end: str = "2016-06-30") -> FeatureBundle:
    bars = read_real_bars(symbol, "2016-01-01", end)
    return FeatureBundle(symbol, bars.index, {"CLOSE": bars["close"].to_numpy()})


@pytest.fixture(scope="module")
def ctx() -> ResearchContext:
    if not (SHARED_DATA / STATEMENTS).is_file():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    return ResearchContext(alt=AltData(SHARED_DATA))


def test_every_fundamental_subagent_speaks_for_aapl_and_cites_its_rows(ctx) -> None:
    bundle = _bundle("AAPL")
    assert bundle.as_of == "2016-06-30"
    for spec, names in PIT_FACTS.items():
        f = run_fundamental(spec, bundle, ctx)
        assert not f.abstained, f.reason
        assert 0 < f.confidence <= MAX_CONFIDENCE_PIT and -1 <= f.signal <= 1
        assert set(f.evidence) <= set(names) and f.evidence
        # FY2015 (known 2015-12-28) is the latest statement; FY2016 is not known yet.
        assert f"{STATEMENTS} period_end 2015-09-26" in f.interpretation
        assert "2016-09-24" not in f.interpretation
    val = run_fundamental("valuation", bundle, ctx)
    assert f"{SURPRISES} report_date 2016-04-26" in val.interpretation
    assert "2016-07-26" not in val.interpretation  # reported after as_of
    assert val.evidence["trailing_pe"] == pytest.approx(10.63, abs=0.01)
    fm = run_fundamental("financial_metrics", bundle, ctx)
    assert f"{STATEMENTS} period_end 2014-09-27" in fm.interpretation  # growth's prior year


def test_a_ticker_without_statements_abstains_naming_the_file(ctx) -> None:
    bundle = _bundle("GOOGL")
    for spec in ("financial_metrics", "balance_sheet", "cash_flow", "industry"):
        f = run_fundamental(spec, bundle, ctx)
        assert f.abstained and f.confidence == 0
        assert "annual_statements_2012_2016.csv" in (f.reason or "")
        assert "GOOGL" in (f.reason or "")
    val = run_fundamental("valuation", bundle, ctx)  # the surprises still give a P/E
    assert not val.abstained and set(val.evidence) == {"trailing_pe"}


def test_an_alt_folder_without_the_file_abstains_with_the_missing_reason(tmp_path) -> None:
    (tmp_path / "fundamentals").mkdir()
    (tmp_path / "analyst").mkdir()
    alt = AltData(Path(tmp_path))
    f = run_fundamental("balance_sheet", _bundle("AAPL"), ResearchContext(alt=alt))
    assert f.abstained and f.reason == alt.missing("statements")
    assert "annual_statements_2012_2016.csv" in f.reason
    f = run_fundamental("valuation", _bundle("AAPL"), ResearchContext(alt=alt))
    assert f.abstained and "earnings_surprises_2012_2019.csv" in (f.reason or "")
