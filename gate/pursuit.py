"""Whether the search's best is worth repairing rather than re-researching.

A best with significant alpha (HAC t of the intercept >= ``ALPHA_T_SIGNIFICANT``) that fails
only structural criteria (drawdown, trade count, win rate, profit factor, costs) has found
an edge; what is left is its shape. So has a best whose alpha survives deflation while the
benchmark's noise in its raw returns fails the Sharpe or the DSR (``gate.failure.hedgeable``):
what is left is a hedge. Another research round would replace the premise that produced the
edge, so the router repairs the design instead (REFINE).
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.contracts import Criteria, VariantEvaluation
from gate.criteria import is_met, metric_value, rule_label
from gate.failure import (
    ALPHA_T_SIGNIFICANT,
    RAW_RETURN_METRICS,
    STRUCTURAL_METRICS,
    dsr_criterion,
    hedgeable,
)


@dataclass(frozen=True)
class Pursuit:
    """The best's standing: its alpha t, the criteria it fails, and whether every one of them
    is structural while the alpha is significant (then: repair, never research)."""

    alpha_t: float | None
    failing: tuple[str, ...]
    structural_only: bool

    def describe(self) -> str:
        """The standing in one line, for the failure analysis."""
        t = "n/a" if self.alpha_t is None else f"{self.alpha_t:.2f}"
        return f"best has alpha t {t} and fails only {', '.join(self.failing)}"


def pursuit_of(best: VariantEvaluation | None, criteria: Criteria) -> Pursuit | None:
    """The best evaluation's standing against ``criteria``; None without a usable best.
    When the alpha survives deflation (``hedgeable``) the Sharpe and the DSR bar are
    repairable (a hedge) and the DSR counts among the failures."""
    if best is None or best.metrics is None:
        return None
    hedge = hedgeable(best, criteria)
    repairable = STRUCTURAL_METRICS | (RAW_RETURN_METRICS if hedge else set())
    failing: list[str] = []
    structural = True
    rules = list(criteria.rules)
    if hedge and best.dsr is not None:
        rules.append(dsr_criterion(criteria))
    for c in rules:
        value = best.dsr if c.metric == "dsr" else metric_value(best.metrics, c.metric, best.alpha)
        if not is_met(c, value):
            failing.append(rule_label(c))
            structural &= c.metric in repairable
    if best.metrics.n_trades < criteria.min_trades:
        failing.append(f"min_trades>={criteria.min_trades}")
    t = best.alpha.t_stat if best.alpha is not None else None
    significant = t is not None and t >= ALPHA_T_SIGNIFICANT
    return Pursuit(
        alpha_t=t,
        failing=tuple(failing),
        structural_only=bool(failing) and structural and significant,
    )
