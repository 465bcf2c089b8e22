"""The analyze team's fundamentals analyst reads point-in-time alt data when it has some."""

from __future__ import annotations

import shutil

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


def test_the_desk_never_sees_an_alt_row_known_one_session_after_its_date(tmp_path) -> None:
    """``swarm.analyze``'s desk on alt data (the CLI's default since the corpus layout is found
    above --data-dir): a huge earnings surprise reported the session after the decision date
    changes no analyst note; reported on the date before the open, the sentiment analyst reads it."""
    from swarm.analyze.pipeline import decide

    corpus = SHARED_DATA / DATASETS["surprises"].source
    if not corpus.is_file():
        pytest.skip(f"real corpus not found at {SHARED_DATA}")
    bars = read_real_bars("AAPL", "2014-01-01", "2015-06-30")
    rows = corpus.read_text().splitlines()
    header, aapl = rows[0], [r for r in rows[1:] if ",AAPL," in r and r[:10] <= "2015-06-01"]

    def notes(planted: str | None) -> dict:
        root = tmp_path / "alt"  # one path: the notes' reasons name it
        shutil.rmtree(root, ignore_errors=True)
        (root / "analyst").mkdir(parents=True)
        (root / "options").mkdir()
        extra = [f"{planted},AAPL,15-Jun,1.0,9.0,8.0,pre"] if planted else []
        (root / DATASETS["surprises"].source).write_text("\n".join([header, *aapl, *extra]) + "\n")
        d = decide("AAPL", "2015-06-01", bars, AnalysisConfig(), alt=AltData(root))
        return {n.role: (n.stance, n.confidence, n.key_points) for n in d.analysts}

    without = notes(None)
    assert notes("2015-06-02") == without  # known at the next session's open: invisible
    assert notes("2015-06-01")["sentiment"] != without["sentiment"]  # at this date's open: read
