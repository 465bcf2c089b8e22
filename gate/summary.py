"""Condense one iteration's evaluations into the IterationSummary history is made of."""

from __future__ import annotations

from collections.abc import Mapping

from gate.alpha import ALPHA_CRITERIA, criteria_value
from gate.contracts import IterationSummary, Route, VariantEvaluation
from gate.evaluate import best_evaluation

SUMMARY_METRICS = (
    "sharpe",
    "sortino",
    "cagr_pct",
    "max_drawdown_pct",
    "win_rate_pct",
    "profit_factor",
    "n_trades",
)


def summarise_iteration(
    iteration: int,
    evaluations: list[VariantEvaluation],
    *,
    route: Route,
    parameters: Mapping[str, Mapping[str, float | int | bool]] | None = None,
) -> IterationSummary:
    """``parameters`` maps variant_id -> its parameters (for parameter-impact analysis).

    To analyse the trajectory *before* routing, build the current summary with a
    provisional route (it is not read by ``analyse_trajectory``) and replace it after.
    """
    best = best_evaluation(evaluations)
    metrics: dict[str, float | None] = {}
    if best is not None and best.metrics is not None:
        metrics = {k: getattr(best.metrics, k) for k in SUMMARY_METRICS}
        metrics["dsr"] = best.dsr
    alpha: dict[str, float | None] = {}
    if best is not None and best.alpha is not None:
        alpha = {name: criteria_value(best.alpha, name) for name in ALPHA_CRITERIA}
        alpha["deflated_alpha"] = best.alpha.deflated_alpha
        alpha["spa_p"] = best.spa_pvalue
    return IterationSummary(
        iteration=iteration,
        route=route,
        best_variant_id=best.variant_id if best else None,
        family=best.family if best else None,
        best_score=best.score if best else 0.0,
        best_progress=best.progress if best else 0.0,
        best_metrics=metrics,
        best_alpha=alpha,
        best_parameters=dict((parameters or {}).get(best.variant_id, {})) if best else {},
        n_passed=sum(e.passed for e in evaluations),
    )
