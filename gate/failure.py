"""Failure analysis: why did nothing pass, and what should the next iteration change?

Rules a quant would apply, in order of what must be fixed first: broken code
(ALGORITHM_BUG) before a hopeless search (FUNDAMENTAL_IMPOSSIBILITY), a near miss
(PARAMETER_ISSUE) before a wrong premise (RESEARCH_GAP), structural defects
(DESIGN_FLAW) last. Every signal found is reported as a ``Hint`` even when it is not the
primary classification; the evidence sentences are for people and are never parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from backtest.benchmark import CASH
from gate.alpha import ALPHA_CRITERIA
from gate.contracts import (
    Criteria,
    Criterion,
    FailingCriterion,
    FailureAnalysis,
    FailureType,
    Hint,
    IterationSummary,
    VariantEvaluation,
    Veto,
)
from gate.criteria import attainment, is_met, metric_value, rule_label
from gate.evaluate import MAX_ERROR_RATE, best_evaluation

NEAR_ATTAINMENT = 0.75  # a failing criterion within 25% of its threshold is "near"
FAR_ATTAINMENT = 0.5  # below half-way to a threshold is "far"
DEEP_DD_FACTOR = 1.5  # drawdown beyond 1.5x the limit is a design problem, not tuning
COST_PF_BAND = (0.85, 1.15)  # profit factor ~1 with many trades: costs eat the edge
COLLAPSE_DROP = 1.0  # annualised Sharpe drop from early to late folds
LOW_RESEARCH_CONFIDENCE = 0.4
FUNDAMENTAL_MIN_ITERATIONS = 3
FUNDAMENTAL_SCORE = 0.35  # best fuzzy score stuck in "low" territory
NEAR_ZERO_DSR = 0.1
BROKEN_SHARE = 0.5  # at least this share of broken variants: fix the code before anything else
MARKET_BETA = 0.3  # at or above: a large part of the returns is the benchmark's own
ALPHA_T_SIGNIFICANT = 2.0  # HAC t of the intercept below this: no alpha to speak of

# Families that fight a regime (lower-cased regime -> family patterns).
REGIME_CONTRADICTIONS: dict[str, tuple[str, ...]] = {
    "trending-up": ("mean_reversion", "reversion", "contrarian"),
    "trending-down": ("mean_reversion", "reversion", "contrarian"),
    "range-bound": ("momentum", "trend", "breakout"),
    "high-vol-chop": ("trend", "breakout"),
}


# What a failing criterion calls for, by the metric it reads: the repair category whose moves
# (``strategies.repair``) aim at it. The alpha criteria all ask for returns of the strategy's
# own (hedged, long/short, cross-sectional); LOW_ALPHA, not MARKET_EXPOSURE, so that a failing
# beta rule does not by itself change the route (``gate.routing`` reads MARKET_EXPOSURE).
CRITERION_CATEGORIES: dict[str, Hint] = {
    "max_drawdown_pct": Hint.DRAWDOWN,
    "n_trades": Hint.TOO_FEW_TRADES,
    "turnover_annual": Hint.COST_DRAG,
    "win_rate_pct": Hint.WEAK_EXITS,
    "profit_factor": Hint.WEAK_EXITS,
    "deflated_alpha": Hint.LOW_ALPHA,
} | {name: Hint.LOW_ALPHA for name in ALPHA_CRITERIA}


def criterion_category(metric: str) -> Hint | None:
    """The repair category of a criterion on ``metric``, or None when no targeted repair
    exists (Sharpe, CAGR...: tuning and design changes at large)."""
    return CRITERION_CATEGORIES.get(metric)


def _norm(text: str) -> str:
    return re.sub(r"[\s\-]+", "_", text.strip().lower())


# The order bug hints are reported in (REFINE and FIX read them in this order).
_BUG_HINTS = (Hint.ZERO_TRADES, Hint.LOOKAHEAD, Hint.EXCEPTIONS, Hint.TOO_FEW_TRADES)


def _bug_signals(e: VariantEvaluation, min_trades: int) -> list[tuple[Hint | None, str]]:
    """What is broken in one variant: (hint for code or None, sentence for people)."""
    s: list[tuple[Hint | None, str]] = []
    if e.n_jobs and e.n_errors == e.n_jobs:
        s.append(
            (
                Hint.EXCEPTIONS,
                f"{e.variant_id}: all {e.n_jobs} jobs failed ({'; '.join(e.errors[:2])})",
            )
        )
    elif e.n_jobs and e.n_errors / e.n_jobs > MAX_ERROR_RATE:
        s.append((Hint.EXCEPTIONS, f"{e.variant_id}: {e.n_errors}/{e.n_jobs} jobs failed"))
    for kind, why in zip(e.veto_kinds, e.vetoes, strict=False):
        if kind == Veto.LOOKAHEAD:  # measured bias; an unchecked variant is not "biased"
            s.append((Hint.LOOKAHEAD, f"{e.variant_id}: {why}"))
        elif kind == Veto.INTEGRITY:  # code whose claims fail the books is broken code: FIX
            s.append((Hint.EXCEPTIONS, f"{e.variant_id}: {why}"))
        elif kind == Veto.BANKRUPT:  # sizing that can lose the whole capital is broken: FIX
            s.append((None, f"{e.variant_id}: {why}"))
    m = e.metrics
    if m is None:
        if not (e.n_jobs and e.n_errors == e.n_jobs):
            s.append((None, f"{e.variant_id}: no metrics (no returns produced)"))
    else:
        if m.n_trades == 0:
            s.append((Hint.ZERO_TRADES, f"{e.variant_id}: zero trades over {m.n_obs} bars"))
        elif m.n_trades < min_trades / 2:
            # Far too few trades is an entry logic that almost never fires: fix, not tune.
            s.append(
                (
                    Hint.TOO_FEW_TRADES,
                    f"{e.variant_id}: far too few trades ({m.n_trades} < {min_trades}/2)",
                )
            )
        if m.sharpe is None:
            s.append((None, f"{e.variant_id}: Sharpe undefined (flat returns)"))
    return s


@dataclass
class Findings:
    """What the analysis found so far: evidence for people, actions, and hints for code."""

    evidence: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)
    best_variant_id: str | None = None
    failing: list[FailingCriterion] = field(default_factory=list)  # the best's, worst first

    def hint(self, h: Hint) -> None:
        """Add ``h`` unless it is there already (first come, first kept)."""
        if h not in self.hints:
            self.hints.append(h)


def _design_signals(e: VariantEvaluation, criteria: Criteria, f: Findings) -> int:
    """Structural problems of one (usable) variant; returns how many were found."""
    m = e.metrics
    if m is None:
        return 0
    found = 0
    dd_rules = [c for c in criteria.rules if c.metric == "max_drawdown_pct" and c.op in ("<=", "<")]
    if dd_rules and m.max_drawdown_pct > DEEP_DD_FACTOR * dd_rules[0].threshold:
        found += 1
        f.hint(Hint.DEEP_DRAWDOWN)
        f.evidence.append(
            f"{e.variant_id}: max drawdown {m.max_drawdown_pct:.1f}% > {DEEP_DD_FACTOR}x the "
            f"{dd_rules[0].threshold:g}% limit"
        )
        f.actions.append("add an ATR stop (e.g. 2-3x ATR_14) or volatility-scaled position sizing")
    folds = [s for s in e.fold_sharpes if s is not None]
    if len(folds) >= 2:
        half = len(folds) // 2
        early = sum(folds[:half]) / half
        late = sum(folds[half:]) / (len(folds) - half)
        if (early > 0 and late < 0) or early - late > COLLAPSE_DROP:
            found += 1
            f.hint(Hint.FOLD_COLLAPSE)
            f.evidence.append(
                f"{e.variant_id}: fold Sharpe collapses from {early:.2f} (early folds) "
                f"to {late:.2f} (late folds)"
            )
            f.actions.append(
                "add a regime filter (e.g. ADX_14 or SMA_200 slope) so the edge is "
                "only traded where it held"
            )
    pf = m.profit_factor
    if (
        pf is not None
        and m.n_trades >= 2 * max(criteria.min_trades, 1)
        and (COST_PF_BAND[0] <= pf <= COST_PF_BAND[1])
    ):
        found += 1
        f.hint(Hint.COST_DRAG)
        f.evidence.append(
            f"{e.variant_id}: {m.n_trades} trades with profit factor {pf:.2f}: costs eat the edge"
        )
        f.actions.append("trade less: longer lookbacks, a signal threshold or a minimum hold")
    return found


def _market_exposure(e: VariantEvaluation, criteria: Criteria) -> str | None:
    """Evidence that ``e``'s returns are mostly its benchmark's, or None."""
    a = e.alpha
    if a is None or a.benchmark == CASH or a.beta is None or a.beta < MARKET_BETA:
        return None
    significant = a.t_stat is not None and a.t_stat >= ALPHA_T_SIGNIFICANT
    deflated_ok = (
        a.deflated_alpha is not None and a.deflated_alpha >= criteria.deflated_alpha_threshold
    )
    if significant or deflated_ok:
        return None
    return (
        f"{e.variant_id}: beta {a.beta:.2f} to {a.benchmark}, alpha {_fmt(a.alpha_annual_pct)}% a "
        f"year with HAC t {_fmt(a.t_stat)}, deflated alpha {_fmt(a.deflated_alpha)} < "
        f"{criteria.deflated_alpha_threshold:g}"
    )


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
# Figures of the raw returns that carry the benchmark's noise along with the alpha.
RAW_RETURN_METRICS = frozenset({"sharpe", "dsr"})


def hedgeable(e: VariantEvaluation, criteria: Criteria) -> bool:
    """An edge the raw returns hide: significant alpha (HAC t >= ``ALPHA_T_SIGNIFICANT``) that
    survives deflation for the trials made (deflated alpha at its bar), with beta >=
    ``MARKET_BETA`` and an appraisal ratio above the Sharpe. The raw Sharpe (and the DSR on
    it) then measures the alpha plus the benchmark's noise; hedging that exposure (long/short,
    a beta hedge) leaves the alpha with a Sharpe near its appraisal ratio."""
    a, m = e.alpha, e.metrics
    if a is None or m is None or a.benchmark == CASH:
        return False
    if a.beta is None or a.beta < MARKET_BETA or a.t_stat is None:
        return False
    if a.t_stat < ALPHA_T_SIGNIFICANT or a.deflated_alpha is None:
        return False
    if a.deflated_alpha < criteria.deflated_alpha_threshold or a.appraisal_ratio is None:
        return False
    return m.sharpe is None or a.appraisal_ratio > m.sharpe


def dsr_criterion(criteria: Criteria) -> Criterion:
    """The deflated-Sharpe bar as a criterion, to grade and name it like the rules."""
    return Criterion(metric="dsr", op=">=", threshold=criteria.dsr_threshold)


def _regime_mismatch(regime: str, families: list[str]) -> bool:
    bad = REGIME_CONTRADICTIONS.get(regime.strip().lower().replace("_", "-"), ())
    fams = [_norm(x) for x in families if x]
    return bool(fams) and bool(bad) and all(any(b in fam for b in bad) for fam in fams)


@dataclass(frozen=True)
class Situation:
    """What the rules read: the iteration's usable variants, its best, how far that best is
    from each failing criterion, and the search so far. Built once by ``analyse_failure``."""

    evaluations: list[VariantEvaluation]
    clean: list[VariantEvaluation]  # variants with metrics and no bug signal
    best: VariantEvaluation
    failing: dict[str, float]  # failing criterion label -> the best's attainment (1 = threshold)
    design_hits: int  # structural defects of the best (``_design_signals``)
    best_dsr: float  # the best DSR of the iteration (0 when none)
    mismatch: bool  # every family fights the regime
    all_far: bool  # every usable variant is far from some criterion
    criteria: Criteria
    history: list[IterationSummary]
    research_confidence: float  # over the research domains that had data
    regime: str
    families: list[str]
    research_coverage: float | None = None  # share of research domains with data


# A rule reads the situation, may add evidence, actions and hints, and either classifies the
# failure or passes (None) to the next rule.
Rule = Callable[[Situation, Findings], FailureAnalysis | None]


def analyse_failure(
    evaluations: list[VariantEvaluation],
    *,
    criteria: Criteria,
    history: list[IterationSummary],
    research_confidence: float,
    regime: str,
    families: list[str],
    research_coverage: float | None = None,
) -> FailureAnalysis:
    """Classify this iteration's failure. ``history`` holds the *previous* iterations;
    ``research_confidence`` is over the research domains that had data, and
    ``research_coverage`` the share of domains that had any (for the evidence).

    Broken code is judged first (nothing else is measurable until it runs and trades); then
    ``RULES`` in order, the first that classifies wins; ``far_from_everything`` is the rest.
    """
    f = Findings()
    bugs = {e.variant_id: _bug_signals(e, criteria.min_trades) for e in evaluations}
    clean = [e for e in evaluations if not bugs[e.variant_id] and e.metrics is not None]
    if broken := broken_code(evaluations, bugs, clean, f):
        return broken
    situation = _survey(
        evaluations,
        clean,
        criteria=criteria,
        history=history,
        research_confidence=research_confidence,
        regime=regime,
        families=families,
        research_coverage=research_coverage,
        f=f,
    )
    for rule in RULES:
        if (found := rule(situation, f)) is not None:
            return found
    return far_from_everything(situation, f)


def broken_code(
    evaluations: list[VariantEvaluation],
    bugs: dict[str, list[tuple[Hint | None, str]]],
    clean: list[VariantEvaluation],
    f: Findings,
) -> FailureAnalysis | None:
    """ALGORITHM_BUG when no variant is usable or at least ``BROKEN_SHARE`` are broken. Every
    variant's bug sentences go to the evidence, and its hints in ``_BUG_HINTS`` order."""
    buggy = [v for v, s in bugs.items() if s]
    for v in buggy:
        f.evidence.extend(why for _, why in bugs[v])
    found = {h for signals in bugs.values() for h, _ in signals}
    for h in _BUG_HINTS:
        if h in found:
            f.hint(h)
    if evaluations and (not clean or len(buggy) / len(evaluations) >= BROKEN_SHARE):
        share = len(buggy) / max(len(evaluations), 1)
        f.actions.insert(
            0,
            "fix the failing variants: read the errors, make every variant trade "
            "(check entry conditions and warm-up), never index bars forward",
        )
        return _out(
            FailureType.ALGORITHM_BUG,
            f"{len(buggy)}/{len(evaluations)} variants are broken (errors, zero trades, "
            "undefined metrics or lookahead)",
            0.6 + 0.4 * share,
            f,
        )
    if not evaluations:
        return _out(FailureType.ALGORITHM_BUG, "no variant was evaluated", 0.9, f)
    return None


def _survey(
    evaluations: list[VariantEvaluation],
    clean: list[VariantEvaluation],
    *,
    criteria: Criteria,
    history: list[IterationSummary],
    research_confidence: float,
    regime: str,
    families: list[str],
    f: Findings,
    research_coverage: float | None = None,
) -> Situation:
    """The situation of a search whose code runs: the best variant's failing criteria and
    structural defects go to the evidence (and hints) whatever the classification."""
    best = best_evaluation(clean) or clean[0]
    assert best.metrics is not None
    failed = _failing_criteria(best, criteria, f)
    failing = {c.label: c.attainment for c in failed}
    f.best_variant_id = best.variant_id
    f.failing = sorted(failed, key=lambda c: c.attainment)
    f.evidence.append(
        f"best variant {best.variant_id} ({best.family}): score {best.score:.2f}, DSR "
        f"{_fmt(best.dsr)}, Sharpe {_fmt(best.metrics.sharpe)}, max DD "
        f"{best.metrics.max_drawdown_pct:.1f}%, {best.metrics.n_trades} trades"
    )
    if failing:
        f.evidence.append(
            "failing criteria (attainment, 1 = threshold): "
            + ", ".join(f"{k} at {a:.2f}" for k, a in failing.items())
        )
    design_hits = _design_signals(best, criteria, f)
    mismatch = _regime_mismatch(regime, families)
    if mismatch:
        f.hint(Hint.REGIME_MISMATCH)
    return Situation(
        evaluations=evaluations,
        clean=clean,
        best=best,
        failing=failing,
        design_hits=design_hits,
        best_dsr=max((e.dsr for e in evaluations if e.dsr is not None), default=0.0),
        mismatch=mismatch,
        all_far=_all_far(clean, criteria),
        criteria=criteria,
        history=history,
        research_confidence=research_confidence,
        regime=regime,
        families=families,
        research_coverage=research_coverage,
    )


def _failing_criteria(
    best: VariantEvaluation, criteria: Criteria, f: Findings
) -> list[FailingCriterion]:
    """The criteria ``best`` fails, the trade floor included (then hinted in ``f``)."""
    assert best.metrics is not None
    # Alpha criteria (alpha_t, beta...) are read from the variant's AlphaStats, not Metrics.
    failed = [
        FailingCriterion(
            label=rule_label(c),
            metric=c.metric,
            op=c.op,
            threshold=c.threshold,
            value=value,
            attainment=attainment(c, value),
            category=criterion_category(c.metric),
        )
        for c in criteria.rules
        if not is_met(c, value := metric_value(best.metrics, c.metric, best.alpha))
    ]
    if best.metrics.n_trades < criteria.min_trades:  # the trade floor is a criterion too
        failed.append(
            FailingCriterion(
                label=f"min_trades>={criteria.min_trades}",
                metric="n_trades",
                op=">=",
                threshold=criteria.min_trades,
                value=best.metrics.n_trades,
                attainment=best.metrics.n_trades / criteria.min_trades,
                category=Hint.TOO_FEW_TRADES,
            )
        )
        f.hint(Hint.TOO_FEW_TRADES)
    return failed


def _all_far(clean: list[VariantEvaluation], criteria: Criteria) -> bool:
    """Whether every clean variant is far (below ``FAR_ATTAINMENT``) on some criterion."""
    return all(
        any(
            attainment(c, metric_value(e.metrics, c.metric, e.alpha)) < FAR_ATTAINMENT
            for c in criteria.rules
        )
        for e in clean
    )


def no_edge_anywhere(s: Situation, f: Findings) -> FailureAnalysis | None:
    """FUNDAMENTAL_IMPOSSIBILITY: a search that keeps failing everywhere, over several
    iterations and families, with no deflated edge: stop spending trials."""
    past = s.history[-(FUNDAMENTAL_MIN_ITERATIONS - 1) :]
    tried = {_norm(h.family) for h in s.history if h.family}
    tried |= {_norm(e.family) for e in s.evaluations}
    if not (
        len(s.history) + 1 >= FUNDAMENTAL_MIN_ITERATIONS
        and all(h.best_score < FUNDAMENTAL_SCORE for h in past)
        and s.best.score < FUNDAMENTAL_SCORE
        and s.all_far
        and s.best_dsr < NEAR_ZERO_DSR
        and len(tried) >= 2
    ):
        return None
    f.evidence.append(
        f"{len(s.history) + 1} iterations, {len(tried)} families ({', '.join(sorted(tried))}): "
        f"best scores {[round(h.best_score, 2) for h in past] + [round(s.best.score, 2)]}, "
        f"best DSR {s.best_dsr:.3f}"
    )
    f.actions.append(
        "stop: no family shows an edge that survives deflation on this data; "
        "try another universe, timeframe or data source"
    )
    f.hint(Hint.NO_EDGE)
    return _out(
        FailureType.FUNDAMENTAL_IMPOSSIBILITY,
        "every family stays far from the criteria and the deflated Sharpe is ~0",
        0.7 + 0.1 * min(len(s.history) + 1 - FUNDAMENTAL_MIN_ITERATIONS, 2),
        f,
    )


def market_exposure(s: Situation, f: Findings) -> FailureAnalysis | None:
    """DESIGN_FLAW when the best's returns are its benchmark's: tuning a market exposure only
    finds more of it."""
    exposure = _market_exposure(s.best, s.criteria)
    if exposure is None:
        return None
    f.hint(Hint.MARKET_EXPOSURE)
    f.evidence.append(exposure)
    f.actions.insert(
        0,
        "make the returns the strategy's own: time the exposure (trend or volatility "
        "regime filter, exits), hedge it (long/short) or rank across names, rather than "
        "tuning a design that mostly holds the market",
    )
    return _out(
        FailureType.DESIGN_FLAW,
        "the returns are market exposure: " + exposure.split(": ", 1)[1],
        0.75,
        f,
    )


def hedgeable_edge(s: Situation, f: Findings) -> FailureAnalysis | None:
    """DESIGN_FLAW (hedge it) when the best's alpha survives deflation (:func:`hedgeable`) and
    what it fails is the raw Sharpe, its DSR and structural criteria only: the benchmark's
    noise in the raw returns is what fails. The Sharpe and the DSR get the MARKET_EXPOSURE
    repairs (long/short, a beta hedge), so the loop pursues the edge instead of tuning more
    trials on the same exposure or researching a new premise."""
    best, criteria = s.best, s.criteria
    if not hedgeable(best, criteria):
        return None
    dsr_short = best.dsr is not None and best.dsr < criteria.dsr_threshold
    raw = [c for c in f.failing if c.metric in RAW_RETURN_METRICS]
    if not (raw or dsr_short):
        return None
    if any(c.metric not in RAW_RETURN_METRICS | STRUCTURAL_METRICS for c in f.failing):
        return None
    hedge = Hint.MARKET_EXPOSURE
    f.failing = [
        c.model_copy(update={"category": hedge}) if c.metric in RAW_RETURN_METRICS else c
        for c in f.failing
    ]
    if dsr_short:
        bar = dsr_criterion(criteria)
        f.failing.append(
            FailingCriterion(
                label=rule_label(bar),
                metric="dsr",
                op=bar.op,
                threshold=bar.threshold,
                value=best.dsr,
                attainment=attainment(bar, best.dsr),
                category=hedge,
            )
        )
        f.failing.sort(key=lambda c: c.attainment)
    f.hint(hedge)
    a = best.alpha
    assert a is not None and a.beta is not None  # hedgeable() checked both
    f.evidence.append(
        f"{best.variant_id}: alpha {_fmt(a.alpha_annual_pct)}% a year with HAC t "
        f"{_fmt(a.t_stat)} and deflated alpha {_fmt(a.deflated_alpha)} survives deflation, "
        f"but beta {a.beta:.2f} to {a.benchmark} puts its noise in the raw returns: Sharpe "
        f"{_fmt(best.metrics.sharpe if best.metrics else None)} against an appraisal ratio "
        f"{_fmt(a.appraisal_ratio)}, DSR {_fmt(best.dsr)}"
    )
    f.actions.insert(0, f"hedge {best.variant_id}: long/short or a beta hedge keeps the alpha")
    return _out(
        FailureType.DESIGN_FLAW,
        f"a deflated edge (alpha t {a.t_stat:.2f}, deflated alpha {_fmt(a.deflated_alpha)}) "
        f"carries beta {a.beta:.2f} of market noise: hedge it so the Sharpe is the alpha's",
        0.7,
        f,
    )


def near_miss(s: Situation, f: Findings) -> FailureAnalysis | None:
    """PARAMETER_ISSUE: the best is near every failing threshold and has no structural
    defect, so tuning is the cheapest fix."""
    if not (
        s.failing and all(a >= NEAR_ATTAINMENT for a in s.failing.values()) and s.design_hits == 0
    ):
        return None
    f.hint(Hint.NEAR_THRESHOLD)
    f.actions.insert(
        0,
        f"tune {s.best.variant_id}'s parameters in small steps around the "
        f"current values toward: {', '.join(s.failing)}",
    )
    worst = min(s.failing.values())
    return _out(
        FailureType.PARAMETER_ISSUE,
        f"best variant is within {1 - worst:.1%} of every failing threshold "
        f"({', '.join(s.failing)})",
        min(0.9, 0.5 + worst * 0.4),
        f,
    )


def repairable_edge(s: Situation, f: Findings) -> FailureAnalysis | None:
    """PARAMETER_ISSUE when the best has a measured edge (HAC alpha t over a benchmark at
    ``ALPHA_T_SIGNIFICANT`` or more, or a DSR at its bar) and misses only criteria that have a
    targeted repair (``criterion_category``), none far: pursue it along what failed (a
    drawdown: a volatility target, a regime filter, stops) rather than blame the premise."""
    if not f.failing or s.design_hits:
        return None
    if any(c.category is None or c.attainment < FAR_ATTAINMENT for c in f.failing):
        return None
    best, a = s.best, s.best.alpha
    alpha_t = a.t_stat if a is not None and a.benchmark != CASH else None
    dsr_ok = best.dsr is not None and best.dsr >= s.criteria.dsr_threshold
    if not ((alpha_t is not None and alpha_t >= ALPHA_T_SIGNIFICANT) or dsr_ok):
        return None
    edge = f"alpha t {alpha_t:.2f}" if alpha_t is not None else f"DSR {_fmt(best.dsr)}"
    misses = ", ".join(
        f"{c.label} at {_fmt(c.value)} (attainment {c.attainment:.2f}, repair {c.category})"
        for c in f.failing
    )
    f.actions.insert(0, f"repair {best.variant_id} along what failed: {misses}")
    return _out(
        FailureType.PARAMETER_ISSUE,
        f"a measured edge ({edge}) misses only repairable criteria: {misses}",
        0.6,
        f,
    )


def met_but_not_deflated(s: Situation, f: Findings) -> FailureAnalysis | None:
    """DESIGN_FLAW when every criterion is met but the DSR is below its bar for the trials
    counted: more tuning would only add trials."""
    best = s.best
    if s.failing or best.dsr is None or best.dsr >= s.criteria.dsr_threshold:
        return None
    f.hint(Hint.LOW_DSR)
    f.evidence.append(
        f"criteria met but DSR {best.dsr:.3f} < {s.criteria.dsr_threshold} after all trials counted"
    )
    f.actions.insert(
        0,
        "strengthen the edge (filters, better entries) rather than tuning; "
        "every further trial raises the bar",
    )
    return _out(
        FailureType.DESIGN_FLAW,
        "criteria met but the edge does not survive deflation for the trials made",
        0.6,
        f,
    )


def met_but_not_beyond_benchmark(s: Situation, f: Findings) -> FailureAnalysis | None:
    """DESIGN_FLAW when criteria and DSR are met but the deflated alpha over the benchmark, or
    Hansen's SPA test over every trial, is not."""
    best, criteria = s.best, s.criteria
    if s.failing or best.dsr is None or best.dsr < criteria.dsr_threshold:
        return None
    da = best.alpha.deflated_alpha if best.alpha is not None else None
    if (
        best.alpha is not None
        and best.alpha.benchmark != CASH
        and (da is None or da < criteria.deflated_alpha_threshold)
    ):
        f.hint(Hint.LOW_ALPHA)
        f.evidence.append(
            f"criteria and DSR met but the deflated alpha over {best.alpha.benchmark} is "
            f"{_fmt(da)} < {criteria.deflated_alpha_threshold}"
        )
        f.actions.insert(0, "strengthen the edge over the benchmark rather than tuning")
        return _out(
            FailureType.DESIGN_FLAW,
            "the edge does not beat the benchmark once the trials are counted",
            0.6,
            f,
        )
    if best.spa_pvalue is not None and best.spa_pvalue > criteria.spa_threshold:
        f.hint(Hint.REALITY_CHECK)
        f.evidence.append(
            f"Hansen's SPA p-value {best.spa_pvalue:.3f} > {criteria.spa_threshold} (over "
            "the run's looks): the best "
            "of the trials so far is not distinguishable from luck against the benchmark"
        )
        f.actions.insert(0, "strengthen the edge; more variations of the same idea add trials")
        return _out(
            FailureType.DESIGN_FLAW,
            "the best trial does not survive the reality check over every trial",
            0.6,
            f,
        )
    return None


def weak_premise(s: Situation, f: Findings) -> FailureAnalysis | None:
    """RESEARCH_GAP: weak research or families fighting the regime. Low research confidence
    alone blames the premise only while the ideas score below the bar: a design that scores
    above it is worth refining, and a research round re-reads the same data."""
    # The best fuzzy score of any clean variant: the best by graded progress may score less.
    top_score = max(e.score for e in s.clean)
    weak = (
        s.research_confidence < LOW_RESEARCH_CONFIDENCE and top_score < s.criteria.score_threshold
    )
    if not (weak or s.mismatch):
        return None
    if weak:
        f.hint(Hint.LOW_RESEARCH_CONFIDENCE)
        seen = (
            ""
            if s.research_coverage is None
            else f" over the domains with data (coverage {s.research_coverage:.2f})"
        )
        f.evidence.append(
            f"research confidence {s.research_confidence:.2f} < {LOW_RESEARCH_CONFIDENCE}{seen}"
        )
    if s.mismatch:
        f.evidence.append(f"families {s.families} contradict the {s.regime} regime")
        f.actions.append(f"research families suited to a {s.regime} regime")
    f.actions.insert(0, "go back to research with this failure as feedback")
    return _out(
        FailureType.RESEARCH_GAP,
        "the research premise is weak or contradicts the regime",
        0.75 if s.mismatch else 0.6,
        f,
    )


def structural_defects(s: Situation, f: Findings) -> FailureAnalysis | None:
    """DESIGN_FLAW naming the best's structural defects (deep drawdown, fold collapse, cost
    drag), when it has any."""
    if not s.design_hits:
        return None
    return _out(
        FailureType.DESIGN_FLAW,
        f"{s.design_hits} structural defect(s) in the best variant: "
        + ", ".join(
            h.value
            for h in f.hints
            if h in (Hint.DEEP_DRAWDOWN, Hint.FOLD_COLLAPSE, Hint.COST_DRAG)
        ),
        min(0.9, 0.6 + 0.1 * s.design_hits),
        f,
    )


def far_from_everything(s: Situation, f: Findings) -> FailureAnalysis:
    """DESIGN_FLAW, the rest: far from the criteria with no single defect to repair."""
    f.hint(Hint.FAR_FROM_THRESHOLDS)
    f.actions.insert(
        0, "change the design: add a trend/regime filter, ATR stops or different entry signals"
    )
    return _out(
        FailureType.DESIGN_FLAW,
        "far from the criteria with no single defect: the design lacks an edge",
        0.45,
        f,
    )


# What must be fixed first comes first: a hopeless search, returns that are the market's, a
# deflated edge the market's noise hides, a near miss, a measured edge missing only
# repairable criteria, an edge the deflation or the benchmark takes away, a weak premise,
# defects.
RULES: tuple[Rule, ...] = (
    no_edge_anywhere,
    market_exposure,
    hedgeable_edge,
    near_miss,
    repairable_edge,
    met_but_not_deflated,
    met_but_not_beyond_benchmark,
    weak_premise,
    structural_defects,
)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _out(kind: FailureType, cause: str, confidence: float, f: Findings) -> FailureAnalysis:
    """The analysis; each failing criterion's repair category joins the hints after the
    rules' own, so the hints the rules found keep their order."""
    for c in f.failing:
        if c.category is not None:
            f.hint(c.category)
    return FailureAnalysis(
        failure_type=kind,
        root_cause=cause,
        confidence=round(min(max(confidence, 0.0), 1.0), 3),
        evidence=f.evidence,
        actions=list(dict.fromkeys(f.actions)),
        hints=f.hints,
        best_variant_id=f.best_variant_id,
        failing=f.failing,
    )
