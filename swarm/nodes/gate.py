"""Gate nodes: reduce the backtests, score, analyse failure and trajectory, route the loop."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd
from langgraph.runtime import Runtime

from backtest.contracts import BacktestResult, JobStatus
from gate.aggregate import aggregate_variant
from gate.contracts import (
    FailureAnalysis,
    GateDecision,
    IterationSummary,
    Limits,
    LoopCounters,
    Route,
    TrajectoryAnalysis,
    VariantEvaluation,
)
from gate.evaluate import best_evaluation, evaluate_variants, iteration_pbo
from gate.failure import analyse_failure
from gate.fuzzy import FuzzyScorer
from gate.ledger import TrialLedger
from gate.routing import decide_route
from gate.summary import summarise_iteration
from gate.trajectory import analyse_trajectory
from strategies.spec import StrategyVariant
from swarm.context import RunContext
from swarm.nodes.backtest import load_results
from swarm.state import DevelopState


def portfolio_series(results: list[BacktestResult], periods_per_year: int) -> pd.Series:
    """The equal-weight portfolio's per-period returns, indexed by date."""
    ok = [r for r in results if r.status == JobStatus.OK]
    _, _, rets = aggregate_variant(ok, periods_per_year=periods_per_year)
    dates = sorted({d for r in ok for d in r.return_dates})
    return pd.Series(list(rets), index=pd.to_datetime(dates[: len(rets)]), dtype=float)


def _scorer(ctx: RunContext) -> FuzzyScorer:
    if "scorer" not in ctx.cache:
        ctx.cache["scorer"] = FuzzyScorer(ctx.criteria)
    return ctx.cache["scorer"]


def gate(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    results = load_results(ctx, state.get("results", []))
    variants = [StrategyVariant.model_validate(v) for v in state.get("variants", [])]
    ledger = TrialLedger.model_validate(state.get("ledger") or {})
    evaluations = evaluate_variants(
        [(v.variant_id, v.spec.family.value, v.spec.trial_key()) for v in variants],
        results,
        ctx.criteria,
        ledger,
        scorer=_scorer(ctx),
        periods_per_year=ctx.periods_per_year,
    )
    best = state.get("best")
    top = best_evaluation(evaluations)
    if top is not None:
        previous = VariantEvaluation.model_validate(best) if best else None
        if previous is None or best_evaluation([previous, top]) is top:
            rets = portfolio_series(
                [r for r in results if r.variant_id == top.variant_id], ctx.periods_per_year
            )
            best = top.model_dump(mode="json") | {
                "portfolio": {
                    "dates": [d.date().isoformat() for d in rets.index],
                    "values": rets.tolist(),
                }
            }
    # PBO needs a cross-section of at least 8 variants on shared dates; None otherwise.
    pbo = iteration_pbo(results, [v.variant_id for v in variants])
    n_passed = sum(e.passed for e in evaluations)
    ctx.progress.stage(
        "gate",
        f"iteration {state['iteration']}: {n_passed}/{len(evaluations)} passed; best score "
        f"{max((e.score for e in evaluations), default=0):.3f}; trials counted {ledger.n_trials}",
    )
    return {
        "evaluations": [e.model_dump(mode="json") for e in evaluations],
        "ledger": ledger.model_dump(mode="json"),
        "best": best,
        "failure": None,
        "trajectory": None,
        "n_backtests": state.get("n_backtests", 0) + len(results),
        "pbo": pbo if pbo is not None else state.get("pbo"),
    }


def after_gate(state: DevelopState) -> str:
    return (
        "router" if any(e["passed"] for e in state.get("evaluations", [])) else "failure_analysis"
    )


def failure_analysis(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    synthesis = state.get("synthesis") or {}
    evaluations = [VariantEvaluation.model_validate(e) for e in state.get("evaluations", [])]
    analysis = analyse_failure(
        evaluations,
        criteria=ctx.criteria,
        history=[IterationSummary.model_validate(h) for h in state.get("history", [])],
        research_confidence=float(synthesis.get("confidence", 0.0)),
        regime=str(synthesis.get("regime", "")),
        families=sorted({e.family for e in evaluations}),
    )
    ctx.progress.stage(
        "failure",
        f"{analysis.failure_type.value} ({analysis.confidence:.2f}): {analysis.root_cause}",
    )
    return {"failure": analysis.model_dump(mode="json")}


def _current_line(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Iterations since the last RESEARCH route: a research round starts a new line of ideas,
    so scores from before it say nothing about whether the current line converges."""
    start = 0
    for i, h in enumerate(history):
        if h["route"] == Route.RESEARCH:
            start = i + 1
    return history[start:]


def after_failure(state: DevelopState) -> str:
    # The trajectory needs this iteration plus at least one before it on the same line.
    return "trajectory" if _current_line(state.get("history", [])) else "router"


def _summary(state: DevelopState, route: Route) -> IterationSummary:
    evaluations = [VariantEvaluation.model_validate(e) for e in state.get("evaluations", [])]
    params = {vid: v["spec"]["parameters"] for vid, v in state.get("all_variants", {}).items()}
    return summarise_iteration(state["iteration"], evaluations, route=route, parameters=params)


def trajectory(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    # The current iteration's route is not decided yet; the analysis reads scores and metrics.
    history = [IterationSummary.model_validate(h) for h in _current_line(state.get("history", []))]
    history.append(_summary(state, Route.TUNE))
    analysis = analyse_trajectory(history, score_threshold=ctx.criteria.score_threshold)
    if analysis is None:
        return {"trajectory": None}
    ctx.progress.stage("trajectory", f"{analysis.status.value}: {analysis.reasoning}")
    return {"trajectory": analysis.model_dump(mode="json")}


def router(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    cfg = ctx.config
    iteration = state["iteration"]
    counters = LoopCounters.model_validate(state.get("counters") or {"iteration": iteration})
    counters = counters.model_copy(update={"iteration": iteration})
    evaluations = [VariantEvaluation.model_validate(e) for e in state.get("evaluations", [])]
    failure = FailureAnalysis.model_validate(state["failure"]) if state.get("failure") else None
    traj = (
        TrajectoryAnalysis.model_validate(state["trajectory"]) if state.get("trajectory") else None
    )
    limits: Limits = cfg.limits
    route, reason = decide_route(
        any_passed=any(e.passed for e in evaluations),
        failure=failure,
        trajectory=traj,
        counters=counters,
        limits=limits,
    )
    ledger = TrialLedger.model_validate(state.get("ledger") or {})
    top = best_evaluation(evaluations)
    decision = GateDecision(
        iteration=iteration,
        decision=route,
        best_variant_id=top.variant_id if top else None,
        evaluations=evaluations,
        failure=failure,
        trajectory=traj,
        reasoning=reason,
        actions=failure.actions if failure else [],
        n_trials=ledger.n_trials,
    )
    _record_iteration(ctx, state, decision)
    summary = _summary(state, route)
    history = [*state.get("history", []), summary.model_dump(mode="json")]
    ctx.progress.stage("route", f"iteration {iteration} -> {route.value}: {reason}")

    update: dict[str, Any] = {
        "decisions": [decision.model_dump(mode="json")],
        "history": history,
        "route": route.value,
    }
    if route in (Route.TUNE, Route.FIX, Route.REFINE):
        update["iteration"] = iteration + 1
        update["counters"] = counters.model_copy(
            update={
                "iteration": iteration + 1,
                "strategy_iterations": counters.strategy_iterations + 1,
            }
        ).model_dump()
    elif route == Route.RESEARCH:
        update["iteration"] = iteration + 1
        update["counters"] = counters.model_copy(
            update={
                "iteration": iteration + 1,
                "strategy_iterations": 1,
                "research_loops": counters.research_loops + 1,
            }
        ).model_dump()
        update["feedback"] = [*state.get("feedback", []), reason]
    return update


def after_router(state: DevelopState) -> str:
    route = state["route"]
    if route == Route.SUCCESS:
        return "holdout"
    if route == Route.ABANDON:
        return "finalize"
    if route == Route.RESEARCH:
        return "data_extractor"
    return "strategy_dev"


def _record_iteration(ctx: RunContext, state: DevelopState, decision: GateDecision) -> None:
    """One JSONL record per variant × symbol, then one for the gate decision."""
    now = datetime.now(UTC).isoformat()
    run_id = ctx.run.root.name
    evals = {e.variant_id: e for e in decision.evaluations}
    results = load_results(ctx, state.get("results", []))
    for variant_dump in state.get("variants", []):
        variant = StrategyVariant.model_validate(variant_dump)
        ev = evals.get(variant.variant_id)
        for symbol in ctx.symbols:
            rs = sorted(
                (r for r in results if r.variant_id == variant.variant_id and r.symbol == symbol),
                key=lambda r: r.fold,
            )
            ok = [r for r in rs if r.status == JobStatus.OK]
            metrics, fold_sharpes, _ = aggregate_variant(ok, periods_per_year=ctx.periods_per_year)
            ctx.run.tracker.append(
                {
                    "kind": "backtest",
                    "run_id": run_id,
                    "iteration": decision.iteration,
                    "route": state.get("route", "INITIAL"),
                    "variant_id": variant.variant_id,
                    "parent_id": variant.parent_id,
                    "name": variant.spec.name,
                    "family": variant.spec.family.value,
                    "trial_key": variant.spec.trial_key(),
                    "parameters": variant.spec.parameters,
                    "code_sha256": variant.code_sha256,
                    "symbol": symbol,
                    "symbols": [symbol],
                    "data_sha256": ctx.data[symbol].sha256,
                    "folds": [
                        {
                            "fold": r.fold,
                            "status": r.status.value,
                            "error": r.error,
                            "metrics": r.metrics.model_dump() if r.metrics else None,
                        }
                        for r in rs
                    ],
                    "fold_sharpes": fold_sharpes,
                    "status": "ok"
                    if len(ok) == len(rs) and rs
                    else ("error" if not ok else "partial"),
                    "metrics": metrics.model_dump() if metrics else None,
                    "gate_score": ev.score if ev else None,
                    "gate_passed": ev.passed if ev else False,
                    "gate_vetoes": ev.vetoes if ev else [],
                    "gate_decision": decision.decision.value,
                    "recorded_at": now,
                }
            )
    ctx.run.tracker.append(
        {
            "kind": "gate",
            "run_id": run_id,
            "iteration": decision.iteration,
            "route": state.get("route", "INITIAL"),
            "gate_decision": decision.decision.value,
            "variant_id": decision.best_variant_id,
            "symbols": ctx.symbols,
            "metrics": next(
                (
                    e.metrics.model_dump()
                    for e in decision.evaluations
                    if e.variant_id == decision.best_variant_id and e.metrics
                ),
                None,
            ),  # fmt: skip
            "gate_score": max((e.score for e in decision.evaluations), default=None),
            "decision": decision.model_dump(mode="json"),
            "recorded_at": now,
        }
    )
