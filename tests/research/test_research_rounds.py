"""Research rounds that change what they study (issue 12, item 4).

A RESEARCH round after a failure studies something new, chosen from the failure's hints;
a round that would repeat an earlier one exactly is skipped with a reason; a universe
expansion needs the flag; and no study ever reads a holdout bar.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import DAILY_DIR

from gate.contracts import FailureAnalysis, FailureType, Hint
from swarm.agents.strategy_dev import preferred_order, propose
from swarm.edges import LEADER, SUBAGENT
from swarm.memo import RunMemo
from swarm.nodes import research as nodes
from swarm.research import round_study
from swarm.research.models import DataBrief, Domain, FactSheet, Finding, ResearchSynthesis
from swarm.research.rounds import (
    StudyKind,
    StudyRecord,
    horizon_candidates,
    plan_round,
    related_symbols,
    signature,
)
from swarm.research.synthesis import lead, steer_families, universe_ranking

ETFS = ["SPY", "QQQ", "IWM", "DIA"]
WINDOW = "2012-01-03..2016-12-30"


def _failure(*hints: Hint, kind: FailureType = FailureType.RESEARCH_GAP) -> FailureAnalysis:
    return FailureAnalysis(failure_type=kind, root_cause="test", confidence=0.6, hints=list(hints))


def _baseline(symbols=ETFS) -> StudyRecord:
    return plan_round(
        research_round=1,
        failure=None,
        done=[],
        symbols=symbols,
        window=WINDOW,
        current_lookback=None,
    )


def _plan(done, *hints, symbols=ETFS, **kw) -> StudyRecord:
    return plan_round(
        research_round=len(done) + 1,
        failure=_failure(*hints),
        done=done,
        symbols=symbols,
        window=WINDOW,
        current_lookback=kw.pop("current_lookback", 50),
        **kw,
    )


# ---------------------------------------------------------------------------- the planner


@pytest.mark.unit
@pytest.mark.parametrize(
    ("hint", "kind"),
    [
        (Hint.COST_DRAG, StudyKind.HORIZONS),
        (Hint.TOO_FEW_TRADES, StudyKind.HORIZONS),
        (Hint.REGIME_MISMATCH, StudyKind.SUBPERIODS),
        (Hint.MARKET_EXPOSURE, StudyKind.CROSS_SECTION),
        (Hint.LOW_RESEARCH_CONFIDENCE, StudyKind.SUBPERIODS),
    ],
)
def test_the_second_round_studies_what_the_failure_points_to(hint: Hint, kind: StudyKind) -> None:
    first = _baseline()
    second = _plan([first], hint)
    assert first.kind == StudyKind.BASELINE
    assert second.kind == kind and not second.skipped
    assert second.signature != first.signature
    assert hint.value in second.why and second.hints == [hint]


@pytest.mark.unit
def test_horizons_look_the_way_the_failure_says() -> None:
    shorter = _plan([_baseline()], Hint.TOO_FEW_TRADES)
    longer = _plan([_baseline()], Hint.COST_DRAG)
    assert horizon_candidates(shorter.params, (5, 10, 20, 50, 100, 200)) == [5, 10, 20]
    assert horizon_candidates(longer.params, (5, 10, 20, 50, 100, 200)) == [100, 200]
    assert shorter.signature != longer.signature  # another direction is another study


@pytest.mark.unit
def test_each_round_studies_something_not_studied_before() -> None:
    done = [_baseline()]
    kinds = []
    for _ in range(4):
        plan = _plan(done, Hint.MARKET_EXPOSURE)
        assert not plan.skipped
        kinds.append(plan.kind)
        done.append(plan)
    assert kinds == [
        StudyKind.CROSS_SECTION,
        StudyKind.PAIRS,
        StudyKind.HORIZONS,
        StudyKind.SUBPERIODS,
    ]
    assert len({r.signature for r in done}) == len(done)


@pytest.mark.unit
def test_a_round_that_would_repeat_the_last_one_is_skipped_with_a_reason() -> None:
    done = [_baseline(["SPY"])]
    for _ in range(2):  # horizons, subperiods: all a single symbol allows
        done.append(_plan(done, Hint.NO_EDGE, symbols=["SPY"]))
    skipped = _plan(done, Hint.NO_EDGE, symbols=["SPY"])
    assert skipped.skipped
    assert skipped.signature == done[-1].signature  # it would have been the same study
    assert "would repeat round 3 (subperiods) exactly" in skipped.skip_reason
    assert "cross_section needs 3+ symbols" in skipped.skip_reason
    assert "--allow-universe-expansion" in skipped.skip_reason
    # A changed universe is new data: the same studies are new again.
    fresh = _plan(done, Hint.NO_EDGE, symbols=["SPY", "QQQ", "IWM"])
    assert not fresh.skipped


@pytest.mark.unit
def test_the_universe_study_needs_the_flag_and_related_symbols() -> None:
    done = [_baseline()]
    without = _plan(done, Hint.LOW_DSR, expansion=["XLK"], allow_expansion=False)
    assert without.kind != StudyKind.UNIVERSE
    nothing = _plan(done, Hint.LOW_DSR, expansion=[], allow_expansion=True)
    assert nothing.kind != StudyKind.UNIVERSE
    with_flag = _plan(done, Hint.LOW_DSR, expansion=["XLK"], allow_expansion=True)
    assert with_flag.kind == StudyKind.UNIVERSE and with_flag.params == {"add": ["XLK"]}


@pytest.mark.unit
def test_related_symbols_are_sector_members_then_index_etfs_in_the_folder(tmp_path) -> None:
    for name in ("AAPL", "MSFT", "NVDA", "AMD", "SPY", "IWM"):
        (tmp_path / f"{name}.csv").write_text("date,open,high,low,close,volume\n")
    sectors = {"tech": ["AAPL", "MSFT", "NVDA", "GOOGL"], "semis": ["NVDA", "AMD", "INTC"]}
    assert related_symbols(["AAPL", "MSFT"], tmp_path, sectors) == ["NVDA", "SPY", "IWM"]
    # The better-ranked symbol's sectors first: NVDA's semis bring AMD before the ETFs.
    assert related_symbols(["MSFT", "NVDA"], tmp_path, sectors, ranking=["NVDA"]) == [
        "AMD",
        "AAPL",
        "SPY",
        "IWM",
    ]
    assert related_symbols(["AAPL"], None, sectors) == []


# ---------------------------------------------------------------------------- the nodes


@dataclass
class _Config:
    data_dir: Path
    allow_universe_expansion: bool = False
    start: date = date(2012, 1, 1)
    end: date = date(2019, 12, 31)
    timeframe: str = "1d"
    prices: str = "raw"
    offline: bool = True
    preferred_families: list[str] = field(default_factory=list)
    memory_dir: Any = False


def _context(tmp_path: Path, symbols, *, allow: bool = False, data_dir: Path | None = None):
    from backtest.data import load_universe
    from backtest.splits import split_holdout
    from experiments.runfolder import RunFolder
    from swarm.progress import Progress
    from swarm.research.__main__ import ResearchRunContext

    if not DAILY_DIR.exists():
        pytest.skip(f"real corpus not found at {DAILY_DIR}")
    cfg = _Config(data_dir=data_dir or DAILY_DIR, allow_universe_expansion=allow)
    data = load_universe(symbols, start=cfg.start, end=cfg.end, source="csv", data_dir=cfg.data_dir)
    calendar = pd.DatetimeIndex(sorted(set().union(*(d.bars.index for d in data.values()))))
    split = split_holdout(calendar, holdout_frac=0.2)
    return ResearchRunContext(
        config=cfg,
        run=RunFolder.create(tmp_path / "runs", "t"),
        data=data,
        split=split,
        progress=Progress(quiet=True),
    )


def _rt(ctx) -> SimpleNamespace:
    return SimpleNamespace(context=ctx)


def _round(ctx, state: dict, failure: FailureAnalysis | None = None) -> dict:
    """One data-extractor step; the state carries over as the graph would merge it."""
    update = nodes.data_extractor({**state, "failure": failure}, _rt(ctx))
    return {
        **state,
        **{k: v for k, v in update.items() if not isinstance(v, dict) or "__reset__" not in v},
    }


@pytest.fixture(scope="module")
def etf_ctx(tmp_path_factory):
    return _context(tmp_path_factory.mktemp("etf"), ETFS)


@pytest.mark.integration
def test_the_second_round_changes_the_brief_and_the_advice(etf_ctx) -> None:
    state = _round(etf_ctx, {"research_round": 0})
    first = state["research_studies"][-1]
    state = _round(etf_ctx, state, _failure(Hint.COST_DRAG))
    second = state["research_studies"][-1]
    assert (first.kind, second.kind) == (StudyKind.BASELINE, StudyKind.HORIZONS)
    assert second.lines and second.numbers and "VR_100" in second.numbers
    assert "VR_20" not in second.numbers  # cost drag: only longer horizons than 50
    brief = state["data_brief"]
    assert brief.study == second and [r.kind for r in brief.studies] == [first.kind, second.kind]
    # The longer horizon reaches the entries: as their own parameters on evidence (|z| >= 2),
    # else as the lookback of every entry.
    horizon = {k: v for k, v in brief.suggested.model_dump().items() if v in (100, 200)}
    assert set(horizon) in (
        {"lookback"},
        {"bb_period", "rsi_period"},
        {"fast_period", "roc_period", "donchian_period"},
    )
    assert set(horizon) <= set(second.suggested_changes)
    assert "round 2 horizons study" in brief.suggested.reasoning
    md = (etf_ctx.run.root / "research" / "data_brief.md").read_text()
    assert "## This round's study" in md and "Round 2: **horizons**" in md
    assert "Added to the starting parameters" in md
    rounds = (etf_ctx.run.root / "research" / "rounds.json").read_text()
    assert '"horizons"' in rounds


@pytest.mark.integration
def test_the_new_study_changes_what_strategy_development_proposes(etf_ctx) -> None:
    state = _round(etf_ctx, {"research_round": 0})
    before = state["data_brief"]
    synthesis = lead([], before)
    state = _round(etf_ctx, state, _failure(Hint.TOO_FEW_TRADES))  # shorter horizons
    after = state["data_brief"]
    studies = round_study.apply_study(synthesis, list(state["research_studies"]))
    record = studies[-1]
    assert record.families_before != record.families_after or record.suggested_changes
    assert synthesis.study_effect and "Round 2 studied horizons" in synthesis.summary

    def proposals(families, suggested):
        specs = propose(
            route="RESEARCH",
            n=5,
            rng=random.Random(0),
            seen=set(),
            families=preferred_order([], families),
            suggested=suggested,
            best=None,
            last=[],
            failure=None,
            min_trades=30,
        )
        return [(p.spec.family.value, p.spec.trial_key()) for p in specs]

    old = proposals(record.families_before, before.suggested.model_dump())
    new = proposals(record.families_after, after.suggested.model_dump())
    assert old != new


@pytest.mark.integration
def test_a_skipped_round_runs_no_subagent_and_keeps_the_advice(tmp_path) -> None:
    from swarm.nodes.research import build_research_graph

    ctx = _context(tmp_path, ["SPY"])
    state = _round(ctx, {"research_round": 0})
    for hint in (Hint.NO_EDGE, Hint.NO_EDGE):  # horizons, then subperiods
        state = _round(ctx, state, _failure(hint))
    brief = state["data_brief"]
    assert isinstance(brief, DataBrief)  # the state holds the models, not their JSON
    synthesis = lead([], brief)
    state |= {"synthesis": synthesis, "failure": _failure(Hint.NO_EDGE), "findings": []}
    assert nodes.fan_out_subagents(state) != LEADER  # the last round was not skipped

    out = build_research_graph().invoke(state, context=ctx)
    last = out["research_studies"][-1]
    assert out["research_round"] == 4 and last.skipped
    assert "would repeat round 3 (subperiods) exactly" in last.skip_reason
    assert not out.get("findings")  # no subagent ran
    kept = out["synthesis"]
    assert isinstance(kept, ResearchSynthesis) and kept is not synthesis
    assert kept.recommended_families == synthesis.recommended_families
    assert not any("skipped" in g for g in synthesis.gaps)  # the state's synthesis is not changed
    assert any("research round 4 skipped" in g for g in kept.gaps)
    assert "Round 4 skipped: would repeat round 3" in kept.summary  # the report shows it
    assert out["data_brief"].suggested == state["data_brief"].suggested
    assert "Round 4 skipped" in (ctx.run.root / "research" / "data_brief.md").read_text()
    assert nodes.fan_out_subagents(out) == LEADER
    assert all(
        s.node == SUBAGENT
        for s in nodes.fan_out_subagents(
            {**out, "research_studies": [*out["research_studies"][:-1]], "research_round": 4}
        )
    )


@pytest.mark.integration
@pytest.mark.parametrize("allow", [False, True])
def test_expansion_adds_related_symbols_only_with_the_flag(tmp_path, allow: bool) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for name in ("AAPL", "MSFT", "NVDA", "SPY", "BTC"):
        src = DAILY_DIR / f"{name}.csv"
        if src.exists():
            shutil.copy(src, folder / f"{name}.csv")
    from backtest.benchmark import Benchmark

    ctx = _context(tmp_path, ["AAPL", "MSFT"], allow=allow, data_dir=folder)
    # What a develop run's context adds: the universe's buy & hold and the report's data.
    ctx.benchmark = Benchmark(name="buy-and-hold", held={s: d.bars for s, d in ctx.data.items()})
    ctx.memo.data_summary = {
        "symbols": {s: d.summary() for s, d in ctx.data.items()},
        "benchmark": {"name": "buy-and-hold", "symbols": ["AAPL", "MSFT"]},
    }
    state = _round(ctx, {"research_round": 0})
    state = _round(ctx, state, _failure(Hint.LOW_DSR))
    record = state["research_studies"][-1]
    if not allow:
        assert record.kind != StudyKind.UNIVERSE and ctx.symbols == ["AAPL", "MSFT"]
        assert "symbols" not in state or state["symbols"] == ["AAPL", "MSFT"]
        assert list(ctx.benchmark.held) == ["AAPL", "MSFT"]
        return
    assert record.kind == StudyKind.UNIVERSE and record.added_symbols == ["NVDA", "SPY"]
    assert ctx.symbols == state["symbols"] == ["AAPL", "MSFT", "NVDA", "SPY"]
    # The benchmark holds what the strategies may now trade; the report lists the data.
    assert list(ctx.benchmark.held) == ctx.symbols
    assert any("benchmark now holds AAPL, MSFT, NVDA, SPY" in line for line in record.lines)
    summary = ctx.memo.data_summary
    assert summary["symbols"]["NVDA"]["added_by"] == "research"
    assert summary["benchmark"]["symbols"] == ["AAPL", "MSFT", "NVDA", "SPY"]
    brief = state["data_brief"]
    assert [b.symbol for b in brief.symbols] == ctx.symbols
    assert brief.universe_added == ["NVDA", "SPY"]
    assert (
        "Universe expanded for the next round: +NVDA, SPY"
        in (ctx.run.root / "research" / "data_brief.md").read_text()
    )
    synthesis = lead([], brief)
    round_study.apply_study(synthesis, list(state["research_studies"]))
    assert synthesis.universe_added == ["NVDA", "SPY"]
    assert "Universe expanded by research: +NVDA, SPY" in synthesis.summary  # in the report
    # --resume rebuilds the context from the config's tickers: the expansion comes back.
    resumed = _context(tmp_path / "resumed", ["AAPL", "MSFT"], allow=True, data_dir=folder)
    assert round_study.restore_universe(resumed, state["symbols"]) == ["NVDA", "SPY"]
    assert resumed.symbols == ctx.symbols
    # ... and swarm.run's resume does it before any node runs (the checkpoint's symbols).
    from swarm.run import _restore_universe

    again = _context(tmp_path / "again", ["AAPL", "MSFT"], allow=True, data_dir=folder)
    again.benchmark = Benchmark(
        name="buy-and-hold", held={s: d.bars for s, d in again.data.items()}
    )
    _restore_universe(again, state["symbols"])
    assert again.symbols == ctx.symbols and list(again.benchmark.held) == ctx.symbols
    _restore_universe(again, ["AAPL"])  # nothing added: nothing to do
    assert again.symbols == ctx.symbols


def _poisoned(ctx):
    """The same context with every holdout bar replaced by garbage."""
    end = pd.Timestamp(ctx.split.insample_end)
    data = {}
    for s, loaded in ctx.data.items():
        bars = loaded.bars.copy()
        after = bars.index > end
        assert after.any()
        bars.loc[after, ["open", "high", "low", "close"]] = np.linspace(1e6, 1.0, after.sum())[
            :, None
        ]
        data[s] = dataclasses.replace(loaded, bars=bars)
    return dataclasses.replace(ctx, data=data, memo=RunMemo())


def _truncated(ctx):
    end = pd.Timestamp(ctx.split.insample_end)
    data = {s: dataclasses.replace(d, bars=d.bars.loc[:end]) for s, d in ctx.data.items()}
    return dataclasses.replace(ctx, data=data, memo=RunMemo())


@pytest.mark.integration
@pytest.mark.parametrize(
    "hints",
    [(Hint.COST_DRAG,), (Hint.MARKET_EXPOSURE,), (Hint.REGIME_MISMATCH,), (Hint.REALITY_CHECK,)],
)
def test_no_study_reads_a_holdout_bar(etf_ctx, hints) -> None:
    """Measured, not assumed: garbage in the holdout changes nothing a study reports."""
    outs = []
    for ctx in (_poisoned(etf_ctx), _truncated(etf_ctx)):
        state = _round(ctx, {"research_round": 0})
        if hints == (Hint.REALITY_CHECK,):  # cross-section done: the pairs study is next
            state = _round(ctx, state, _failure(Hint.MARKET_EXPOSURE))
        state = _round(ctx, state, _failure(*hints))
        record = state["research_studies"][-1]
        outs.append((record.kind, record.lines, record.numbers, state["data_brief"]))
    assert outs[0][0] != StudyKind.BASELINE
    assert outs[0] == outs[1]


@pytest.mark.unit
def test_study_signature_depends_on_universe_window_and_parameters() -> None:
    a = signature(StudyKind.HORIZONS, {"direction": "other"}, ["SPY", "QQQ"], WINDOW)
    assert a == signature(StudyKind.HORIZONS, {"direction": "other"}, ["QQQ", "SPY"], WINDOW)
    assert a != signature(StudyKind.HORIZONS, {"direction": "longer"}, ["SPY", "QQQ"], WINDOW)
    assert a != signature(StudyKind.HORIZONS, {"direction": "other"}, ["SPY"], WINDOW)
    assert a != signature(StudyKind.HORIZONS, {"direction": "other"}, ["SPY", "QQQ"], "x..y")


# ------------------------------------------------------- fundamental and sentiment steering


def _sheet(domain: Domain, signal: float, confidence: float) -> FactSheet:
    return FactSheet(
        domain=domain,
        key_insights=["x"],
        confidence=confidence,
        signal=signal,
        recommended_approach="x",
    )


@pytest.mark.unit
def test_views_that_agree_confirm_and_views_that_oppose_fade() -> None:
    families = ["momentum", "breakout", "mean_reversion"]
    tech = _sheet(Domain.TECHNICAL, 0.5, 0.6)
    agree, notes = steer_families(families, [tech, _sheet(Domain.FUNDAMENTAL, 0.4, 0.5)])
    assert agree[:2] == ["trend", "momentum"] and "agree" in notes[-1]
    oppose, notes = steer_families(families, [tech, _sheet(Domain.SENTIMENT, -0.4, 0.5)])
    assert oppose[:2] == ["mean_reversion", "volatility"] and "oppose" in notes[-1]
    silent = [tech, _sheet(Domain.FUNDAMENTAL, 0.0, 0.0), _sheet(Domain.SENTIMENT, 0.0, 0.0)]
    same, notes = steer_families(families, silent)
    assert same == families
    assert notes == [
        "fundamental: no view (abstained or neutral), does not steer",
        "sentiment: no view (abstained or neutral), does not steer",
    ]


@pytest.mark.unit
def test_universe_ranking_by_fundamental_and_sentiment_findings() -> None:
    def f(symbol, domain, signal, conf, abstained=False):
        return Finding(
            symbol=symbol,
            type=domain,
            specialization="x",
            indicator="x",
            interpretation="x",
            signal=signal,
            confidence=conf,
            abstained=abstained,
        )

    findings = [
        f("A", Domain.FUNDAMENTAL, -0.5, 0.8),
        f("B", Domain.SENTIMENT, 0.6, 0.5),
        f("B", Domain.TECHNICAL, -1.0, 1.0),  # technical does not rank the universe
        f("C", Domain.FUNDAMENTAL, 0.9, 0.9, abstained=True),
    ]
    ranking = universe_ranking(findings, ["C", "A", "B"])
    assert [(r.symbol, r.n_views) for r in ranking] == [("B", 1), ("A", 1), ("C", 0)]
    assert ranking[0].score == pytest.approx(0.6) and ranking[2].score == 0.0


@pytest.mark.unit
def test_study_records_come_back_from_the_checkpoint_as_models() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from swarm.state import checkpoint_allowlist

    record = _plan([_baseline()], Hint.COST_DRAG).updated(
        numbers={"VR_100": np.float64(1.2), "bad": float("inf")},
        table=[{"horizon": np.int64(100), "half_life": float("inf")}],
    )
    assert record.numbers == {"VR_100": 1.2} and record.table == [
        {"horizon": 100, "half_life": None}
    ]
    serde = JsonPlusSerializer(allowed_msgpack_modules=checkpoint_allowlist())
    back = serde.loads_typed(serde.dumps_typed([record]))
    assert back == [record] and isinstance(back[0], StudyRecord)
