"""Gate nodes: reduce the backtests, score, analyse failure and trajectory, route the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from typing import Any

import pandas as pd
from langgraph.runtime import Runtime

from backtest.contracts import BacktestResult, JobStatus
from backtest.job_timeout import scaled_timeout
from backtest.lookahead import LookaheadReport, check_lookahead
from backtest.period_keys import index_keys
from experiments.records import (
    BacktestRecord,
    FoldRecord,
    GateRecord,
    Series,
    append_record,
)
from gate.aggregate import aggregate_variant, portfolio_series
from gate.alpha import run_spa, spa_look_factor, spa_over_looks
from gate.contracts import (
    FailureAnalysis,
    GateDecision,
    IterationSummary,
    LoopCounters,
    Route,
    VariantEvaluation,
)
from gate.cpcv import CpcvResult, cpcv_summary, run_cpcv
from gate.evaluate import LookaheadCheck, best_evaluation, evaluate_variants, run_pbo
from gate.failure import analyse_failure
from gate.fuzzy import FuzzyScorer
from gate.ledger import TrialLedger
from gate.progress import variant_progress
from gate.pursuit import pursuit_of
from gate.routing import Budget, ResearchOutlook, advance, current_line, decide_route
from gate.summary import summarise_iteration
from gate.trajectory import analyse_trajectory
from strategies.family_api import whole_universe
from strategies.spec import StrategyVariant
from swarm.context import RunContext
from swarm.families import registry
from swarm.llm.brains import llm_failure
from swarm.memory import remember_gate_outcome
from swarm.nodes.backtest import (
    PORTFOLIO,
    data_sha256,
    job_bars,
    job_id,
    job_symbols,
    load_results,
)
from swarm.nodes.llm_log import llm_logger, log_usage
from swarm.nodes.trials import measure_effective, screened_representatives, variant_trial_keys
from swarm.research.round_start import plan_next
from swarm.research.rounds import research_outlook
from swarm.state import BestSoFar, DevelopState, Evaluation, SpaResult


def dated_returns(by_date: Mapping[str, float]) -> pd.Series:
    """A variant's portfolio returns (``gate.aggregate.portfolio_series``) as a Series on a
    DatetimeIndex."""
    return pd.Series(list(by_date.values()), index=pd.to_datetime(list(by_date)), dtype=float)


def _scorer(ctx: RunContext) -> FuzzyScorer:
    if ctx.memo.scorer is None:
        ctx.memo.scorer = FuzzyScorer(ctx.criteria)
    return ctx.memo.scorer


def gate(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """GATE: evaluate this iteration's variants against the criteria, deflated by every trial
    so far and the reality check over the whole search; keep the best so far."""
    ctx = runtime.context
    results = load_results(ctx, state.get("results", []))
    variants = state.get("variants", [])
    # A copy: evaluate_variants records this iteration's trials in it.
    ledger = (state.get("ledger") or TrialLedger()).model_copy(deep=True)
    bench = ctx.benchmark_insample()
    # PBO and the reality check cover every variant the run has tried, this iteration's too.
    series = _run_series(ctx, state, results, [v.variant_id for v in variants])
    look, raw_p, spa_trials, spa_p = _reality_check(ctx, state, series, bench)
    # The effective trial count over every trial the ledger will hold after this iteration.
    ledger.deflate_effective = ctx.config.deflate_by == "effective"
    ledger.effective = measure_effective(
        ctx,
        set(ledger.trials) | {v.spec.trial_key() for v in variants},
        series,
        variant_trial_keys(state.get("all_variants", {}), variants),
        None if ctx.benchmark.is_cash else bench,
    )
    lookahead: dict[str, LookaheadReport] = {}  # the checks the gate asks for, by variant
    evaluated = evaluate_variants(
        [(v.variant_id, v.spec.family.value, v.spec.trial_key()) for v in variants],
        results,
        ctx.criteria,
        ledger,
        scorer=_scorer(ctx),
        periods_per_year=ctx.periods_per_year,
        benchmark=None if ctx.benchmark.is_cash else bench,
        benchmark_name=ctx.benchmark.name,
        # Not computable (too few shared dates) is not evidence: no pass on it.
        spa_pvalue=1.0 if spa_p is None else spa_p,
        lookahead=_lookahead_check(ctx, variants, lookahead),
        series=series,
    )
    evaluations = [Evaluation(**dict(e)) for e in evaluated]
    best = _best_so_far(ctx, state.get("best"), evaluations, series)
    # PBO over every variant the run has tried (>= 8 on shared dates; None before that).
    pbo = run_pbo(series)
    cpcv = _cpcv(ctx, series)
    _report(ctx, state, evaluations, ledger, look=look, raw_p=raw_p, spa_p=spa_p, trials=spa_trials)
    return {
        "evaluations": evaluations,
        "ledger": ledger,
        "best": best,
        "failure": None,
        "trajectory": None,
        "n_backtests": state.get("n_backtests", 0) + len(results),
        "pbo": pbo,
        "pbo_variants": sum(1 for s in series.values() if s) if pbo is not None else 0,
        **({"cpcv": cpcv} if cpcv is not None else {}),
        "spa": SpaResult(
            pvalue=spa_p,
            trials=spa_trials,
            benchmark=ctx.benchmark.name,
            raw_pvalue=raw_p,
            look=look,
        ),
        "lookahead": {**(state.get("lookahead") or {}), **lookahead},
    }


def _cpcv(ctx: RunContext, series: Mapping[str, Mapping[str, float]]) -> CpcvResult | None:
    """CPCV of the search's choice over every variant so far, with --validation cpcv (a
    reported figure: the gate's pass does not read it); None otherwise."""
    cfg = ctx.config
    if cfg.validation != "cpcv":
        return None
    result = run_cpcv(
        series,
        n_groups=cfg.cpcv_groups,
        n_test_groups=cfg.cpcv_test_groups,
        periods_per_year=ctx.periods_per_year,
    )
    ctx.progress.stage("cpcv", cpcv_summary(result))
    return result


def _reality_check(ctx: RunContext, state: DevelopState, series: dict, bench):
    """(look, raw p, trials, p over the looks) of Hansen's SPA over every trial of the search."""
    # The reality check counts the search: every Backtrader trial, plus one representative
    # series per cluster of the screened sets (capped: ``trials.SPA_MAX_SCREENED``).
    screened = screened_representatives(ctx, None if ctx.benchmark.is_cash else bench)
    # Looked at every iteration and the run stops at its first pass: look k spends
    # alpha / (k (k + 1)) of the 5 % (``spa_look_factor``), so the p-value that decides is
    # the raw one times k (k + 1).
    look = max(1, int(state.get("iteration") or 1))
    raw_p, spa_trials = run_spa(
        series | screened,
        bench,
        seed=ctx.config.seed,
        resolve=ctx.criteria.spa_threshold / spa_look_factor(look),
    )
    spa_p = spa_over_looks(raw_p, look)
    return look, raw_p, spa_trials, spa_p


def _best_so_far(
    ctx: RunContext,
    best: BestSoFar | None,
    evaluations: list[Evaluation],
    series: Mapping[str, Mapping[str, float]],
) -> BestSoFar | None:
    """The best variant so far: the kept one (graded anew if from before the graded measure)
    or this iteration's top, with its portfolio returns, when it ranks higher."""
    if best is not None and best.progress == 0.0 and best.metrics is not None:
        # A best kept from before the graded measure (a resumed run): grade it as today's are.
        graded = variant_progress(ctx.criteria, best.metrics, best.alpha, best.veto_kinds)
        best = best.model_copy(update={"progress": graded})
    top = best_evaluation(evaluations)
    if top is not None and (best is None or best_evaluation([best, top]) is top):
        rets = dated_returns(series[top.variant_id])  # the run series, computed once
        best = BestSoFar(
            **dict(top), portfolio=Series(dates=index_keys(rets.index), values=rets.tolist())
        )
    return best


def _report(
    ctx: RunContext,
    state: DevelopState,
    evaluations: list[Evaluation],
    ledger: TrialLedger,
    *,
    look: int,
    raw_p: float | None,
    spa_p: float | None,
    trials: int,
) -> None:
    """The gate's progress line: passes, best score, trials and the reality check."""
    n_passed = sum(e.passed for e in evaluations)
    ctx.progress.stage(
        "gate",
        f"iteration {state['iteration']}: {n_passed}/{len(evaluations)} passed; best score "
        f"{max((e.score for e in evaluations), default=0):.3f} (progress "
        f"{max((e.progress for e in evaluations), default=0):.3f}); trials counted {ledger.n_trials} "
        f"({ledger.n_effective} effective); "
        f"SPA p vs {ctx.benchmark.name} {_p(spa_p)} over {trials} trials "
        f"(look {look}: raw {_p(raw_p)} x {spa_look_factor(look)})",
    )


def _p(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _run_series(
    ctx: RunContext,
    state: DevelopState,
    results: list[BacktestResult],
    current: list[str],
) -> dict[str, dict[str, float]]:
    """Portfolio return series of every variant run so far, by variant id.

    Kept in the run context; what is missing (a resumed run) is read back from the run
    folder's ``backtests/<variant_id>/`` files, so the figure never depends on a resume.
    """
    cache = ctx.memo.variant_series
    for vid in current:
        cache[vid] = portfolio_series([r for r in results if r.variant_id == vid])
    for vid in state.get("all_variants", {}):
        if vid in cache:
            continue
        folder = ctx.run.path(f"backtests/{vid}")
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        cache[vid] = portfolio_series(
            [BacktestResult.model_validate_json(f.read_text(encoding="utf-8")) for f in files]
        )
    return cache


def _lookahead_check(
    ctx: RunContext, variants: list[StrategyVariant], reports: dict[str, LookaheadReport]
) -> LookaheadCheck:
    """The check the gate runs on every variant about to pass (truncated re-runs); each
    report is kept in ``reports`` for the run folder, and the gate judges it.

    Static validation already refused visible tricks such as ``close[1]``; this catches what
    only shows when the future is cut off. One symbol and the last in-sample fold suffice:
    lookahead is a property of the code. A portfolio variant is checked on its whole
    universe, its feeds cut together. A family that embeds alternative data gives each
    truncated run its table cut at the run's last bar (``_alt_data_cuts``).
    """
    code_by_id = {v.variant_id: v.code for v in variants}
    variant_by_id = {v.variant_id: v for v in variants}
    symbol, fold = ctx.symbols[0], ctx.folds[-1]

    def check(ev: VariantEvaluation) -> tuple[LookaheadReport, str]:
        code = code_by_id[ev.variant_id]
        on = PORTFOLIO if whole_universe(_scope(variant_by_id[ev.variant_id])) else symbol
        bars = job_bars(ctx, on, code=code)
        report = check_lookahead(
            code,
            bars,
            timeout_s=scaled_timeout(bars),  # the scored job's own limit
            fold=fold,
            costs=ctx.config.costs,
            executor=ctx.executor,
            symbol=on,
            # the scored job's ids: a check run carries nothing a scored run does not
            job_id=job_id(0, ev.variant_id, on, fold.index),
            variant_id=ev.variant_id,
            code_at=_alt_data_cuts(ctx, variant_by_id[ev.variant_id]),
        )
        reports[ev.variant_id] = report
        ctx.progress.stage(
            "lookahead",
            f"{ev.variant_id}: {_verdict_word(report)} "
            f"({report.n_cuts} cuts, {report.duration_s:.1f}s)",
        )
        return report, symbol

    return check


def _scope(variant: StrategyVariant) -> str:
    """The variant's scope as its family's plugin says (a family no plugin owns any more,
    say a resumed run's toy: the spec's own)."""
    try:
        return registry().scope_of(variant.spec)
    except KeyError:
        return variant.spec.scope


def _alt_data_cuts(ctx: RunContext, variant: StrategyVariant) -> Callable[[date], str] | None:
    """Day -> the variant's source with the alternative data known by that day's close, when
    its plugin renders it (``code_through``) and reproduces the scored code through the
    in-sample end; else None (every check run gets the scored code, as before), with a
    warning when the plugin could have cut the data but did not reproduce the code."""
    code_at = registry().code_at(ctx, variant.spec)
    if code_at is None:
        return None
    try:
        same = code_at(ctx.split.insample_end) == variant.code
    except Exception as exc:  # an alt-data read error: the check runs as before, and says so
        same, why = False, f"{type(exc).__name__}: {exc}"[:200]
    else:
        why = "its family renders other code from the data now"
    if not same:
        ctx.progress.warn(
            f"lookahead {variant.variant_id}: its alternative data are not cut per truncated "
            f"run ({why}); every run gets the scored code"
        )
        return None
    return code_at


def _verdict_word(report: LookaheadReport) -> str:
    if report.integrity:
        return "INTEGRITY ERROR"
    return "BIASED" if report.biased else "clean" if report.checked else "unchecked"


def failure_analysis(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """FAILURE: classify why no variant passed (the LLM may refine the rules analysis)."""
    ctx = runtime.context
    synthesis = state.get("synthesis")
    evaluations = state.get("evaluations", [])
    analysis = analyse_failure(
        evaluations,
        criteria=ctx.criteria,
        history=state.get("history", []),
        research_confidence=synthesis.confidence if synthesis else 0.0,
        research_coverage=synthesis.coverage if synthesis else None,
        regime=synthesis.regime.value if synthesis else "",
        families=sorted({e.family for e in evaluations}),
    )
    if ctx.llm is not None:
        top = best_evaluation(evaluations)
        m = top.metrics if top else None
        a = top.alpha if top else None
        facts = (
            f"{len(evaluations)} variants, none passed; best {top.variant_id if top else None} "
            f"({top.family if top else None}) score {top.score if top else None}, DSR "
            f"{top.dsr if top else None}, sharpe {m.sharpe if m else None}, max_dd "
            f"{m.max_drawdown_pct if m else None}, trades {m.n_trades if m else None}; against "
            f"{ctx.benchmark.name}: beta {a.beta if a else None}, alpha t "
            f"{a.t_stat if a else None}, deflated alpha {a.deflated_alpha if a else None}; "
            f"criteria " + ", ".join(f"{c.metric}{c.op}{c.threshold}" for c in ctx.criteria.rules)
        )
        log = llm_logger(ctx, iteration=state["iteration"], route=_origin(state))
        analysis = llm_failure(ctx.llm, analysis, facts=facts, log=log)
    ctx.progress.stage(
        "failure",
        f"{analysis.failure_type.value} ({analysis.confidence:.2f}): {analysis.root_cause}",
    )
    return {"failure": analysis}


def _origin(state: DevelopState) -> Route:
    """What built the variants under evaluation (the router has not decided yet)."""
    return Route(state.get("route", Route.INITIAL))


def _summary(state: DevelopState, route: Route) -> IterationSummary:
    params = {vid: v.spec.parameters for vid, v in state.get("all_variants", {}).items()}
    return summarise_iteration(
        state["iteration"], state.get("evaluations", []), route=route, parameters=params
    )


def trajectory(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """TRAJECTORY: whether the iterations converge, diverge, oscillate or stagnate."""
    ctx = runtime.context
    # The current iteration's route is not decided yet; the analysis reads scores and metrics.
    history = [*current_line(state.get("history", [])), _summary(state, Route.TUNE)]
    analysis = analyse_trajectory(
        history, score_threshold=ctx.criteria.score_threshold, criteria=ctx.criteria
    )
    if analysis is not None:
        ctx.progress.stage("trajectory", f"{analysis.status.value}: {analysis.reasoning}")
    return {"trajectory": analysis}


def router(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """ROUTER: record the iteration's gate decision and choose the next route (SUCCESS, TUNE, FIX,
    REFINE, RESEARCH or ABANDON)."""
    ctx = runtime.context
    cfg = ctx.config
    iteration = state["iteration"]
    counters = (state.get("counters") or LoopCounters()).model_copy(update={"iteration": iteration})
    evaluations = state.get("evaluations", [])
    failure, traj = state.get("failure"), state.get("trajectory")
    budget = contaminated = None
    if ctx.llm is not None:
        budget = Budget(
            exhausted=ctx.llm.exhausted, used=ctx.llm.tokens_used, limit=ctx.llm.settings.max_tokens
        )
        leaks = ctx.llm.leak_stats()
        if leaks["contaminated"]:
            contaminated = (
                f"{leaks['leaked']} of {leaks['audited']} LLM answers named what "
                f"the masked prompts did not show (rate {leaks['leak_rate']:.1%} > "
                f"{leaks['contaminated_above']:.0%})"
            )
    route, reason = decide_route(
        any_passed=any(e.passed for e in evaluations),
        failure=failure,
        trajectory=traj,
        counters=counters,
        limits=cfg.limits,
        budget=budget,
        research=_research_outlook(ctx, state, failure),
        pursuit=pursuit_of(state.get("best") or best_evaluation(evaluations), ctx.criteria),
        contaminated=contaminated,
    )
    ledger = state.get("ledger") or TrialLedger()
    spa = state.get("spa") or SpaResult()
    top = best_evaluation(evaluations)
    decision = GateDecision(
        iteration=iteration,
        decision=route,
        best_variant_id=top.variant_id if top else None,
        evaluations=[VariantEvaluation(**dict(e)) for e in evaluations],
        failure=failure,
        trajectory=traj,
        reasoning=reason,
        actions=failure.actions if failure else [],
        n_trials=ledger.n_trials,
        spa_pvalue=spa.pvalue,
        spa_trials=spa.trials,
    )
    _record_iteration(ctx, state, decision)
    remember_gate_outcome(ctx, state, decision)  # lessons for later runs; never raises
    log_usage(ctx, iteration=iteration, route=_origin(state))
    history = [*state.get("history", []), _summary(state, route)]
    ctx.progress.stage("route", f"iteration {iteration} -> {route.value}: {reason}")

    update: dict[str, Any] = {"decisions": [decision], "history": history, "route": route}
    nxt = advance(counters, route, cfg.limits)
    if nxt is not None:
        update["iteration"] = nxt.iteration
        update["counters"] = nxt
    if route == Route.RESEARCH:
        update["feedback"] = [*state.get("feedback", []), reason]
    return update


def _research_outlook(
    ctx: RunContext, state: DevelopState, failure: FailureAnalysis | None
) -> ResearchOutlook:
    """Whether a research round now could change the plan: the study the next round would
    run for this failure, and whether the last round changed anything."""
    last = state.get("synthesis")
    nxt = plan_next(
        ctx,
        research_round=state.get("research_round", 0) + 1,
        failure=failure,
        done=list(state.get("research_studies") or []),
        previous=state.get("data_brief"),
        ranking=[r.symbol for r in last.universe_ranking] if last else [],
    )
    return research_outlook(nxt, last_changed=state.get("research_changed"))


def _record_iteration(ctx: RunContext, state: DevelopState, decision: GateDecision) -> None:
    """One JSONL record per variant × symbol, then one for the gate decision."""
    now = datetime.now(UTC).isoformat()
    common = {
        "run_id": ctx.run.root.name,
        "iteration": decision.iteration,
        "route": _origin(state),
        "recorded_at": now,
    }
    evals = {e.variant_id: e for e in decision.evaluations}
    results = load_results(ctx, state.get("results", []))  # what the gate loaded: no re-read
    for variant in state.get("variants", []):
        ev = evals.get(variant.variant_id)
        for symbol in job_symbols(variant.spec, ctx.symbols):
            rs = sorted(
                (r for r in results if r.variant_id == variant.variant_id and r.symbol == symbol),
                key=lambda r: r.fold,
            )
            ok = [r for r in rs if r.status == JobStatus.OK]
            metrics, fold_sharpes, _ = aggregate_variant(ok, periods_per_year=ctx.periods_per_year)
            append_record(
                ctx.run.tracker,
                BacktestRecord(
                    **common,
                    variant_id=variant.variant_id,
                    parent_id=variant.parent_id,
                    name=variant.spec.name,
                    family=variant.spec.family.value,
                    trial_key=variant.spec.trial_key(),
                    parameters=variant.spec.parameters,
                    code_sha256=variant.code_sha256,
                    symbol=symbol,
                    symbols=ctx.symbols if symbol == PORTFOLIO else [symbol],
                    data_sha256=data_sha256(ctx, symbol, variant.code),
                    folds=[
                        FoldRecord(fold=r.fold, status=r.status, error=r.error, metrics=r.metrics)
                        for r in rs
                    ],
                    fold_sharpes=fold_sharpes,
                    status="ok"
                    if len(ok) == len(rs) and rs
                    else ("error" if not ok else "partial"),
                    metrics=metrics,
                    gate_score=ev.score if ev else None,
                    gate_alpha=ev.alpha if ev else None,
                    gate_passed=ev.passed if ev else False,
                    gate_vetoes=ev.vetoes if ev else [],
                    gate_veto_kinds=ev.veto_kinds if ev else [],
                    gate_decision=decision.decision,
                ),
            )
    best = evals.get(decision.best_variant_id or "")
    append_record(
        ctx.run.tracker,
        GateRecord(
            **common,
            gate_decision=decision.decision,
            variant_id=decision.best_variant_id,
            symbols=ctx.symbols,
            metrics=best.metrics if best else None,
            gate_score=max((e.score for e in decision.evaluations), default=None),
            benchmark=ctx.benchmark.name,
            alpha=best.alpha if best else None,
            spa_pvalue=decision.spa_pvalue,
            decision=decision,
        ),
    )
