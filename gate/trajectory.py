"""Trajectory analysis: is the loop getting anywhere, and what moved the score?

The status reads the graded progress of each iteration's best (``gate.progress``), not the
fuzzy score: the fuzzy score sits on a floor while any criterion is far off, and a search
whose Sharpe moves by tens of percent would read STAGNANT. When even the graded measure is
flat (every far criterion clipped at 0, or the met ones past their cap), the raw criteria
figures decide: STAGNANT only when neither moves, or when every criterion is met throughout
(the figures then drift above their bars, and only the deflation bars block a pass).
"""

from __future__ import annotations

import math

import numpy as np

from gate.contracts import Criteria, IterationSummary, TrajectoryAnalysis, TrajectoryStatus
from gate.criteria import parse_criteria

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


def _graded(history: list[IterationSummary]) -> tuple[str, list[float]]:
    """The series the status reads and its name: the best's progress, or its fuzzy score
    for a line holding records from before the graded measure (progress 0 beside a positive
    fuzzy score: a clean variant's progress is never below 0.1)."""
    if any(h.best_progress == 0.0 and h.best_score > 0.0 for h in history):
        return "score", [h.best_score for h in history]
    return "progress", [h.best_progress for h in history]


def _finite(vals: list[float | None]) -> bool:
    return all(v is not None and math.isfinite(v) for v in vals)


def _series(history: list[IterationSummary], criteria: Criteria) -> dict[str, list[float]]:
    """``score`` is the graded measure (routing reads its rate); ``fuzzy_score`` the pass
    score beside it; then every summary metric, and the criteria figures over the benchmark."""
    name, graded = _graded(history)
    out: dict[str, list[float]] = {"score": graded}
    if name == "progress":
        out["fuzzy_score"] = [h.best_score for h in history]
    keys = {k for h in history for k in h.best_metrics}
    for k in sorted(keys):
        vals = [h.best_metrics.get(k) for h in history]
        if _finite(vals):
            out[k] = [float(v) for v in vals]  # type: ignore[arg-type]
    for c in criteria.rules:
        vals = [h.best_alpha.get(c.metric) for h in history]
        if c.metric not in out and _finite(vals):
            out[c.metric] = [float(v) for v in vals]  # type: ignore[arg-type]
    return out


def _criteria_rates(series: dict[str, list[float]], criteria: Criteria) -> dict[str, float]:
    """Mean relative change per iteration of each criterion's raw figure, + = better."""
    wanted = {c.metric: c.op in ("<=", "<") for c in criteria.rules}
    if criteria.min_trades > 0:
        wanted.setdefault("n_trades", False)
    return {
        k: float(np.mean(_rel_changes(series[k], lower_is_better=low)))
        for k, low in wanted.items()
        if k in series
    }


def _raw_status(graded_why: str, rates: dict[str, float]) -> tuple[TrajectoryStatus, str] | None:
    """The status from the raw criteria when the graded measure is flat; None if they are too."""
    better = {k: r for k, r in rates.items() if r > RATE_THRESHOLD}
    worse = {k: r for k, r in rates.items() if r < -RATE_THRESHOLD}

    def said(d: dict[str, float]) -> str:
        return ", ".join(f"{k} {r:+.1%}" for k, r in d.items())

    if better and worse:
        return TrajectoryStatus.OSCILLATING, (
            f"{graded_why}, but the criteria trade against each other per iteration "
            f"({said(better)}; {said(worse)}): no direction"
        )
    if better:
        return TrajectoryStatus.CONVERGING, (
            f"{graded_why}, but the criteria improve per iteration ({said(better)})"
        )
    if worse:
        return TrajectoryStatus.DIVERGING, (
            f"{graded_why}, but the criteria worsen per iteration ({said(worse)})"
        )
    return None


def _classify(changes: list[float], label: str = "score") -> tuple[TrajectoryStatus, str]:
    rate = float(np.mean(changes))
    std = float(np.std(changes)) if len(changes) > 1 else 0.0
    moves = [c for c in changes if abs(c) > RATE_THRESHOLD]
    flips = sum(1 for a, b in zip(moves[:-1], moves[1:], strict=True) if a * b < 0)
    if flips >= 1 and std > abs(rate):
        return TrajectoryStatus.OSCILLATING, (
            f"{label} changes flip sign {flips}x (mean {rate:+.1%}, sd {std:.1%}): no direction"
        )
    if rate > RATE_THRESHOLD:
        return TrajectoryStatus.CONVERGING, f"{label} improves {rate:+.1%} per iteration"
    if rate < -RATE_THRESHOLD:
        return TrajectoryStatus.DIVERGING, f"{label} worsens {rate:+.1%} per iteration"
    return TrajectoryStatus.STAGNANT, f"{label} changes {rate:+.1%} per iteration: stagnant"


def _parameter_impact(history: list[IterationSummary], graded: list[float]) -> dict[str, float]:
    """Mean graded-measure delta over the steps in which a parameter of the best changed."""
    deltas: dict[str, list[float]] = {}
    steps = zip(history[:-1], history[1:], graded[:-1], graded[1:], strict=True)
    for prev, cur, before, after in steps:
        for k in set(prev.best_parameters) | set(cur.best_parameters):
            if prev.best_parameters.get(k) != cur.best_parameters.get(k):
                deltas.setdefault(k, []).append(after - before)
    return {k: round(float(np.mean(v)), 6) for k, v in sorted(deltas.items())}


def analyse_trajectory(
    history: list[IterationSummary],
    *,
    score_threshold: float = 0.6,
    criteria: Criteria | None = None,
) -> TrajectoryAnalysis | None:
    """Classify the path of the best's graded progress over ``history`` (current iteration
    last), the raw ``criteria`` figures breaking a flat reading; None below 2 iterations.

    ``improvement_rate["score"]`` is the graded measure's rate (the fuzzy score's, for lines
    recorded before it), ``["fuzzy_score"]`` the fuzzy score's. ``iterations_to_convergence``
    counts iterations to progress 1 (every criterion met), or to ``score_threshold`` when
    the line is read on the fuzzy score. ``criteria`` None: the default criteria.
    """
    if len(history) < 2:
        return None
    criteria = criteria or parse_criteria(None)
    history = sorted(history, key=lambda h: h.iteration)
    label, _ = _graded(history)
    series = _series(history, criteria)
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
    graded_status, why = _classify(_rel_changes(series["score"]), label)
    status = graded_status
    met_throughout = label == "progress" and min(series["score"]) >= 1.0
    if graded_status == TrajectoryStatus.STAGNANT and met_throughout:
        # Every criterion met at every step: the raw figures drifting past their bars is not
        # a line sliding away; the deflation bars are what block a pass.
        why = f"{why.removesuffix(': stagnant')}: every criterion met throughout"
    elif graded_status == TrajectoryStatus.STAGNANT:
        raw = _raw_status(why.removesuffix(": stagnant"), _criteria_rates(series, criteria))
        if raw is not None:
            status, why = raw

    scores = series["score"]
    target = 1.0 if label == "progress" else score_threshold
    slope = (scores[-1] - scores[0]) / (len(scores) - 1)  # absolute per iteration
    to_go: float | None = None
    if scores[-1] >= target:
        to_go = 0.0
    elif graded_status == TrajectoryStatus.CONVERGING and slope > 0:
        to_go = round((target - scores[-1]) / slope, 2)
    if to_go == 0.0 and label == "progress":
        eta = "; every criterion met, so the criteria are not what blocks a pass"
    elif to_go == 0.0:
        eta = f"; score already >= {target:g}, so the score is not what blocks a pass"
    elif to_go is not None:
        goal = "meet every criterion" if label == "progress" else f"score {target:g}"
        eta = f"; ~{to_go:g} more iteration(s) to {goal}"
    else:
        eta = ""
    shown = f"{label} {[round(s, 3) for s in scores]}"
    if label == "progress":
        shown += f" (fuzzy scores {[round(h.best_score, 3) for h in history]})"
    return TrajectoryAnalysis(
        status=status,
        n_iterations=len(history),
        improvement_rate=rates,
        variance=variances,
        direction=direction,
        iterations_to_convergence=to_go,
        parameter_impact=_parameter_impact(history, scores),
        reasoning=f"{len(history)} iterations, {shown}: {why}{eta}",
    )
