"""A graded measure of how far a variant is from the user's criteria, for ranking and progress.

The fuzzy score (``gate.fuzzy``) decides passes; it is built to say "good enough?", so it
sits on a floor (~0.15) whenever any criterion is far below its threshold. On that floor
most variants of a struggling search tie, the "best" of an iteration is arbitrary and the
trajectory reads STAGNANT while Sharpe moves by tens of percent. ``progress`` keeps moving
there: every criterion's attainment counts, continuously, and none can floor it alone.
It never decides a pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from backtest.contracts import Metrics
from gate.alpha import AlphaStats
from gate.contracts import (  # the veto ranks live beside Veto (a late veto demotes)
    CLEAN_FLOOR,
    VETO_CEILING,
    Criteria,
    Veto,
    demoted,
)
from gate.criteria import attainment, metric_value

CAP = 1.0  # attainment counted up to the threshold: beyond it the tie-breakers rank
CURVE = 9.0  # concavity of the transform: g(0.1) = 0.28, g(0.3) = 0.57, g(0.5) = 0.74


def _gain(a: float, cap: float) -> float:
    x = min(max(a, 0.0), cap) / cap
    return math.log1p(CURVE * x) / math.log1p(CURVE)


def progress(attainments: Iterable[float], *, vetoed: bool = False, cap: float = CAP) -> float:
    """The graded measure in [0, 1] of per-criterion attainments (1 = at the threshold).

    ``raw = mean_i g(min(a_i, cap) / cap)`` with ``g(x) = ln(1 + 9x) / ln(10)``:

    - the mean, not the minimum or a fuzzy AND, so a criterion far off does not pin the
      measure: every other criterion still moves it, and so does the far one (g is strictly
      increasing, its slope at 0 is 3.9);
    - g concave, so a step on a far-off criterion counts more than the same step on one
      nearly met: the measure prefers balanced variants (all at 0.8: raw 0.91) to ones that
      max out some criteria and ignore another (five at 1, one at 0: raw 0.83);
    - capped at the threshold, so surplus on one criterion cannot buy off a deficit on
      another, and 1 means every criterion is met; among those the tie-breakers rank
      (deflated alpha, DSR, Sharpe: ``gate.evaluate.best_evaluation``).

    A clean variant maps to ``0.1 + 0.9 * raw`` (in [0.1, 1]); a vetoed one to
    ``0.05 * raw`` (in [0, 0.05]): below every clean variant, still ordered among its kind.
    No criterion: raw 0.
    """
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    gains = [_gain(float(a), cap) for a in attainments]
    raw = sum(gains) / len(gains) if gains else 0.0
    if vetoed:
        return VETO_CEILING * raw
    return CLEAN_FLOOR + (1.0 - CLEAN_FLOOR) * raw


def criteria_attainments(
    criteria: Criteria, metrics: Metrics | None, alpha: AlphaStats | None = None
) -> list[float]:
    """Each rule's attainment, then the min-trades floor's (trades / floor) when it has one."""
    att = [attainment(c, metric_value(metrics, c.metric, alpha)) for c in criteria.rules]
    if criteria.min_trades > 0:
        trades = metrics.n_trades if metrics is not None else 0
        att.append(trades / criteria.min_trades)
    return att


def variant_progress(
    criteria: Criteria,
    metrics: Metrics | None,
    alpha: AlphaStats | None,
    veto_kinds: Sequence[Veto],
) -> float:
    """``progress`` of one variant against ``criteria`` (its vetoes decide the band)."""
    return progress(criteria_attainments(criteria, metrics, alpha), vetoed=demoted(veto_kinds))
