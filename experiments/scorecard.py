"""What passed and what did not: the best variant's figure against every bar of the gate.

The gate (``gate.evaluate``) passes a variant when every criteria rule is met, it has enough
trades, its fuzzy score and deflated Sharpe clear their bars and, against a benchmark, its
deflated alpha and the run's SPA p-value clear theirs. The report and the export read the
same figures back from the run folder and say, bar by bar, by how much each was met or
missed, so a reader never has to recompute a verdict from a table of metrics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from backtest.contracts import Metrics
from gate.alpha import ALPHA_CRITERIA, AlphaStats
from gate.contracts import Criteria, Criterion, Veto
from gate.criteria import attainment, criteria_from_text, is_met, rule_label
from strategies.family_api import whole_universe
from strategies.spec import StrategySpec

if TYPE_CHECKING:  # types only: the records import nothing of this module
    from experiments.records import AlphaSummary, VariantEntry, Verdict

# One symbol holding more than this share of the winner's time in the market is a warning:
# the "strategy" may be a bet on that symbol.
CONCENTRATION_SHARE = 0.5
ALPHA_T_RULE = "alpha_t"
DEFAULT_ALPHA_T = 2.0  # the holdout's bar for "alpha confirmed" when no alpha_t rule is set
# What ``Metrics.n_trades`` counts (``trades_kind``), and how a table labels it.
FILLS = "fills"
ROUND_TRIPS = "round trips"
TRADE_LABELS = {
    FILLS: "trades (fills that reduce a position; round trips not recorded)",
    ROUND_TRIPS: "trades (round trips: entry to flat)",
}


@dataclass(frozen=True)
class CriterionRow:
    """One bar: the figure, its threshold, whether it was met and by how much.

    ``margin`` is signed toward passing (positive: met with room to spare, negative: missed
    by that much); ``attainment`` is ``gate.criteria.attainment`` (1 = at the threshold).
    """

    name: str
    value: float | None
    op: str
    threshold: float
    passed: bool
    margin: float | None
    attainment: float
    note: str = ""

    def miss(self) -> str:
        """``deflated alpha (0.924 < 0.95)``: the failure said with its numbers."""
        if self.value is None:
            return f"{self.name} (missing)"
        return f"{self.name} ({_num(self.value)} {_broken(self.op)} {_num(self.threshold)})"


def criteria_of(config: dict[str, Any], criteria_text: str | None) -> Criteria:
    """The run's criteria: the config's model when it has one, else the text read as the run
    read it (a config without ``criteria_replace`` predates it: its text replaced the defaults)."""
    if config.get("criteria"):
        return Criteria.model_validate(config["criteria"])
    return criteria_from_text(criteria_text, replace=config.get("criteria_replace", True))


def criteria_rows(
    criteria: Criteria,
    *,
    metrics: Metrics | None,
    alpha: AlphaStats | AlphaSummary | None,
    score: float | None,
    dsr: float | None,
    spa_pvalue: float | None,
    cash: bool,
    trades: str = ROUND_TRIPS,
) -> list[CriterionRow]:
    """Every bar the gate applies, in its order: the rules, then trades, fuzzy score,
    deflated Sharpe, and (against a benchmark) deflated alpha and the SPA p-value.

    Against cash the deflated alpha is not a bar (``gate.evaluate.alpha_ok``); an SPA
    p-value the run never computed is not one either (None: not run, not required).
    """
    rows = [
        _row(rule_label(c), c, _figure(c.metric, metrics, alpha), note="rule")
        for c in criteria.rules
    ]
    n = metrics.n_trades if metrics is not None else None
    rows.append(
        _row(
            f"min trades ({trades})",
            Criterion(metric="n_trades", op=">=", threshold=criteria.min_trades),
            None if n is None else float(n),
            note="veto below",
        )
    )
    rows.append(
        _row(
            "fuzzy score",
            Criterion(metric="score", op=">=", threshold=criteria.score_threshold),
            score,
        )
    )
    rows.append(
        _row(
            "deflated Sharpe",
            Criterion(metric="dsr", op=">=", threshold=criteria.dsr_threshold),
            dsr,
        )
    )
    if not cash:
        bar = Criterion(
            metric="deflated_alpha", op=">=", threshold=criteria.deflated_alpha_threshold
        )
        deflated = alpha.deflated_alpha if alpha is not None else None
        rows.append(_row("deflated alpha", bar, _finite(deflated)))
    if spa_pvalue is not None:
        bar = Criterion(metric="spa_p", op="<=", threshold=criteria.spa_threshold)
        rows.append(_row("SPA p-value", bar, spa_pvalue, note="over every trial"))
    return rows


def scorecard_table(rows: list[CriterionRow]) -> list[str]:
    """The rows as a markdown table."""
    out = [
        "| criterion | value | threshold | pass | margin | attainment |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        margin = "–" if r.margin is None else f"{r.margin:+.3g}"
        out.append(
            f"| {r.name} | {_num(r.value)} | {r.op} {_num(r.threshold)} | "
            f"{'pass' if r.passed else '**FAIL**'} | {margin} | {r.attainment:.2f} |"
        )
    return out


def verdict_line(
    verdict: Verdict,
    best_variant: VariantEntry | None,
    rows: list[CriterionRow],
    *,
    vetoes: list[str] | None = None,
) -> str:
    """One plain sentence: what the run decided and, for the best variant, what it missed."""
    decided = verdict.verdict
    if not best_variant:
        return f"{decided}: no variant produced a result."
    who = f"{best_variant.variant_id} ({best_variant.spec.family})"
    failed = [r for r in rows if not r.passed]
    vetoes = vetoes or []
    if decided == "SUCCESS":
        return f"SUCCESS: {who} passed every criterion in-sample."
    head = f"{decided}: no strategy passed. The closest, {who}, met {len(rows) - len(failed)} of {len(rows)} criteria"
    reasons = [r.miss() for r in failed] + [f"vetoed: {v}" for v in vetoes]
    if not reasons:
        return head + "; it was not chosen as the run's winner."
    return head + "; it failed " + ", ".join(reasons) + "."


def holdout_line(verdict: Verdict, criteria: Criteria) -> str | None:
    """On SUCCESS: did the alpha survive the sealed holdout, with its HAC t.

    "Confirmed" uses the in-sample ``alpha_t`` bar (2 when the run set none) and needs a
    positive alpha. None when the holdout was not opened.
    """
    if verdict.verdict != "SUCCESS":
        return None
    ha = verdict.holdout_alpha
    if ha is None:
        return "Holdout: no alpha figures recorded for the holdout."
    bar = next((c.threshold for c in criteria.rules if c.metric == ALPHA_T_RULE), DEFAULT_ALPHA_T)
    t, a = _finite(ha.t_stat), _finite(ha.alpha_annual_pct)
    over = verdict.benchmark.name if verdict.benchmark is not None else "the benchmark"
    figures = f"alpha {_num(a)}% a year over {over}, HAC t {_num(t)}"
    if t is not None and a is not None and t >= bar and a > 0:
        return f"Holdout: alpha confirmed ({figures} >= {_num(bar)})."
    return f"Holdout: alpha NOT confirmed ({figures}; the bar is t >= {_num(bar)} with alpha > 0)."


def concentration_line(per_symbol: dict[str, Metrics] | None, *, scope: str | None) -> str | None:
    """A warning when one symbol holds most of the winner's time in the market.

    Symbol-scope variants run each symbol alone on an equal share of capital, so each
    symbol's ``exposure_pct`` measures its share of the exposure. A portfolio-scope run
    records no per-symbol weights: that is said, not guessed.
    """
    if whole_universe(scope):
        return (
            "Concentration: not measured. A portfolio strategy's per-symbol weights are not "
            "recorded in the run folder, so whether one symbol carried the result is unknown."
        )
    exposure = {
        s: float(m.exposure_pct)
        for s, m in (per_symbol or {}).items()
        if _finite(m.exposure_pct) is not None
    }
    total = sum(exposure.values())
    if len(exposure) < 2 or total <= 0:
        return None
    top = max(exposure, key=lambda s: exposure[s])
    share = exposure[top] / total
    if share <= CONCENTRATION_SHARE:
        return None
    return (
        f"**Concentration warning:** {top} holds {share:.0%} of the holdout's time in the "
        f"market across {len(exposure)} symbols; the result may be a bet on {top}."
    )


def trades_kind(spec: StrategySpec | None, n_symbols: int) -> str:
    """What the lab's ``n_trades`` counts for this variant (``backtest.books``).

    A symbol job counts round trips (entry to flat). A portfolio job over several symbols
    counts every fill that reduces a position (a rebalance realises a trade), and the run
    folder keeps no fill list to count its round trips from.
    """
    if spec is not None and whole_universe(spec) and n_symbols > 1:
        return FILLS
    return ROUND_TRIPS


def other_vetoes(vetoes: list[str] | None, kinds: Sequence[str] | None = None) -> list[str]:
    """The veto sentences a row does not already say: too few trades has its own row.
    Without the kinds (variants.json keeps only the sentences) every sentence stays."""
    vetoes = list(vetoes or [])
    if not kinds or len(kinds) != len(vetoes):
        return vetoes
    return [v for v, k in zip(vetoes, kinds, strict=True) if k != Veto.TOO_FEW_TRADES]


def not_a_winner(
    verdict: Verdict, variant_id: str, rows: list[CriterionRow], vetoes: list[str]
) -> list[str] | None:
    """The banner for an export of a variant that is not the run's winner; None for the winner."""
    decided = verdict.verdict
    if decided == "SUCCESS" and verdict.best_variant == variant_id:
        return None
    failed = [r.miss() for r in rows if not r.passed] + [f"vetoed: {v}" for v in vetoes]
    why = (
        "it failed " + ", ".join(failed)
        if failed
        else "it met the in-sample bars but was not the run's choice; the holdout was not opened for it"
    )
    return [
        f"NOT A WINNER: run verdict {decided}; {variant_id} did not pass the gate: {why}.",
        "Its figures are in-sample only, from folds the search looked at many times.",
    ]


def _row(name: str, c: Criterion, value: float | None, note: str = "") -> CriterionRow:
    value = _finite(value)
    margin = None
    if value is not None:
        margin = value - c.threshold if c.op in (">=", ">") else c.threshold - value
    return CriterionRow(
        name=name,
        value=value,
        op=c.op,
        threshold=c.threshold,
        passed=is_met(c, value),
        margin=margin,
        attainment=attainment(c, value),
        note=note,
    )


def _figure(
    name: str, metrics: Metrics | None, alpha: AlphaStats | AlphaSummary | None
) -> float | None:
    """The figure a rule names, as ``gate.criteria.metric_value`` reads it (None: a figure
    the records do not hold)."""
    if name in ALPHA_CRITERIA:
        return _finite(getattr(alpha, ALPHA_CRITERIA[name], None))
    return _finite(getattr(metrics, name, None))


def _finite(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _broken(op: str) -> str:
    return {">=": "<", ">": "<=", "<=": ">", "<": ">="}[op]
