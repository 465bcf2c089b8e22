"""Table-driven: every route and every limit boundary of decide_route."""

from __future__ import annotations

import pytest

from gate.contracts import (
    FailureAnalysis,
    FailureType,
    Hint,
    Limits,
    LoopCounters,
    Route,
    TrajectoryAnalysis,
    TrajectoryStatus,
)
from gate.routing import decide_route
from strategies.route import DECIDES

pytestmark = pytest.mark.unit

BUG, PARAM, DESIGN, GAP, FUND = (
    FailureType.ALGORITHM_BUG,
    FailureType.PARAMETER_ISSUE,
    FailureType.DESIGN_FLAW,
    FailureType.RESEARCH_GAP,
    FailureType.FUNDAMENTAL_IMPOSSIBILITY,
)
CONV, DIV, OSC, STAG = (
    TrajectoryStatus.CONVERGING,
    TrajectoryStatus.DIVERGING,
    TrajectoryStatus.OSCILLATING,
    TrajectoryStatus.STAGNANT,
)
LIMITS = Limits(max_iterations=10, max_strategy_iterations=3, max_research_loops=2)

# (id, passed, failure, trajectory, (iteration, strategy_iterations, research_loops), route, text)
CASES = [
    ("success", True, PARAM, None, (1, 1, 0), Route.SUCCESS, "passed"),
    ("success beats every limit", True, FUND, DIV, (10, 3, 2), Route.SUCCESS, "passed"),
    ("iteration limit reached", False, PARAM, None, (10, 1, 0), Route.ABANDON, "10/10"),
    ("iteration below limit", False, PARAM, None, (9, 1, 0), Route.TUNE, "1/3"),
    ("fundamental impossibility", False, FUND, None, (1, 1, 0), Route.ABANDON, "fundamental"),
    ("diverging at iteration 3", False, PARAM, DIV, (3, 2, 0), Route.RESEARCH, "diverging"),
    ("diverging, research exhausted", False, PARAM, DIV, (5, 2, 2), Route.ABANDON, "diverging"),
    ("diverging at iteration 2 is not final", False, PARAM, DIV, (2, 2, 0), Route.TUNE, "2/3"),
    ("bug -> fix", False, BUG, None, (1, 1, 0), Route.FIX, "ALGORITHM_BUG"),
    ("parameter -> tune", False, PARAM, CONV, (2, 2, 0), Route.TUNE, "PARAMETER_ISSUE"),
    ("design -> refine", False, DESIGN, None, (1, 1, 0), Route.REFINE, "DESIGN_FLAW"),
    ("stagnant tuning -> refine", False, PARAM, STAG, (2, 2, 0), Route.REFINE, "stagnant"),
    (
        "oscillating parameter -> smaller steps",
        False,
        PARAM,
        OSC,
        (3, 2, 0),
        Route.TUNE,
        "smaller steps",
    ),
    (
        "oscillating design -> smaller steps",
        False,
        DESIGN,
        OSC,
        (3, 2, 0),
        Route.TUNE,
        "smaller steps",
    ),
    ("oscillating bug still fixed", False, BUG, OSC, (3, 2, 0), Route.FIX, "ALGORITHM_BUG"),
    ("stagnant design still refined", False, DESIGN, STAG, (3, 2, 0), Route.REFINE, "DESIGN"),
    ("no diagnosis -> tune", False, None, None, (1, 1, 0), Route.TUNE, "no failure diagnosis"),
    ("strategy budget boundary (2 < 3)", False, BUG, None, (2, 2, 0), Route.FIX, "2/3"),
    ("strategy budget exhausted -> research", False, BUG, None, (3, 3, 0), Route.RESEARCH, "1/2"),
    ("research gap -> research", False, GAP, None, (1, 1, 0), Route.RESEARCH, "research gap"),
    ("research gap, last research loop", False, GAP, None, (4, 1, 1), Route.RESEARCH, "2/2"),
    # Research exhausted is no reason to stop before the iteration budget: keep developing.
    ("research gap, loops exhausted", False, GAP, None, (4, 1, 2), Route.REFINE, "(2/2)"),
    (
        "budget and research exhausted -> new strategy line",
        False,
        DESIGN,
        None,
        (7, 3, 2),
        Route.REFINE,
        "new strategy line",
    ),
]


@pytest.mark.parametrize(
    ("passed", "failure", "trajectory", "counters", "route", "text"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_route_table(passed, failure, trajectory, counters, route, text) -> None:
    it, si, rl = counters
    fa = (
        None
        if failure is None
        else FailureAnalysis(failure_type=failure, root_cause="because", confidence=0.7)
    )
    tr = (
        None
        if trajectory is None
        else TrajectoryAnalysis(status=trajectory, improvement_rate={"score": -0.1})
    )
    got, reason = decide_route(
        any_passed=passed,
        failure=fa,
        trajectory=tr,
        counters=LoopCounters(iteration=it, strategy_iterations=si, research_loops=rl),
        limits=LIMITS,
    )
    assert got == route, reason
    assert text in reason


def test_table_covers_every_route() -> None:
    assert {c[5] for c in CASES} == DECIDES == set(Route) - {Route.INITIAL}


def test_zero_research_loops_allowed_keeps_developing() -> None:
    got, reason = decide_route(
        any_passed=False,
        failure=None,
        trajectory=None,
        counters=LoopCounters(iteration=3, strategy_iterations=3, research_loops=0),
        limits=Limits(max_research_loops=0),
    )
    assert got == Route.TUNE and "0/0" in reason and "new strategy line" in reason


def test_market_exposure_refines_even_when_the_score_oscillates() -> None:
    exposure = FailureAnalysis(
        failure_type=DESIGN,
        root_cause="the returns are market exposure: beta 0.62",
        confidence=0.75,
        actions=["time the exposure"],
        hints=[Hint.MARKET_EXPOSURE],
    )
    route, reason = decide_route(
        any_passed=False,
        failure=exposure,
        trajectory=TrajectoryAnalysis(status=OSC),
        counters=LoopCounters(iteration=3, strategy_iterations=2, research_loops=0),
        limits=LIMITS,
    )
    assert route == Route.REFINE and "market exposure" in reason and "cross-sectional" in reason


def test_one_bad_step_after_a_research_round_is_not_a_diverging_verdict() -> None:
    # Regression: a planted-edge calibration run abandoned at iteration 3 on a two-point line
    # ([0.653, 0.592] after a RESEARCH round) as "diverging".
    design = FailureAnalysis(failure_type=DESIGN, root_cause="x", confidence=0.5)
    two = TrajectoryAnalysis(status=DIV, n_iterations=2)
    route, _ = decide_route(
        any_passed=False,
        failure=design,
        trajectory=two,
        counters=LoopCounters(iteration=3, strategy_iterations=2, research_loops=1),
        limits=LIMITS,
    )
    assert route == Route.REFINE
    three = TrajectoryAnalysis(status=DIV, n_iterations=3)
    route, reason = decide_route(
        any_passed=False,
        failure=design,
        trajectory=three,
        counters=LoopCounters(iteration=4, strategy_iterations=3, research_loops=1),
        limits=LIMITS,
    )
    assert route == Route.RESEARCH and "diverging" in reason and "2/2" in reason


@pytest.mark.parametrize(
    ("route", "expect"),
    [
        (Route.TUNE, (4, 3, 1)),
        (Route.FIX, (4, 3, 1)),
        (Route.REFINE, (4, 3, 1)),
        (Route.RESEARCH, (4, 1, 2)),
        (Route.SUCCESS, None),
        (Route.ABANDON, None),
    ],
)
def test_advance(route, expect) -> None:
    from gate.routing import advance

    counters = LoopCounters(iteration=3, strategy_iterations=2, research_loops=1)
    nxt = advance(counters, route)
    got = None if nxt is None else (nxt.iteration, nxt.strategy_iterations, nxt.research_loops)
    assert got == expect


@pytest.mark.parametrize(
    ("route", "exhausted", "expect"),
    [
        (Route.TUNE, True, Route.ABANDON),
        (Route.RESEARCH, True, Route.ABANDON),
        (Route.SUCCESS, True, Route.SUCCESS),
        (Route.ABANDON, True, Route.ABANDON),
        (Route.TUNE, False, Route.TUNE),
    ],
)
def test_budget_stop(route, exhausted, expect) -> None:
    from gate.routing import budget_stop

    got, reason = budget_stop(route, "why", exhausted=exhausted, used=1200, limit=1000)
    assert got == expect
    if got != route:
        assert reason.startswith("budget:") and "1200 of 1000" in reason and route.value in reason
    else:
        assert reason == "why"


def test_decide_route_takes_the_budget_state() -> None:
    from gate.routing import Budget

    counters = LoopCounters(iteration=1, strategy_iterations=1, research_loops=0)
    kw = {
        "any_passed": False,
        "failure": None,
        "trajectory": None,
        "counters": counters,
        "limits": LIMITS,
    }
    assert decide_route(**kw)[0] == Route.TUNE
    assert decide_route(**kw, budget=Budget(exhausted=False, used=10, limit=100)) == (
        decide_route(**kw)
    )
    route, reason = decide_route(**kw, budget=Budget(exhausted=True, used=120, limit=100))
    assert route == Route.ABANDON and reason.startswith("budget:") and "TUNE" in reason
    spent = Budget(exhausted=True, used=120, limit=100)
    assert decide_route(**{**kw, "any_passed": True}, budget=spent)[0] == Route.SUCCESS


@pytest.mark.parametrize("passed", [True, False])
def test_a_contaminated_run_cannot_pass(passed) -> None:
    """Issue 29: an LLM run whose answers leaked above the threshold is ABANDONed, pass or not."""
    counters = LoopCounters(iteration=1, strategy_iterations=1, research_loops=0)
    kw = {
        "any_passed": passed,
        "failure": None,
        "trajectory": None,
        "counters": counters,
        "limits": LIMITS,
    }
    assert decide_route(**kw, contaminated=None) == decide_route(**kw)
    route, reason = decide_route(**kw, contaminated="9 of 100 answers leaked")
    assert route == Route.ABANDON and reason.startswith("contaminated: 9 of 100")
