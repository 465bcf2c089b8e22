"""Whether the search's best is worth repairing rather than re-researching.

A best with significant alpha (HAC t of the intercept >= ``ALPHA_T_SIGNIFICANT``) that fails
only structural criteria (drawdown, trade count, win rate, profit factor, costs) has found
an edge; what is left is its shape. Another research round would replace the premise that
produced the edge, so the router repairs the design instead (REFINE).
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.contracts import Criteria, VariantEvaluation
from gate.criteria import is_met, metric_value, rule_label
from gate.failure import ALPHA_T_SIGNIFICANT

# Metrics that measure the shape of a strategy's trading, not whether it has an edge.
STRUCTURAL_METRICS = frozenset(
    {
        "max_drawdown_pct",
        "win_rate_pct",
        "profit_factor",
        "n_trades",
        "turnover_annual",
        "avg_holding_bars",
        "orders_rejected",
        "exposure_pct",
    }
)


@dataclass(frozen=True)
class Pursuit:
    """The best's standing: its alpha t, the criteria it fails, and whether every one of them
    is structural while the alpha is significant (then: repair, never research)."""

    alpha_t: float | None
    failing: tuple[str, ...]
    structural_only: bool

    def describe(self) -> str:
        t = "n/a" if self.alpha_t is None else f"{self.alpha_t:.2f}"
        return f"best has alpha t {t} and fails only {', '.join(self.failing)}"


def pursuit_of(best: VariantEvaluation | None, criteria: Criteria) -> Pursuit | None:
    """The best evaluation's standing against ``criteria``; None without a usable best."""
    if best is None or best.metrics is None:
        return None
    failing: list[str] = []
    structural = True
    for c in criteria.rules:
        if not is_met(c, metric_value(best.metrics, c.metric, best.alpha)):
            failing.append(rule_label(c))
            structural &= c.metric in STRUCTURAL_METRICS
    if best.metrics.n_trades < criteria.min_trades:
        failing.append(f"min_trades>={criteria.min_trades}")
    t = best.alpha.t_stat if best.alpha is not None else None
    significant = t is not None and t >= ALPHA_T_SIGNIFICANT
    return Pursuit(
        alpha_t=t,
        failing=tuple(failing),
        structural_only=bool(failing) and structural and significant,
    )
