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


def decide_route(
    *,
    any_passed: bool,
    failure: FailureAnalysis | None,
    trajectory: TrajectoryAnalysis | None,
    counters: LoopCounters,
    limits: Limits,
    budget: Budget | None = None,
) -> tuple[Route, str]:
    """The next route and a reason with the numbers behind it; a spent ``budget`` turns a
    route that would start another iteration into ABANDON (:func:`budget_stop`)."""
    route, reason = _route(
        any_passed=any_passed, failure=failure, trajectory=trajectory, counters=counters,
        limits=limits,
    )  # fmt: skip
    if budget is None:
        return route, reason
    return budget_stop(
        route, reason, exhausted=budget.exhausted, used=budget.used, limit=budget.limit
    )


def _route(
    *,
    any_passed: bool,
    failure: FailureAnalysis | None,
    trajectory: TrajectoryAnalysis | None,
    counters: LoopCounters,
    limits: Limits,
) -> tuple[Route, str]:
    """The three tiers, before any budget.

    Tier 1: SUCCESS. Hard stops: iteration limit, fundamental impossibility. A line of
    ideas whose score slides for 3 iterations is given up: back to research while research
    loops remain (a fresh line), else ABANDON. Tier 2 (while strategy iterations
    remain): FIX / TUNE / REFINE by failure type, with the trajectory overriding
    stagnant tuning (REFINE) and oscillation (TUNE with smaller steps). Tier 3:
    RESEARCH while research loops remain, else ABANDON.
    """
    it, max_it = counters.iteration, limits.max_iterations
    if any_passed:
        return Route.SUCCESS, f"a variant passed the gate at iteration {it}"

    if it >= max_it:
        return Route.ABANDON, f"iteration limit reached ({it}/{max_it}) with no variant passing"
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
    if trajectory is not None and diverging and min(it, line) >= DIVERGING_MIN_ITERATIONS:
        rate = trajectory.improvement_rate.get("score", 0.0)
        why = f"trajectory diverging at iteration {it} (score {rate:+.1%} per iteration)"
        if rl < max_rl:  # this line of ideas is getting worse, not the search exhausted
            return Route.RESEARCH, f"{why}: back to research (research loop {rl + 1}/{max_rl})"
        return Route.ABANDON, f"{why} and research loops exhausted ({rl}/{max_rl})"

    si, max_si = counters.strategy_iterations, limits.max_strategy_iterations
    budget = f"strategy iteration {si}/{max_si}"
    if kind != FailureType.RESEARCH_GAP and si < max_si:
        if failure is None or kind is None:
            return Route.TUNE, f"no failure diagnosis: explore around the best variant ({budget})"
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
                f"{kind} with an oscillating score: tune with smaller steps around the best "
                f"({budget})"
            )
        return _STRATEGY_ROUTE[kind], (
            f"{kind} (confidence {failure.confidence:.2f}): {failure.root_cause} ({budget})"
        )

    why = "research gap" if kind == FailureType.RESEARCH_GAP else f"{budget}: budget exhausted"
    if rl < max_rl:
        return Route.RESEARCH, f"{why}: back to research (research loop {rl + 1}/{max_rl})"
    return Route.ABANDON, f"{why} and research loops exhausted ({rl}/{max_rl})"


def advance(counters: LoopCounters, route: Route) -> LoopCounters | None:
    """Where the loop stands after ``route``: the next iteration's counters, or None when the
    loop ends (SUCCESS, ABANDON). A research round starts a new line of strategy iterations."""
    nxt = counters.iteration + 1
    if route in (Route.TUNE, Route.FIX, Route.REFINE):
        return counters.model_copy(
            update={"iteration": nxt, "strategy_iterations": counters.strategy_iterations + 1}
        )
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
