"""End of the loop: open the sealed holdout once for a winner, then write verdict, charts, report."""

from __future__ import annotations

from typing import Any

import pandas as pd
from langgraph.runtime import Runtime

from backtest.benchmark import buy_and_hold_metrics
from backtest.contracts import BacktestJob, JobStatus
from experiments.charts import plot_equity, plot_trajectory
from experiments.export import lineage_of, write_export
from experiments.report import render_report
from gate.aggregate import aggregate_variant
from gate.contracts import Route
from gate.ledger import TrialLedger
from gate.stats import deflated_sharpe_ratio
from swarm.context import RunContext
from swarm.nodes.gate import portfolio_series
from swarm.state import DevelopState


def holdout(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run the winner once on the sealed holdout. Nothing here feeds back into the search."""
    ctx = runtime.context
    cfg = ctx.config
    winner_id = state["best"]["variant_id"]
    variant = state["all_variants"][winner_id]
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
            bars=ctx.data[symbol].bars,
            fold=fold,
            costs=cfg.costs,
            periods_per_year=ctx.periods_per_year,
        )
        for symbol in ctx.symbols
    ]
    results = ctx.executor.map(jobs)
    ok = [r for r in results if r.status == JobStatus.OK]
    metrics, _, _ = aggregate_variant(ok, periods_per_year=ctx.periods_per_year)
    bh, bh_rets = buy_and_hold_metrics(
        {s: ctx.data[s].bars for s in ctx.symbols}, fold.start, fold.end,
        periods_per_year=ctx.periods_per_year,
    )  # fmt: skip
    rets = portfolio_series(results, ctx.periods_per_year)
    for r in results:
        ctx.run.tracker.append(
            {
                "kind": "holdout", "run_id": ctx.run.root.name, "iteration": state["iteration"],
                "route": Route.SUCCESS.value, "variant_id": winner_id, "symbol": r.symbol,
                "symbols": [r.symbol], "status": r.status.value, "error": r.error,
                "metrics": r.metrics.model_dump() if r.metrics else None,
                "gate_score": state["best"]["score"], "data_sha256": ctx.data[r.symbol].sha256,
            }
        )  # fmt: skip
    ctx.progress.stage(
        "holdout",
        f"sharpe {_f(metrics.sharpe if metrics else None)} vs buy & hold {_f(bh.sharpe if bh else None)}",
    )
    return {
        "holdout": {
            "variant_id": winner_id,
            "start": fold.start.isoformat(),
            "end": fold.end.isoformat(),
            "metrics": metrics.model_dump() if metrics else None,
            "buy_and_hold": bh.model_dump() if bh else None,
            "per_symbol": {
                r.symbol: (r.metrics.model_dump() if r.metrics else r.error) for r in results
            },
            "returns": {
                "dates": [d.date().isoformat() for d in rets.index],
                "values": rets.tolist(),
            },
            "buy_and_hold_returns": {
                "dates": [d.date().isoformat() for d in bh_rets.index],
                "values": bh_rets.tolist(),
            },
        },
        "n_backtests": state.get("n_backtests", 0) + len(results),
    }


def finalize(state: DevelopState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    cfg = ctx.config
    decisions = state.get("decisions", [])
    last = decisions[-1] if decisions else None
    success = state.get("route") == Route.SUCCESS.value
    best_eval = state.get("best")
    best_id = best_eval["variant_id"] if best_eval else None
    all_variants = state.get("all_variants", {})
    best_variant = all_variants.get(best_id) if best_id else None
    ledger = TrialLedger.model_validate(state.get("ledger") or {})

    figures: dict[str, Any] = {}
    curves: dict[str, pd.Series] = {}
    if best_eval and best_eval.get("portfolio"):
        first, last_fold = ctx.folds[0], ctx.folds[-1]
        bh, bh_rets = buy_and_hold_metrics(
            {s: ctx.insample_bars(s) for s in ctx.symbols}, first.start, last_fold.end,
            periods_per_year=ctx.periods_per_year,
        )  # fmt: skip
        figures["in-sample"] = {
            "metrics": best_eval.get("metrics"),
            "buy_and_hold": bh.model_dump() if bh else None,
        }
        port = best_eval["portfolio"]
        curves["strategy (in-sample)"] = pd.Series(
            port["values"], index=pd.to_datetime(port["dates"])
        )
        curves["buy & hold (in-sample)"] = bh_rets
    if state.get("holdout"):
        h = state["holdout"]
        fold = ctx.holdout_fold
        figures["holdout"] = {
            "metrics": h["metrics"],
            "buy_and_hold": h["buy_and_hold"],
            # Enough to re-run each symbol outside the lab and compare final values.
            "reproduce": {
                "from": fold.warmup_start.isoformat(),
                "trade_start": fold.start.isoformat(),
                "to": fold.end.isoformat(),
                "runs": {
                    s: {"data": ctx.data[s].path, "final_value": m["final_value"]}
                    for s, m in h["per_symbol"].items()
                    if isinstance(m, dict)
                },
            },
        }
        curves["strategy (holdout)"] = pd.Series(
            h["returns"]["values"], index=pd.to_datetime(h["returns"]["dates"])
        )
        curves["buy & hold (holdout)"] = pd.Series(
            h["buy_and_hold_returns"]["values"],
            index=pd.to_datetime(h["buy_and_hold_returns"]["dates"]),
        )

    verdict = {
        "verdict": "SUCCESS" if success else "ABANDON",
        "reason": last["reasoning"] if last else "no iteration completed",
        "iterations": len(decisions),
        "best_variant": best_id,
        "n_backtests": state.get("n_backtests", 0),
        "n_trials": ledger.n_trials,
        "best_dsr": best_eval.get("dsr") if best_eval else None,
        "best_score": best_eval.get("score") if best_eval else None,
        "best_dsr_all_trials": _dsr_all_trials(best_eval, ledger),
        "pbo": state.get("pbo"),
        "score_threshold": ctx.criteria.score_threshold,
        "dsr_threshold": ctx.criteria.dsr_threshold,
        "route_history": [d["decision"] for d in decisions],
        "figures": figures,
    }
    run = ctx.run
    run.write_json("variants.json", all_variants)
    run.write_json("verdict.json", verdict)
    thresholds = {c.metric: c.threshold for c in ctx.criteria.rules}
    if state.get("history"):
        plot_trajectory(state["history"], thresholds, ctx.criteria.score_threshold,
                        run.path("charts/trajectory.png"))  # fmt: skip
    if curves:
        plot_equity(curves, f"{best_id}: equal-weight portfolio vs buy & hold",
                    run.path("charts/equity.png"))  # fmt: skip
    if success and best_variant:
        write_export(
            run.path("winner"),
            variant=best_variant,
            class_name=best_variant["class_name"],
            costs=cfg.costs.model_dump(),
            figures=figures,
            lineage=lineage_of(best_id, all_variants),
            run_dir=run.root,
        )
    run.write_text(
        "report.md",
        render_report(
            run_id=run.root.name,
            config=cfg.model_dump(mode="json"),
            verdict=verdict,
            decisions=decisions,
            synthesis=state.get("synthesis"),
            data=ctx.cache["data_summary"],
            best_variant=best_variant,
            best_eval=best_eval,
            figures=figures,
            criteria_text=ctx.cache["criteria_text"],
        ),
    )
    ctx.progress.stage(
        "done",
        f"{verdict['verdict']} after {verdict['iterations']} iteration(s), {verdict['n_backtests']} "
        f"backtests, {verdict['n_trials']} trials; best {best_id or '–'}",
    )
    return {"verdict": verdict}


def _dsr_all_trials(best_eval: dict[str, Any] | None, ledger: TrialLedger) -> float | None:
    """The best variant's DSR deflated by every trial the run made, not only those before it."""
    m = (best_eval or {}).get("metrics") or {}
    if m.get("sharpe_per_period") is None or m.get("skew") is None:
        return None
    return deflated_sharpe_ratio(
        m["sharpe_per_period"],
        ledger.trial_sharpe_variance(),
        max(ledger.n_trials, 1),
        m["n_obs"],
        m["skew"],
        m["kurtosis"],
    )


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"
