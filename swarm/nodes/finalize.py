"""End of the loop: open the sealed holdout once for a winner, then write verdict, charts, report."""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from langgraph.runtime import Runtime

from backtest.benchmark import returns_metrics
from backtest.contracts import BacktestJob, JobStatus, Metrics
from backtest.job_timeout import scaled_timeout
from backtest.period_keys import index_keys
from backtest.trade_list import trades_from_trace_fills
from experiments.charts import (
    draw_sensitivity,
    plot_cpcv_sharpes,
    plot_equity,
    plot_trajectory,
    plot_trial_sharpes,
    trial_chart_counts,
)
from experiments.dataset_ledger import (
    OFF,
    LedgerFileError,
    ledger_folder,
    record,
    recorded_run,
    run_data_key,
)
from experiments.export import lineage_of, write_export
from experiments.records import (
    VARIANTS,
    AlphaSummary,
    BenchmarkInfo,
    DataSummary,
    Figures,
    HoldoutRecord,
    HoldoutResult,
    InSample,
    Series,
    TrialSharpes,
    VariantEntry,
    Verdict,
    append_record,
)
from experiments.report import render_report
from experiments.scorecard import trades_kind
from experiments.tearsheet import INPUTS, tearsheet_inputs, write_tearsheet
from gate.aggregate import aggregate_variant, portfolio_series
from gate.alpha import aligned_stats, deflated_alpha
from gate.contracts import Route
from gate.evaluate import deflated_sharpe_of
from gate.ledger import TrialLedger
from gate.stats import expected_max_sharpe
from strategies.spec import StrategySpec
from strategies.taxonomy import within_directive
from swarm.analyze.family import holdout_note, with_holdout_code
from swarm.context import RunContext
from swarm.families import registry
from swarm.nodes.backtest import PORTFOLIO, data_sha256, job_bars, job_symbols
from swarm.nodes.gate import dated_returns
from swarm.nodes.variants import with_code
from swarm.regime_data import reproduce_data
from swarm.state import BestSoFar, DevelopState, StoredVariant

log = logging.getLogger(__name__)

CPCV_CHART = "charts/cpcv_sharpes.png"
# What variants.json keeps of each variant's gate evaluation (with its iteration).
IN_SAMPLE_FIELDS = tuple(f for f in InSample.model_fields if f != "iteration")


def holdout(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run the winner once on the sealed holdout. Nothing here feeds back into the search."""
    ctx = runtime.context
    cfg = ctx.config
    winner_id = state["best"].variant_id
    entry = state["all_variants"][winner_id]
    # Its family's holdout code: a decision-pipeline winner gets the holdout's decisions only now.
    variant = registry().holdout_variant(ctx, with_code(ctx, entry))
    fold = ctx.holdout_fold
    ctx.progress.stage(
        "holdout", f"opening the sealed holdout {fold.start} .. {fold.end} for {winner_id}"
    )
    jobs = [
        BacktestJob(
            job_id=f"{winner_id}|{symbol}|holdout",
            variant_id=winner_id,
            code=variant["code"],
            symbol=symbol,
            # a portfolio winner: every symbol at once; a regime filter's index feed added
            bars=(bars := job_bars(ctx, symbol, holdout=True, code=variant["code"])),
            fold=fold,
            costs=cfg.costs,
            periods_per_year=ctx.periods_per_year,
            timeout_s=scaled_timeout(bars),
        )
        for symbol in job_symbols(entry.spec, ctx.symbols)
    ]
    results = ctx.executor.map(jobs)
    ok = [r for r in results if r.status == JobStatus.OK]
    metrics, _, _ = aggregate_variant(ok, periods_per_year=ctx.periods_per_year)
    bh_rets = ctx.benchmark.window_returns(fold.start, fold.end, costs=cfg.costs)
    bh = returns_metrics(bh_rets, periods_per_year=ctx.periods_per_year)
    rets = dated_returns(portfolio_series(results))
    alpha = aligned_stats(
        dict(zip(index_keys(rets.index), rets.tolist(), strict=True)),
        None if ctx.benchmark.is_cash else {str(k): float(v) for k, v in bh_rets.items()},
        name=ctx.benchmark.name,
        periods_per_year=ctx.periods_per_year,
    )
    for r in results:
        append_record(
            ctx.run.tracker,
            HoldoutRecord(
                run_id=ctx.run.root.name,
                iteration=state["iteration"],
                variant_id=winner_id,
                symbol=r.symbol,
                symbols=ctx.symbols if r.symbol == PORTFOLIO else [r.symbol],
                status=r.status,
                error=r.error,
                metrics=r.metrics,
                gate_score=state["best"].score,
                data_sha256=data_sha256(ctx, r.symbol, variant["code"]),
                code_sha256=variant["code_sha256"],
                parent_id=entry.parent_id,
                recorded_at=datetime.now(UTC).isoformat(),
            ),
        )
    ctx.progress.stage(
        "holdout",
        f"sharpe {_f(metrics.sharpe if metrics else None)} vs {ctx.benchmark.name} "
        f"{_f(bh.sharpe if bh else None)}; alpha {_f(alpha.alpha_annual_pct)}% a year, beta "
        f"{_f(alpha.beta)}, HAC t {_f(alpha.t_stat)}",
    )
    return {
        "holdout": HoldoutResult(
            variant_id=winner_id,
            start=fold.start,
            end=fold.end,
            metrics=metrics,
            buy_and_hold=bh,  # the run's benchmark
            alpha=alpha,
            per_symbol={r.symbol: r.metrics or r.error for r in results},
            returns=Series(dates=index_keys(rets.index), values=rets.tolist()),
            buy_and_hold_returns=Series(
                dates=[str(d) for d in bh_rets.index], values=bh_rets.tolist()
            ),
        ),
        "n_backtests": state.get("n_backtests", 0) + len(results),
    }


def finalize(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The run's verdict and its files: variants.json, verdict.json, the charts, the export of
    a winner, report.md and the tear sheet (each written by its own function below)."""
    ctx = runtime.context
    decisions = state.get("decisions", [])
    success = state.get("route") == Route.SUCCESS
    best_eval = state.get("best")
    best_id = best_eval.variant_id if best_eval else None
    stored = state.get("all_variants", {})
    # Every variant as variants.json holds it: with its (sha256-verified) source.
    variants = {
        vid: VariantEntry(**dict(v), code=ctx.run.read_code(vid, v.code_sha256))
        for vid, v in stored.items()
    }
    # The winner as the export and the report read it (variants.json's entry, no figures:
    # a copy, before _with_in_sample below sets them), and its JSON for the charts.
    best_entry = variants[best_id].model_copy() if best_id in variants else None
    best_variant = best_entry.model_dump(mode="json", exclude={"in_sample"}) if best_entry else None
    ledger = state.get("ledger") or TrialLedger()
    h = state.get("holdout")
    figures, windows, bh_in = _figures(ctx, best_eval, h, best_variant)
    _with_in_sample(variants, decisions)
    trials = _trial_sharpes(best_eval, ledger, ctx.periods_per_year)
    verdict = _verdict(
        ctx,
        state,
        success=success,
        best_variant=best_variant,
        ledger=ledger,
        figures=figures,
        bh_in=bh_in,
        trials=trials,
    )
    verdict_json = verdict.model_dump(mode="json")
    run = ctx.run
    # Through the model: the file is what `python -m experiments.check` and the export read.
    run.write_json("variants.json", VARIANTS.dump_python(variants, mode="json"))
    run.write_json("verdict.json", verdict_json)
    _record_in_ledger(ctx, verdict.verdict, ledger)
    if ctx.llm is not None:
        ctx.llm.write_calls(run.path("llm_calls.jsonl"))
    figures_on = ctx.config.figures  # --no-figures: neither charts nor the tear sheet
    charts = (
        _charts(ctx, state, verdict_json, windows, trials, best_id, best_variant)
        if figures_on
        else None
    )
    if success and best_entry:
        _export(ctx, verdict, best_entry, stored)
    _report(ctx, state, verdict, best_eval, best_entry, charts, h)
    if figures_on and windows and best_id:
        _tearsheet(ctx, best_id, best_variant, windows)
    ctx.progress.stage(
        "done",
        f"{verdict.verdict} after {verdict.iterations} iteration(s), {verdict.n_backtests} "
        f"backtests, {verdict.n_trials} trials ({verdict.n_trials_effective} effective); best "
        f"{best_id or '–'}",
    )
    return {"verdict": verdict}


def _figures(
    ctx: RunContext, best_eval: BestSoFar | None, h: Any, best_variant: dict[str, Any] | None
) -> tuple[dict[str, Figures], dict[str, tuple[pd.Series, pd.Series]], Any]:
    """The winner's in-sample and holdout figures beside the benchmark's (with what it takes
    to re-run each holdout symbol outside the lab), their return windows for the charts, and
    the benchmark's in-sample metrics."""
    figures: dict[str, Figures] = {}
    bench_in = ctx.benchmark_insample()
    bh_in_rets = pd.Series(list(bench_in.values()), index=pd.to_datetime(list(bench_in)))
    bh_in = returns_metrics(bh_in_rets, periods_per_year=ctx.periods_per_year)
    windows: dict[str, tuple[pd.Series, pd.Series]] = {}
    if best_eval and best_eval.portfolio:
        figures["in-sample"] = Figures(
            metrics=best_eval.metrics, buy_and_hold=bh_in, alpha=best_eval.alpha
        )
        windows["in-sample"] = (_series(best_eval.portfolio), bh_in_rets)
    if h is not None:
        fold = ctx.holdout_fold
        figures["holdout"] = Figures(
            metrics=h.metrics,
            buy_and_hold=h.buy_and_hold,
            alpha=h.alpha,
            # Enough to re-run each symbol outside the lab and compare final values.
            reproduce={
                "from": fold.warmup_start.isoformat(),
                "trade_start": fold.start.isoformat(),
                "to": fold.end.isoformat(),
                "runs": {
                    s: {
                        # the traded file(s), then a regime filter's index file(s)
                        "data": reproduce_data(
                            ctx,
                            [ctx.data[x].path for x in ctx.symbols]
                            if s == PORTFOLIO
                            else ctx.data[s].path,
                            best_variant and best_variant.get("code"),
                        ),
                        "final_value": m.final_value,
                    }
                    for s, m in h.per_symbol.items()
                    if isinstance(m, Metrics)
                },
            },
        )
        windows["holdout"] = (_series(h.returns), _series(h.buy_and_hold_returns))
    return figures, windows, bh_in


def _with_in_sample(variants: dict[str, VariantEntry], decisions: list[Any]) -> None:
    """Every variant's own in-sample figures, so any of them can be exported with its numbers."""
    for d in decisions:
        for e in d.evaluations:
            if e.variant_id in variants:
                variants[e.variant_id].in_sample = InSample(
                    iteration=d.iteration, **{f: getattr(e, f) for f in IN_SAMPLE_FIELDS}
                )


def _verdict(
    ctx: RunContext,
    state: DevelopState,
    *,
    success: bool,
    best_variant: dict[str, Any] | None,
    ledger: TrialLedger,
    figures: dict[str, Figures],
    bh_in: Any,
    trials: dict[str, Any],
) -> Verdict:
    """The run's verdict as verdict.json holds it."""
    cfg = ctx.config
    decisions = state.get("decisions", [])
    last = decisions[-1] if decisions else None
    best_eval = state.get("best")
    best_id = best_eval.variant_id if best_eval else None
    h, spa = state.get("holdout"), state.get("spa")
    return Verdict(
        verdict="SUCCESS" if success else "ABANDON",
        reason="; ".join(
            filter(None, [last.reasoning if last else "no iteration completed", holdout_note(ctx)])
        ),
        iterations=len(decisions),
        best_variant=best_id,
        # A winner from a family the directive did not name is allowed, and said.
        outside_directive=bool(
            best_variant
            and not within_directive(
                best_variant["spec"], list(cfg.styles or cfg.preferred_families)
            )
        ),
        n_backtests=state.get("n_backtests", 0),
        n_trials=ledger.n_trials,
        n_trials_effective=ledger.n_effective,
        deflated_by="effective" if ledger.deflate_effective else "raw",
        **_ledger_fields(cfg, ledger),
        best_dsr=best_eval.dsr if best_eval else None,
        best_score=best_eval.score if best_eval else None,
        # The same deflated_sharpe_of the gate selected with, now over every trial of the run.
        best_dsr_all_trials=deflated_sharpe_of(best_eval.metrics if best_eval else None, ledger),
        best_deflated_alpha_all_trials=_deflated_alpha_all_trials(best_eval, ledger),
        pbo=state.get("pbo"),
        pbo_variants=state.get("pbo_variants", 0),
        score_threshold=ctx.criteria.score_threshold,
        dsr_threshold=ctx.criteria.dsr_threshold,
        route_history=[d.decision for d in decisions],
        figures=figures,
        buy_and_hold_in_sample=bh_in,  # the run's benchmark (kept for old readers)
        benchmark=BenchmarkInfo(
            name=ctx.benchmark.name,
            description=ctx.benchmark.describe(),
            in_sample=bh_in,
            holdout=h.buy_and_hold if h else None,
        ),
        best_alpha=_best_alpha(best_eval),
        holdout_alpha=h.alpha if h else None,
        spa_pvalue=spa.pvalue if spa else None,
        spa_trials=spa.trials if spa else 0,
        spa_raw_pvalue=spa.raw_pvalue if spa else None,
        spa_looks=spa.look if spa else 1,
        deflated_alpha_threshold=ctx.criteria.deflated_alpha_threshold,
        spa_threshold=ctx.criteria.spa_threshold,
        trial_sharpes=TrialSharpes(**{k: v for k, v in trials.items() if k != "values"}),
        llm_masking=_llm_masking(ctx),
        cpcv=state.get("cpcv"),
    )


def _charts(
    ctx: RunContext,
    state: DevelopState,
    verdict_json: dict[str, Any],
    windows: dict[str, tuple[pd.Series, pd.Series]],
    trials: dict[str, Any],
    best_id: str | None,
    best_variant: dict[str, Any] | None,
) -> list[str]:
    """The run's charts (trajectory, equity, trial Sharpes, the screen's sensitivity), the
    ones drawn, as report.md links them."""
    run = ctx.run
    thresholds = {c.metric: c.threshold for c in ctx.criteria.rules}
    charts = []
    if state.get("history"):
        plot_trajectory(
            [h.model_dump(mode="json") for h in state["history"]],
            thresholds,
            ctx.criteria.score_threshold,
            run.path("charts/trajectory.png"),
            dsr_threshold=ctx.criteria.dsr_threshold,
            min_trades=ctx.criteria.min_trades,
            **_alpha_thresholds(ctx),
        )
        charts.append("charts/trajectory.png")
    if windows:
        plot_equity(
            windows,
            benchmark=ctx.benchmark.name,
            path=run.path("charts/equity.png"),
            title=f"{best_id}: equal-weight portfolio vs {ctx.benchmark.describe()}",
        )
        charts.append("charts/equity.png")
    if trials["values"]:
        plot_trial_sharpes(
            trials["values"],
            **trial_chart_counts(verdict_json),
            path=run.path("charts/trial_sharpes.png"),
        )
        charts.append("charts/trial_sharpes.png")
    cpcv = state.get("cpcv")
    if cpcv is not None and cpcv.path_sharpes:
        plot_cpcv_sharpes(
            cpcv.path_sharpes,
            path=run.path(CPCV_CHART),
            median=cpcv.median,
            p5=cpcv.p5,
            in_sample_best=trials["best"],
        )
        charts.append(CPCV_CHART)
    # The screen's records are in the run folder; a run that screened nothing draws nothing.
    if (drawn := draw_sensitivity(run.root, (best_variant or {}).get("spec"))) is not None:
        charts.append(drawn)
    return charts


def _export(
    ctx: RunContext,
    verdict: Verdict,
    best: VariantEntry,
    stored: dict[str, StoredVariant],
) -> None:
    """The winner's folder: its code (the holdout's when its family regenerated it), costs,
    figures and lineage."""
    held = with_holdout_code(ctx, best.model_dump(mode="json", exclude={"in_sample"}))
    write_export(
        ctx.run.path("winner"),
        variant=VariantEntry.model_validate(held),
        class_name=best.class_name,
        costs=ctx.config.costs,
        figures=verdict.figures,
        lineage=lineage_of(best.variant_id, {vid: v.parent_id for vid, v in stored.items()}),
        run_dir=ctx.run.root,
        trades=trades_kind(best.spec, len(ctx.symbols)),
    )


def _report(
    ctx: RunContext,
    state: DevelopState,
    verdict: Verdict,
    best_eval: BestSoFar | None,
    best_variant: VariantEntry | None,
    charts: list[str] | None,
    h: HoldoutResult | None,
) -> None:
    """report.md, from the verdict and the run's records (``charts`` None: --no-figures)."""
    run = ctx.run
    run.write_text(
        "report.md",
        render_report(
            run_id=run.root.name,
            config=ctx.config,
            # The criteria the gate used, not the text re-read: --criteria lays it over defaults.
            criteria=ctx.criteria,
            verdict=verdict,
            decisions=state.get("decisions", []),
            synthesis=state.get("synthesis"),
            data=DataSummary.model_validate(ctx.memo.data_summary),
            best_variant=best_variant,
            best_eval=best_eval,
            figures=verdict.figures,
            charts=charts,
            n_records=sum(1 for _ in run.tracker.records()),
            holdout_per_symbol={
                s: m for s, m in (h.per_symbol if h else {}).items() if isinstance(m, Metrics)
            },
        ),
    )


def _tearsheet(
    ctx: RunContext,
    best_id: str,
    best_variant: dict[str, Any] | None,
    windows: dict[str, tuple[pd.Series, pd.Series]],
) -> None:
    """``tearsheet.json`` and ``tearsheet.html``: extras, so a failure is a warning line and
    the run (verdict, report, export) stands."""
    try:
        trades = _best_trades(ctx, best_variant) if best_variant else None
        inputs = tearsheet_inputs(
            windows,
            variant_id=best_id,
            benchmark=ctx.benchmark.name,
            trades=trades,
            periods_per_year=ctx.periods_per_year,
        )
        ctx.run.write_json(INPUTS, inputs)
        write_tearsheet(ctx.run.root)
    except Exception as exc:  # noqa: BLE001 - the run must not be lost to its tear sheet
        log.warning("tear sheet not written (%s: %s)", type(exc).__name__, exc)
        ctx.progress.stage("warning", f"tear sheet not written ({type(exc).__name__}: {exc})")


def _best_trades(ctx: RunContext, variant: dict[str, Any]) -> list[dict[str, Any]]:
    """The winner's in-sample trades: each fold re-run once with the trace (the stored results
    keep only trade pnls), its fills paired flat to flat (``backtest.trade_list``)."""
    code = variant["code"]
    symbols = job_symbols(StrategySpec.model_validate(variant["spec"]), list(ctx.symbols))
    jobs = [
        BacktestJob(
            job_id=f"{variant['variant_id']}|{symbol}|f{fold.index}|trades",
            variant_id=variant["variant_id"],
            code=code,
            symbol=symbol,
            bars=(bars := job_bars(ctx, symbol, code=code)),
            fold=fold,
            costs=ctx.config.costs,
            periods_per_year=ctx.periods_per_year,
            timeout_s=scaled_timeout(bars),
        )
        for symbol in symbols
        for fold in ctx.folds
    ]
    trades: list[dict[str, Any]] = []
    for job, future in [(job, ctx.executor.submit_trace(job)) for job in jobs]:
        rows = (future.result().trace or {}).get("fills") or []
        trades += [t.model_dump() for t in trades_from_trace_fills(job.symbol, rows)]
    return sorted(trades, key=lambda t: (t["entry_date"], t["symbol"]))


def _series(s: Series) -> pd.Series:
    return pd.Series(s.values, index=pd.to_datetime(s.dates), dtype=float)


def _best_alpha(best_eval: BestSoFar | None) -> AlphaSummary | None:
    alpha = best_eval.alpha if best_eval else None
    if alpha is None:
        return None
    return AlphaSummary(**alpha.model_dump(include=set(AlphaSummary.model_fields)))


def _deflated_alpha_all_trials(best_eval: BestSoFar | None, ledger: TrialLedger) -> float | None:
    """The best variant's deflated alpha for every trial the run made."""
    alpha = best_eval.alpha if best_eval else None
    if alpha is None:
        return None
    return deflated_alpha(
        alpha, trial_variance=ledger.trial_alpha_variance(), n_trials=ledger.deflation_trials()
    )


def _ledger_fields(cfg: Any, ledger: TrialLedger) -> dict[str, Any]:
    """The verdict's account of the trial ledger across runs on this data."""
    if cfg.ledger_dir == OFF:
        return {"ledger": "off"}
    if ledger.earlier is None:  # opted out, or a run started before the ledger existed
        return {"ledger": "fresh"} if cfg.fresh_ledger else {}
    raw, eff = ledger.cumulative_trials()
    return {
        "ledger": "counted",
        "earlier_runs": len(ledger.earlier.runs),
        "n_trials_cumulative": raw,
        "n_trials_effective_cumulative": eff,
    }


def _record_in_ledger(ctx: RunContext, verdict: str, ledger: TrialLedger) -> None:
    """Add this run's own trials to its dataset's ledger, for the runs after it (a resumed
    run's entry is replaced, not added twice). A ledger that cannot be written is a warning:
    the run's own results are already on disk."""
    folder = ledger_folder(ctx.config.ledger_dir)
    if folder is None:
        return
    key = ledger.data_key or ctx.data_key or run_data_key(ctx.config, ctx.data)
    try:
        record(folder, key, recorded_run(ctx.run.root.name, verdict, ledger))
    except (OSError, LedgerFileError) as exc:
        ctx.progress.warn(f"the trial ledger in {folder} was not updated: {exc}")


def _trial_sharpes(
    best_eval: BestSoFar | None, ledger: TrialLedger, periods_per_year: int
) -> dict[str, Any]:
    """Every trial's Sharpe and the deflation threshold, annualised for reading.

    The threshold is the Sharpe the best of N pure-noise trials is expected to reach:
    E[max of N standard normals] x the trials' Sharpe standard deviation (the SR0 the
    deflated Sharpe ratio tests against).
    """
    scale = math.sqrt(periods_per_year)
    values = [float(v) * scale for v in ledger.sharpes()]
    threshold = None
    n = ledger.deflation_trials()  # the N and V the DSR deflates with
    if n >= 1:
        threshold = float(expected_max_sharpe(n) * math.sqrt(ledger.deflation_variance()) * scale)
    m = best_eval.metrics if best_eval else None
    best = float(m.sharpe_per_period) * scale if m and m.sharpe_per_period is not None else None
    return {
        "values": values,
        "threshold": threshold,
        "best": best,
        "n_trials": n,
        "n_with_sharpe": len(values),
        "unit": "annualised",
    }


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _alpha_thresholds(ctx: RunContext) -> dict[str, float]:
    """The deflated-alpha and SPA bars for the trajectory chart; none against cash, where
    the deflated Sharpe is the test."""
    if ctx.benchmark.is_cash:
        return {}
    return {
        "deflated_alpha_threshold": ctx.criteria.deflated_alpha_threshold,
        "spa_threshold": ctx.criteria.spa_threshold,
    }


def _llm_masking(ctx: RunContext) -> dict[str, Any] | None:
    """Issue 29's account of an LLM run: the mask policy and the leak audit's counts."""
    if ctx.llm is None:
        return None
    from swarm.llm.cutoff import policy_for

    policy = policy_for(ctx.config.llm_settings, ctx.config.start)
    return (policy.summary() if policy else {}) | {"leaks": ctx.llm.leak_stats()}
