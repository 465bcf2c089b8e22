"""Research -> strategy (issue 26 item 6): an in-sample study of the edge an alt-data family
trades proposes that family to a run that named none, and the strategy node gives it a slot.

On the calibration's synthetic earnings universes (reports in the corpus layout): the drift
study supports earnings_drift where the drift is planted and not on its null (the same prices
and reports, no drift), and a develop run without ``--families`` on the planted one backtests
an earnings_drift variant the research proposed."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from altdata.corpus import AltData
from strategies.family_api import ProposalContext
from swarm.calibrate import SCENARIOS, universe_seed
from swarm.calibration.synthetic_universe import UniverseSpec, write_universe
from swarm.families import registry
from swarm.nodes.strategy_research import research_proposals
from swarm.research.alt_studies import alt_family_studies, drift_study

PLANTED, NULL = "planted-earnings-drift", "null-earnings-drift"


def _universe(tmp_path: Path, name: str, index: int = 1) -> dict:
    sc = SCENARIOS[name]
    spec = UniverseSpec(
        kind=sc.universe_kind,
        seed=universe_seed(0, name, index),
        n_symbols=sc.n_symbols or 3,
        start=date(2012, 1, 2),
        years=8.0,
        drift_annual=sc.drift_annual,
    )
    return write_universe(spec, tmp_path / name) | {"dir": tmp_path / name}


def _insample(meta: dict) -> tuple[dict[str, pd.Series], date]:
    closes = {
        s: pd.read_csv(meta["dir"] / f"{s}.csv", parse_dates=["date"], index_col="date")["close"]
        for s in meta["symbols"]
    }
    index = next(iter(closes.values())).index
    cut = index[int(len(index) * 0.8) - 1]
    return {s: c.loc[:cut] for s, c in closes.items()}, cut.date()


@pytest.mark.unit
@pytest.mark.parametrize(("name", "supported"), [(PLANTED, True), (NULL, False)])
def test_the_drift_study_supports_the_family_where_the_drift_is_planted_only(
    tmp_path, name, supported
):
    meta = _universe(tmp_path, name)
    closes, through = _insample(meta)
    (study,) = alt_family_studies(AltData(Path(meta["alt_data"])), closes, through=through)
    assert study.family == "earnings_drift" and study.supported is supported, study.line
    assert study.n >= 60 and (study.t >= 2.0) is supported


@pytest.mark.unit
def test_the_study_reads_no_report_after_its_cut_and_no_bar_after_the_closes(tmp_path):
    meta = _universe(tmp_path, PLANTED)
    closes, through = _insample(meta)
    table = AltData(Path(meta["alt_data"])).table("surprises")
    whole = drift_study(table, closes, through=through)
    # Reports known after the cut change nothing: the study cuts by when they were known.
    later = drift_study(table, closes, through=date(2026, 1, 2))
    assert later == whole
    # Fewer bars, fewer reports with a whole holding window: measured on what is there.
    early = drift_study(table, {s: c.iloc[:400] for s, c in closes.items()}, through=through)
    assert early.n < whole.n


def _ctx(families: list[str], alt: Path | None, tickers: list[str]) -> SimpleNamespace:
    warned: list[str] = []
    config = SimpleNamespace(families=families, alt_data=alt, data_dir=None, tickers=tickers)
    return SimpleNamespace(
        config=config, progress=SimpleNamespace(warn=warned.append), warned=warned
    )


def _pctx(n_symbols: int = 3) -> ProposalContext:
    import random

    return ProposalContext(
        route="INITIAL", rng=random.Random(0), seen=set(), families=[], n_symbols=n_symbols
    )


@pytest.mark.unit
def test_a_supported_family_gets_one_slot_only_when_the_run_named_none(tmp_path):
    meta = _universe(tmp_path, PLANTED)
    alt = Path(meta["alt_data"])
    reg = registry()
    props = research_proposals(reg, _ctx([], alt, meta["symbols"]), _pctx(), 5, ["earnings_drift"])
    assert len(props) == 1 and props[0].spec.family.value == "earnings_drift"
    assert props[0].why.startswith("research: ")
    named = _ctx(["momentum"], alt, meta["symbols"])
    assert research_proposals(reg, named, _pctx(), 5, ["earnings_drift"]) == []
    assert research_proposals(reg, _ctx([], alt, []), _pctx(), 1, ["earnings_drift"]) == []
    # Its data missing: skipped with a warning, never a failed run.
    ctx = _ctx([], tmp_path / "nowhere", [])
    (tmp_path / "nowhere").mkdir()
    assert research_proposals(reg, ctx, _pctx(), 5, ["earnings_drift"]) == []
    assert ctx.warned and "earnings_drift" in ctx.warned[0]


@pytest.mark.e2e
@pytest.mark.slow
def test_a_run_naming_no_family_backtests_the_family_its_research_supports(tmp_path):
    from swarm.develop import build_parser, config_from_args
    from swarm.run import execute, prepare

    meta = _universe(tmp_path, PLANTED)
    argv = [
        "--directive",
        "alpha",
        "--tickers",
        ",".join(meta["symbols"]),
        "--data-dir",
        str(meta["dir"]),
        "--alt-data",
        meta["alt_data"],
        "--start",
        meta["start"],
        "--end",
        meta["end"],
        "--variants",
        "3",
        "--folds",
        "2",
        "--max-iterations",
        "1",
        "--workers",
        "1",
        "--offline",
        "--memory-dir",
        "off",
        "--out",
        str(tmp_path / "runs"),
    ]
    config, criteria = config_from_args(build_parser().parse_args(argv))
    assert config.families == []
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    run = prepared.run.root
    synthesis = json.loads((run / "research" / "synthesis.json").read_text())
    assert synthesis["proposed_families"] == ["earnings_drift"]
    assert "supports earnings_drift" in (run / "research" / "research.md").read_text()
    variants = json.loads((run / "variants.json").read_text())
    families = [v["spec"]["family"] for v in variants.values()]
    assert families.count("earnings_drift") == 1 and len(families) == 3
