"""When the loop may go back to research, and when a run may end early (issue 23 items 4, 6):
each decision of ``decide_route`` / ``advance`` / ``pursuit_of`` on its own."""

from __future__ import annotations

import pytest
from gate_builders import make_eval, make_metrics

from gate.alpha import AlphaStats
from gate.contracts import (
    FailureAnalysis,
    FailureType,
    Limits,
    LoopCounters,
    Route,
    TrajectoryAnalysis,
    TrajectoryStatus,
)
from gate.criteria import parse_criteria
from gate.pursuit import Pursuit, pursuit_of
from gate.routing import Budget, ResearchOutlook, advance, decide_route

pytestmark = pytest.mark.unit

LIMITS = Limits(max_iterations=10, max_strategy_iterations=3, max_research_loops=2)
OPEN = ResearchOutlook(can_change=True, why="the horizons study has not been run")
SHUT = ResearchOutlook(can_change=False, why="every study has been run")
UNCHANGED = ResearchOutlook(can_change=False, why="research round 2 left the plan unchanged")
CRITERIA = parse_criteria("sharpe>=1.0,max_drawdown_pct<=20,alpha_t>=2,min_trades>=30")


def _failure(kind: FailureType) -> FailureAnalysis:
    return FailureAnalysis(failure_type=kind, root_cause="because", confidence=0.7)


def _route(
    kind: FailureType | None,
    counters: tuple[int, int, int],
    *,
    research: ResearchOutlook | None = None,
    pursuit: Pursuit | None = None,
    trajectory: TrajectoryAnalysis | None = None,
    budget: Budget | None = None,
) -> tuple[Route, str]:
    it, si, rl = counters
    return decide_route(
        any_passed=False,
        failure=None if kind is None else _failure(kind),
        trajectory=trajectory,
        counters=LoopCounters(iteration=it, strategy_iterations=si, research_loops=rl),
        limits=LIMITS,
        budget=budget,
        research=research,
        pursuit=pursuit,
    )


def _best(t: float, **metrics: float) -> Pursuit:
    alpha = AlphaStats(benchmark="SPY", n_obs=750, t_stat=t, beta=0.1)
    p = pursuit_of(make_eval(metrics=make_metrics(**metrics), alpha=alpha), CRITERIA)
    assert p is not None
    return p


def test_research_gap_goes_to_research_when_a_study_can_change_the_plan() -> None:
    route, reason = _route(FailureType.RESEARCH_GAP, (2, 1, 0), research=OPEN)
    assert route == Route.RESEARCH and "1/2" in reason


def test_research_not_chosen_when_nothing_can_change() -> None:
    route, reason = _route(FailureType.RESEARCH_GAP, (2, 1, 0), research=SHUT)
    assert route == Route.REFINE
    assert "research cannot change the plan (every study has been run)" in reason


def test_a_round_that_changed_nothing_is_not_chosen_twice() -> None:
    for kind, si in ((FailureType.RESEARCH_GAP, 1), (FailureType.DESIGN_FLAW, 3)):
        route, reason = _route(kind, (5, si, 1), research=UNCHANGED)
        assert route == Route.REFINE and "left the plan unchanged" in reason


def test_strategy_budget_spent_and_research_exhausted_starts_a_new_line() -> None:
    route, reason = _route(FailureType.DESIGN_FLAW, (5, 3, 2), research=OPEN)
    assert route == Route.REFINE
    assert "research loops exhausted (2/2)" in reason and "new strategy line" in reason
    nxt = advance(LoopCounters(iteration=5, strategy_iterations=3, research_loops=2), route, LIMITS)
    assert nxt == LoopCounters(iteration=6, strategy_iterations=1, research_loops=2)
    # ...and a line within its budget counts on.
    nxt = advance(LoopCounters(iteration=5, strategy_iterations=2, research_loops=2), route, LIMITS)
    assert nxt is not None and nxt.strategy_iterations == 3


def test_parameter_issue_keeps_tuning_on_a_new_line() -> None:
    route, reason = _route(FailureType.PARAMETER_ISSUE, (6, 3, 0), research=SHUT)
    assert route == Route.TUNE and "new strategy line, 6/10" in reason


def test_fundamental_impossibility_abandons_naming_it() -> None:
    route, reason = _route(FailureType.FUNDAMENTAL_IMPOSSIBILITY, (3, 3, 0), research=OPEN)
    assert route == Route.ABANDON and reason.startswith("fundamental impossibility")


def test_diverging_with_research_exhausted_abandons_naming_both() -> None:
    slide = TrajectoryAnalysis(
        status=TrajectoryStatus.DIVERGING, n_iterations=3, improvement_rate={"score": -0.1}
    )
    route, reason = _route(FailureType.DESIGN_FLAW, (6, 3, 1), research=SHUT, trajectory=slide)
    assert route == Route.ABANDON
    assert "trajectory diverging" in reason and "research exhausted" in reason
    route, _ = _route(FailureType.DESIGN_FLAW, (6, 3, 1), research=OPEN, trajectory=slide)
    assert route == Route.RESEARCH


def test_iteration_limit_abandons_naming_the_budget() -> None:
    route, reason = _route(FailureType.DESIGN_FLAW, (10, 2, 2), research=SHUT)
    assert route == Route.ABANDON and reason.startswith("budget: iteration limit reached (10/10)")


def test_token_budget_abandons_naming_the_budget() -> None:
    spent = Budget(exhausted=True, used=1200, limit=1000)
    route, reason = _route(FailureType.DESIGN_FLAW, (4, 1, 0), research=OPEN, budget=spent)
    assert route == Route.ABANDON and reason.startswith("budget: LLM token budget exhausted")


def test_significant_alpha_failing_only_drawdown_is_refined_never_researched() -> None:
    pursuit = _best(3.2, max_drawdown_pct=35.0)
    assert pursuit.structural_only and pursuit.failing == ("max_drawdown_pct<=20",)
    for kind, si in (
        (FailureType.RESEARCH_GAP, 1),
        (FailureType.DESIGN_FLAW, 3),
        (FailureType.RESEARCH_GAP, 3),
    ):
        route, reason = _route(kind, (4, si, 0), research=OPEN, pursuit=pursuit)
        assert route == Route.REFINE, reason
        assert "alpha t 3.20 and fails only max_drawdown_pct<=20" in reason
    slide = TrajectoryAnalysis(status=TrajectoryStatus.DIVERGING, n_iterations=3)
    route, _ = _route(
        FailureType.DESIGN_FLAW, (4, 3, 0), research=OPEN, pursuit=pursuit, trajectory=slide
    )
    assert route == Route.REFINE


@pytest.mark.parametrize(
    ("t", "metrics", "structural"),
    [
        (3.2, {"max_drawdown_pct": 35.0}, True),
        (2.0, {"max_drawdown_pct": 35.0, "n_trades": 12}, True),  # the trade floor too
        (1.5, {"max_drawdown_pct": 35.0}, False),  # no significant alpha: research may help
        (3.2, {"max_drawdown_pct": 35.0, "sharpe": 0.5}, False),  # the edge itself fails
        (3.2, {}, False),  # nothing fails: not a repair
    ],
)
def test_pursuit_structural_only(t: float, metrics: dict[str, float], structural: bool) -> None:
    assert _best(t, **metrics).structural_only is structural


def test_pursuit_needs_a_usable_best() -> None:
    assert pursuit_of(None, CRITERIA) is None
    assert pursuit_of(make_eval(metrics=None), CRITERIA) is None


def _hedgeable_eval(*, beta: float = 0.5, da: float = 0.99, dsr: float = 0.8, **metrics: float):
    alpha = AlphaStats(
        benchmark="SPY",
        n_obs=1400,
        t_stat=5.0,
        beta=beta,
        deflated_alpha=da,
        appraisal_ratio=2.5,
        alpha_annual_pct=15.0,
    )
    return make_eval(metrics=make_metrics(**metrics), alpha=alpha, dsr=dsr)


def test_a_deflated_edge_hidden_by_market_noise_is_pursued_not_researched() -> None:
    # The alpha survives deflation; beta 0.5 of market noise fails the Sharpe and the DSR.
    p = pursuit_of(_hedgeable_eval(sharpe=0.8), CRITERIA)
    assert p is not None and p.structural_only
    assert p.failing == ("sharpe>=1", "dsr>=0.95")
    route, reason = _route(FailureType.RESEARCH_GAP, (2, 1, 0), research=OPEN, pursuit=p)
    assert route == Route.REFINE and "repair it rather than research" in reason
    # Only the DSR short of its bar: still a hedge to make, not a premise to replace.
    only_dsr = pursuit_of(_hedgeable_eval(), CRITERIA)
    assert only_dsr is not None and only_dsr.structural_only and only_dsr.failing == ("dsr>=0.95",)


@pytest.mark.parametrize(
    "kw",
    [
        {"beta": 0.1},  # no market noise to hedge: the raw Sharpe is the alpha's
        {"da": 0.8},  # the alpha does not survive deflation
    ],
)
def test_a_raw_sharpe_failure_without_a_hedgeable_edge_is_not_pursued(kw) -> None:
    p = pursuit_of(_hedgeable_eval(sharpe=0.8, **kw), CRITERIA)
    assert p is not None and not p.structural_only
    assert "dsr>=0.95" not in p.failing  # the DSR bar counts only when a hedge can lift it
