"""Three-tier routing of the develop loop: one pure function, limits from the config."""

from __future__ import annotations

from dataclasses import dataclass

from gate.contracts import (
    FailureAnalysis,
    FailureType,
    Hint,
    IterationSummary,
    Limits,
    LoopCounters,
    Route,
    TrajectoryAnalysis,
    TrajectoryStatus,
)
from gate.pursuit import Pursuit

DIVERGING_MIN_ITERATIONS = 3  # one bad step is noise; a sustained slide over 3 is a verdict

_STRATEGY_ROUTE = {
    FailureType.ALGORITHM_BUG: Route.FIX,
    FailureType.PARAMETER_ISSUE: Route.TUNE,
    FailureType.DESIGN_FLAW: Route.REFINE,
}


@dataclass(frozen=True)
class Budget:
    """The LLM token budget's state; a run with the rules brains has none."""

    exhausted: bool
    used: int
    limit: int | None


@dataclass(frozen=True)
class ResearchOutlook:
    """Whether another research round can change the plan the strategy half reads: a study
    not yet run remains for this failure, and the last round changed the plan (a round that
    changed nothing is not chosen twice). ``why`` says which, for the reason."""

    can_change: bool
    why: str


def decide_route(
    *,
    any_passed: bool,
    failure: FailureAnalysis | None,
    trajectory: TrajectoryAnalysis | None,
    counters: LoopCounters,
    limits: Limits,
    budget: Budget | None = None,
    research: ResearchOutlook | None = None,
    pursuit: Pursuit | None = None,
    contaminated: str | None = None,
) -> tuple[Route, str]:
    """The next route and a reason with the numbers behind it; a spent ``budget`` turns a
    route that would start another iteration into ABANDON (:func:`budget_stop`).
    ``research``: whether a research round can change anything (None: it can, while loops
    remain); ``pursuit``: the best's standing (:func:`gate.pursuit.pursuit_of`).
    ``contaminated``: why the run's LLM answers cannot be trusted (their leak rate is over the
    threshold, issue 29), or None: such a run cannot pass, and going on only asks again."""
    if contaminated:
        return Route.ABANDON, f"contaminated: {contaminated}; the gate cannot pass this run"
    route, reason = _route(
        any_passed=any_passed,
        failure=failure,
        trajectory=trajectory,
        counters=counters,
        limits=limits,
        research=research,
        pursuit=pursuit,
    )
    if budget is None:
        return route, reason
    return budget_stop(
        route, reason, exhausted=budget.exhausted, used=budget.used, limit=budget.limit
    )


def research_closed(
    counters: LoopCounters,
    limits: Limits,
    research: ResearchOutlook | None,
    pursuit: Pursuit | None,
) -> str | None:
    """Why the loop may not go back to research now, or None when it may: research loops
    spent, nothing a round could change, or a best worth repairing instead."""
    rl, max_rl = counters.research_loops, limits.max_research_loops
    if pursuit is not None and pursuit.structural_only:
        return f"{pursuit.describe()}: repair it rather than research a new premise"
    if rl >= max_rl:
        return f"research loops exhausted ({rl}/{max_rl})"
    if research is not None and not research.can_change:
        return f"research cannot change the plan ({research.why})"
    return None


def _route(
    *,
    any_passed: bool,
    failure: FailureAnalysis | None,
    trajectory: TrajectoryAnalysis | None,
    counters: LoopCounters,
    limits: Limits,
    research: ResearchOutlook | None = None,
    pursuit: Pursuit | None = None,
) -> tuple[Route, str]:
    """The three tiers, before any budget.

    Tier 1: SUCCESS. Hard stops: the iteration budget, fundamental impossibility. A line of
    ideas whose score slides for 3 iterations is given up: back to research while research
    can change the plan (a fresh line), else ABANDON; a best worth repairing (significant
    alpha, only structural criteria failing) is refined instead. Tier 2 (while strategy
    iterations remain): FIX / TUNE / REFINE by failure type, with the trajectory overriding
    stagnant tuning (REFINE) and oscillation (TUNE with smaller steps). Tier 3: RESEARCH
    while research can change the plan (:func:`research_closed`), else a new line of
    strategy iterations: a run ends early only on the stops above, never because research
    has nothing left to say.
    """
    it, max_it = counters.iteration, limits.max_iterations
    if any_passed:
        return Route.SUCCESS, f"a variant passed the gate at iteration {it}"

    if it >= max_it:
        return Route.ABANDON, (
            f"budget: iteration limit reached ({it}/{max_it}) with no variant passing"
        )
    kind = failure.failure_type if failure is not None else None
    if failure is not None and kind == FailureType.FUNDAMENTAL_IMPOSSIBILITY:
        return Route.ABANDON, (
            f"fundamental impossibility at iteration {it} "
            f"(confidence {failure.confidence:.2f}): {failure.root_cause}"
        )
    status = trajectory.status if trajectory is not None else None
    diverging = status == TrajectoryStatus.DIVERGING
    # A slide is sustained when the current line (since the last research round) holds
    # DIVERGING_MIN_ITERATIONS iterations, not merely when the run has made that many.
    line = trajectory.n_iterations if trajectory is not None and trajectory.n_iterations else it
    rl, max_rl = counters.research_loops, limits.max_research_loops
    closed = research_closed(counters, limits, research, pursuit)
    si, max_si = counters.strategy_iterations, limits.max_strategy_iterations
    budget = f"strategy iteration {si}/{max_si}"
    if trajectory is not None and diverging and min(it, line) >= DIVERGING_MIN_ITERATIONS:
        rate = trajectory.improvement_rate.get("score", 0.0)
        why = f"trajectory diverging at iteration {it} (score {rate:+.1%} per iteration)"
        if closed is None:  # this line of ideas is getting worse, not the search exhausted
            return Route.RESEARCH, f"{why}: back to research (research loop {rl + 1}/{max_rl})"
        if pursuit is not None and pursuit.structural_only:
            return Route.REFINE, f"{why}, but {closed} ({budget})"
        return Route.ABANDON, f"{why} and research exhausted: {closed}"

    if kind != FailureType.RESEARCH_GAP and si < max_si:
        return _strategy_route(failure, status, budget)

    why = "research gap" if kind == FailureType.RESEARCH_GAP else f"{budget}: budget exhausted"
    if closed is None:
        return Route.RESEARCH, f"{why}: back to research (research loop {rl + 1}/{max_rl})"
    if si >= max_si:  # the line's budget is spent and research has nothing new: a new line
        route, reason = _strategy_route(failure, status, f"new strategy line, {it}/{max_it}")
        return route, f"{why}; {closed}: {reason}"
    route, reason = _strategy_route(failure, status, budget)
    return route, f"{why}, but {closed}: {reason}"


def _strategy_route(
    failure: FailureAnalysis | None, status: TrajectoryStatus | None, budget: str
) -> tuple[Route, str]:
    """FIX / TUNE / REFINE from the failure type and the trajectory (a research gap the
    research cannot close is a design to refine)."""
    kind = failure.failure_type if failure is not None else None
    if failure is None or kind is None:
        return Route.TUNE, f"no failure diagnosis: explore around the best variant ({budget})"
    if kind == FailureType.RESEARCH_GAP:
        return Route.REFINE, (
            f"refine the design on the current premise (confidence {failure.confidence:.2f}): "
            f"{failure.root_cause} ({budget})"
        )
    if kind == FailureType.PARAMETER_ISSUE and status == TrajectoryStatus.STAGNANT:
        return Route.REFINE, (
            f"{kind} but the score is stagnant: more tuning will not help, "
            f"refine the design ({budget})"
        )
    if Hint.MARKET_EXPOSURE in failure.hints:  # tuning finds more of the same exposure
        return Route.REFINE, (
            f"{kind} (confidence {failure.confidence:.2f}): {failure.root_cause}; refine "
            f"toward timed, hedged or cross-sectional designs ({budget})"
        )
    if (
        kind in (FailureType.PARAMETER_ISSUE, FailureType.DESIGN_FLAW)
        and status == TrajectoryStatus.OSCILLATING
    ):
        return Route.TUNE, (
            f"{kind} with an oscillating score: tune with smaller steps around the best ({budget})"
        )
    return _STRATEGY_ROUTE[kind], (
        f"{kind} (confidence {failure.confidence:.2f}): {failure.root_cause} ({budget})"
    )


def advance(
    counters: LoopCounters, route: Route, limits: Limits | None = None
) -> LoopCounters | None:
    """Where the loop stands after ``route``: the next iteration's counters, or None when the
    loop ends (SUCCESS, ABANDON). A research round starts a new line of strategy iterations;
    so does a strategy route taken when the line's budget (``limits``) is spent."""
    nxt = counters.iteration + 1
    if route in (Route.TUNE, Route.FIX, Route.REFINE):
        spent = (
            limits is not None and counters.strategy_iterations >= limits.max_strategy_iterations
        )
        si = 1 if spent else counters.strategy_iterations + 1
        return counters.model_copy(update={"iteration": nxt, "strategy_iterations": si})
    if route == Route.RESEARCH:
        return counters.model_copy(
            update={
                "iteration": nxt,
                "strategy_iterations": 1,
                "research_loops": counters.research_loops + 1,
            }
        )
    return None


def budget_stop(
    route: Route, reason: str, *, exhausted: bool, used: int, limit: int | None
) -> tuple[Route, str]:
    """A spent LLM token budget ends the loop cleanly instead of starting another iteration;
    a decided SUCCESS or ABANDON stands."""
    if not exhausted or route in (Route.SUCCESS, Route.ABANDON):
        return route, reason
    return Route.ABANDON, (
        f"budget: LLM token budget exhausted ({used} of {limit} tokens); stopping cleanly "
        f"instead of {route.value}"
    )


def current_line(history: list[IterationSummary]) -> list[IterationSummary]:
    """Iterations since the last RESEARCH route: a research round starts a new line of ideas,
    so scores from before it say nothing about whether the current line converges."""
    start = 0
    for i, h in enumerate(history):
        if h.route == Route.RESEARCH:
            start = i + 1
    return history[start:]
