"""The analyze team's fundamentals analyst reads point-in-time alt data when it has some."""

from __future__ import annotations

import pytest
from conftest import SHARED_DATA, read_real_bars

from altdata.corpus import DATASETS, AltData
from swarm.analyze.analysts import fundamentals
from swarm.analyze.contracts import AnalysisConfig, TimeHorizon
from swarm.research.context import ResearchContext
from swarm.research.features import FeatureBundle

pytestmark = pytest.mark.unit


def _bundle() -> FeatureBundle:
    bars = read_real_bars("AAPL", "2016-01-01", "2016-06-30")
    return FeatureBundle("AAPL", bars.index, {"CLOSE": bars["close"].to_numpy()})


def test_fundamentals_analyst_reads_alt_data_and_abstains_without() -> None:
    if not (SHARED_DATA / DATASETS["statements"].source).is_file():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    bundle, cfg = _bundle(), AnalysisConfig()
    note = fundamentals(bundle, ResearchContext(alt=AltData(SHARED_DATA)), cfg)
    assert not note.abstained and note.time_horizon == TimeHorizon.MONTHS
    assert len(note.points) == 5 and 0 < note.confidence <= 0.8
    assert "trailing_pe" in note.evidence and "roe" in note.evidence
    assert any(
        "annual_statements_2012_2016.csv period_end 2015-09-26" in p for p in note.key_points
    )
    note = fundamentals(bundle, ResearchContext(), cfg)
    assert note.abstained and "no point-in-time fundamentals" in (note.reason or "")
