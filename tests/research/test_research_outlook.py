"""Whether research can still change the plan (issue 23 item 4): the next study, whether the
last round changed the plan, and what a plan is."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gate.contracts import FailureAnalysis, FailureType, Hint, LoopCounters
from swarm.nodes.research import _plan_change
from swarm.research.models import (
    DataBrief,
    Regime,
    ResearchSynthesis,
    SuggestedParameters,
    SymbolBrief,
    plan_of,
)
from swarm.research.rounds import StudyKind, plan_round, research_outlook

pytestmark = pytest.mark.unit

SYMBOLS = ["AAPL", "MSFT"]
WINDOW = "2012-01-03..2016-12-30"


def _plan(done, *hints: Hint):
    failure = FailureAnalysis(
        failure_type=FailureType.RESEARCH_GAP, root_cause="t", confidence=0.6, hints=list(hints)
    )
    return plan_round(
        research_round=len(done) + 1,
        failure=failure if done else None,
        done=done,
        symbols=SYMBOLS,
        window=WINDOW,
        current_lookback=50,
    )


def test_a_study_not_yet_run_can_change_the_plan() -> None:
    nxt = _plan([_plan([])], Hint.ZERO_TRADES)
    assert nxt.kind == StudyKind.HORIZONS and not nxt.skipped
    outlook = research_outlook(nxt, last_changed=True)
    assert outlook.can_change and "horizons" in outlook.why
    assert research_outlook(nxt, last_changed=None).can_change


def test_nothing_left_to_study_cannot_change_the_plan() -> None:
    done = [_plan([])]
    while not (nxt := _plan(done, Hint.ZERO_TRADES)).skipped:
        done.append(nxt)
    outlook = research_outlook(nxt, last_changed=True)
    assert not outlook.can_change and "would repeat" in outlook.why


def test_a_round_that_changed_nothing_is_not_followed_by_another() -> None:
    nxt = _plan([_plan([])], Hint.ZERO_TRADES)
    outlook = research_outlook(nxt, last_changed=False)
    assert not outlook.can_change and "round 1 left the plan unchanged" in outlook.why


def _brief(lookback: int = 50, reasoning: str = "r") -> DataBrief:
    sb = SymbolBrief(
        symbol="AAPL",
        start="2012-01-03",
        end="2016-12-30",
        n_bars=1200,
        price_high=2,
        price_low=1,
        price_median=1.5,
        price_p5=1.1,
        price_p95=1.9,
        total_return_pct=20,
        annual_volatility_pct=25,
        max_drawdown_pct=10,
        regime=Regime.TRENDING_UP,
        regime_confidence=0.8,
        coverage_pct=100,
        sha256="0" * 64,
    )
    sp = SuggestedParameters(
        family="momentum",
        lookback=lookback,
        bollinger_width=2.0,
        stop_loss_pct=4,
        take_profit_pct=8,
        max_hold_bars=20,
        reasoning=reasoning,
    )
    return DataBrief(symbols=[sb], regime=Regime.TRENDING_UP, regime_confidence=0.8, suggested=sp)


def _synthesis(families: list[str], signal: float = 0.3, summary: str = "") -> ResearchSynthesis:
    return ResearchSynthesis(
        fact_sheets=[],
        confidence=0.4,
        quality="medium",
        signal=signal,
        regime=Regime.TRENDING_UP,
        recommended_families=families,
        summary=summary,
    )


def test_plan_is_what_the_strategy_half_reads() -> None:
    base = plan_of(_synthesis(["momentum", "trend"]), _brief())
    # Words alone (a summary, the reasoning) change nothing the strategy half acts on.
    assert plan_of(_synthesis(["momentum", "trend"], summary="x"), _brief(reasoning="y")) == base
    assert plan_of(_synthesis(["momentum", "trend"], signal=0.6), _brief()) == base
    assert plan_of(_synthesis(["trend", "momentum"]), _brief()) != base
    assert plan_of(_synthesis(["momentum", "trend"], signal=-0.3), _brief()) != base
    assert plan_of(_synthesis(["momentum", "trend"]), _brief(lookback=20)) != base


class _Progress:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def stage(self, name: str, text: str) -> None:
        self.lines.append(text)


def test_a_round_that_changed_nothing_is_not_charged_to_the_research_loops() -> None:
    ctx = SimpleNamespace(progress=_Progress())
    syn, brief = _synthesis(["momentum", "trend"]), _brief()
    first = _plan_change(ctx, {"data_brief": brief}, syn)
    assert first["research_changed"] and "counters" not in first
    counters = LoopCounters(iteration=4, strategy_iterations=1, research_loops=1)
    state = {"data_brief": brief, "research_plan": first["research_plan"], "counters": counters}
    same = _plan_change(ctx, state, _synthesis(["momentum", "trend"], summary="reworded"))
    assert same["research_changed"] is False
    assert same["counters"].research_loops == 0 and same["counters"].iteration == 4
    assert "left the plan unchanged" in ctx.progress.lines[-1]
    moved = _plan_change(ctx, state, _synthesis(["trend", "momentum"]))
    assert moved["research_changed"] and "counters" not in moved
