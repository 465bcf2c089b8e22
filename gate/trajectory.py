"""Trajectory analysis: is the loop getting anywhere, and what moved the score?"""

from __future__ import annotations

import math

import numpy as np

from gate.contracts import IterationSummary, TrajectoryAnalysis, TrajectoryStatus

RATE_THRESHOLD = 0.05  # relative change per iteration that counts as movement
REL_FLOOR = 0.05  # denominator floor: a score moving off 0 is not an infinite rate
LOWER_IS_BETTER = {"max_drawdown_pct"}


def _rel_changes(values: list[float], lower_is_better: bool = False) -> list[float]:
    """Relative change per step, signed so that positive always means better."""
    sign = -1.0 if lower_is_better else 1.0
    return [
        sign * (b - a) / max(abs(a), REL_FLOOR)
        for a, b in zip(values[:-1], values[1:], strict=True)
    ]


def _series(history: list[IterationSummary]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"score": [h.best_score for h in history]}
    keys = {k for h in history for k in h.best_metrics}
    for k in sorted(keys):
        vals = [h.best_metrics.get(k) for h in history]
        if all(v is not None and math.isfinite(v) for v in vals):
            out[k] = [float(v) for v in vals]  # type: ignore[arg-type]
    return out


def _classify(changes: list[float]) -> tuple[TrajectoryStatus, str]:
    rate = float(np.mean(changes))
    std = float(np.std(changes)) if len(changes) > 1 else 0.0
    moves = [c for c in changes if abs(c) > RATE_THRESHOLD]
    flips = sum(1 for a, b in zip(moves[:-1], moves[1:], strict=True) if a * b < 0)
    if flips >= 1 and std > abs(rate):
        return TrajectoryStatus.OSCILLATING, (
            f"score changes flip sign {flips}x (mean {rate:+.1%}, sd {std:.1%}): no direction"
        )
    if rate > RATE_THRESHOLD:
        return TrajectoryStatus.CONVERGING, f"score improves {rate:+.1%} per iteration"
    if rate < -RATE_THRESHOLD:
        return TrajectoryStatus.DIVERGING, f"score worsens {rate:+.1%} per iteration"
    return TrajectoryStatus.STAGNANT, f"score changes {rate:+.1%} per iteration: stagnant"


def _parameter_impact(history: list[IterationSummary]) -> dict[str, float]:
    """Mean score delta over the steps in which a parameter of the best variant changed."""
    deltas: dict[str, list[float]] = {}
    for prev, cur in zip(history[:-1], history[1:], strict=True):
        d = cur.best_score - prev.best_score
        for k in set(prev.best_parameters) | set(cur.best_parameters):
            if prev.best_parameters.get(k) != cur.best_parameters.get(k):
                deltas.setdefault(k, []).append(d)
    return {k: round(float(np.mean(v)), 6) for k, v in sorted(deltas.items())}


def analyse_trajectory(
    history: list[IterationSummary], *, score_threshold: float = 0.6
) -> TrajectoryAnalysis | None:
    """Classify the best-score path over ``history`` (current iteration last); None if < 2."""
    if len(history) < 2:
        return None
    history = sorted(history, key=lambda h: h.iteration)
    series = _series(history)
    rates: dict[str, float] = {}
    variances: dict[str, float] = {}
    direction: dict[str, str] = {}
    for k, vals in series.items():
        ch = _rel_changes(vals, lower_is_better=k in LOWER_IS_BETTER)
        rates[k] = round(float(np.mean(ch)), 6)
        variances[k] = round(float(np.var(ch)), 6)
        direction[k] = (
            "improving"
            if rates[k] > RATE_THRESHOLD
            else "worsening"
            if rates[k] < -RATE_THRESHOLD
            else "flat"
        )
    status, why = _classify(_rel_changes(series["score"]))

    scores = series["score"]
    slope = (scores[-1] - scores[0]) / (len(scores) - 1)  # absolute score per iteration
    to_go: float | None = None
    if scores[-1] >= score_threshold:
        to_go = 0.0
    elif status == TrajectoryStatus.CONVERGING and slope > 0:
        to_go = round((score_threshold - scores[-1]) / slope, 2)
    if to_go == 0.0:
        eta = f"; score already >= {score_threshold:g}, so the score is not what blocks a pass"
    elif to_go is not None:
        eta = f"; ~{to_go:g} more iteration(s) to score {score_threshold:g}"
    else:
        eta = ""
    return TrajectoryAnalysis(
        status=status,
        n_iterations=len(history),
        improvement_rate=rates,
        variance=variances,
        direction=direction,
        iterations_to_convergence=to_go,
        parameter_impact=_parameter_impact(history),
        reasoning=f"{len(history)} iterations, scores {[round(s, 3) for s in scores]}: {why}{eta}",
    )
