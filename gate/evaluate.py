"""Evaluate one iteration's variants: vetoes, criteria, fuzzy score, deflated Sharpe."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from backtest.benchmark import CASH
from backtest.contracts import BacktestResult, JobStatus, Metrics
from gate.aggregate import aggregate_variant, common_matrix, portfolio_series
from gate.alpha import AlphaStats, aligned_stats, deflated_alpha
from gate.contracts import Criteria, VariantEvaluation, Veto
from gate.criteria import is_met, metric_value, rule_label
from gate.fuzzy import FuzzyScorer
from gate.ledger import TrialLedger
from gate.progress import variant_progress
from gate.stats import deflated_sharpe_ratio, pbo_cscv

if TYPE_CHECKING:  # the check itself runs in backtest; the gate only judges its report
    from backtest.lookahead import LookaheadReport

MAX_ERROR_RATE = 0.5
MAX_ERRORS_KEPT = 5
PBO_MIN_VARIANTS = 8  # CSCV ranks are too coarse with fewer strategies

# The lookahead check of a variant about to pass (truncated re-runs, ``backtest.lookahead``):
# its report and the symbol (or the portfolio label) it ran on.
LookaheadCheck = Callable[[VariantEvaluation], "tuple[LookaheadReport, str]"]


def _vetoes(
    metrics: Metrics | None,
    n_jobs: int,
    n_errors: int,
    criteria: Criteria,
    integrity: str | None = None,
    bankrupt: str | None = None,
) -> list[tuple[Veto, str]]:
    v: list[tuple[Veto, str]] = []
    if integrity:
        v.append((Veto.INTEGRITY, f"integrity error: {integrity}"))
    if bankrupt:
        v.append((Veto.BANKRUPT, bankrupt))
    if n_jobs == 0:
        v.append((Veto.NO_RESULTS, "no backtest results for this variant"))
    elif n_errors == n_jobs:
        v.append((Veto.ALL_FAILED, f"every job failed ({n_errors}/{n_jobs} error or timeout)"))
    elif n_errors / n_jobs > MAX_ERROR_RATE:
        v.append(
            (
                Veto.ERROR_RATE,
                f"error rate {n_errors / n_jobs:.0%} > {MAX_ERROR_RATE:.0%} ({n_errors}/{n_jobs})",
            )
        )
    if metrics is None:
        if n_jobs and n_errors < n_jobs:
            v.append((Veto.NO_RETURNS, "no returns in any successful job: metrics undefined"))
        return v
    if metrics.n_trades < criteria.min_trades:
        v.append(
            (Veto.TOO_FEW_TRADES, f"too few trades: {metrics.n_trades} < {criteria.min_trades}")
        )
    if metrics.sharpe is None or not math.isfinite(metrics.sharpe):
        v.append((Veto.SHARPE_UNDEFINED, "Sharpe undefined (flat or constant returns)"))
    return v


def deflated_sharpe_of(m: Metrics | None, ledger: TrialLedger) -> float | None:
    """The DSR of ``m`` for every trial in ``ledger`` (the one definition: selection time and
    the verdict's "over all trials" use it alike): N and V are the ledger's deflation pair,
    effective clusters or raw trials as the run chose (``TrialLedger.deflation_trials``)."""
    if m is None or m.sharpe_per_period is None or m.n_obs < 2:
        return None
    return deflated_sharpe_ratio(
        m.sharpe_per_period,
        ledger.deflation_variance(),
        max(ledger.deflation_trials(), 1),
        m.n_obs,
        m.skew if m.skew is not None else 0.0,  # undefined moments: assume normal
        m.kurtosis if m.kurtosis is not None else 3.0,
    )


def lookahead_veto(report: LookaheadReport, symbol: str) -> tuple[Veto, str] | None:
    """The gate's verdict on one lookahead check (``backtest.lookahead``, truncated re-runs of
    a variant about to pass): its fill log failing the books, a measured bias, or a check that
    could not run (not evidence of bias, but no pass without it); None when it ran clean.
    The caller puts the variant out with ``VariantEvaluation.veto(*veto)``."""
    if report.integrity:  # its claimed fills are not its books: nothing it says counts
        return Veto.INTEGRITY, (
            f"integrity error in the lookahead check on {symbol}: {report.integrity}"
        )
    if report.biased:
        return Veto.LOOKAHEAD, (
            f"lookahead detected on {symbol}: {'; '.join(report.mismatches[:2])}"
        )
    if not report.checked:
        return Veto.LOOKAHEAD_UNCHECKED, f"lookahead check could not run: {report.error}"
    return None


def evaluate_variants(
    variants: list[tuple[str, str, str]],
    results: list[BacktestResult],
    criteria: Criteria,
    ledger: TrialLedger,
    *,
    scorer: FuzzyScorer | None = None,
    periods_per_year: int = 252,
    benchmark: Mapping[str, float] | None = None,
    benchmark_name: str = CASH,
    spa_pvalue: float | None = None,
    lookahead: LookaheadCheck | None = None,
    series: Mapping[str, Mapping[str, float]] | None = None,
) -> list[VariantEvaluation]:
    """One evaluation per ``(variant_id, family, trial_key)``, in input order; the one place
    a pass is decided.

    Records every variant in ``ledger`` (mutated) before any DSR is computed, so
    this iteration's trials deflate this iteration's winner too.

    ``benchmark`` (ISO date -> return, the in-sample windows) is what a variant must
    beat: a pass then needs a deflated alpha over it too. None is ``cash``: alpha is
    the mean return and the absolute DSR is the test, as it always was.
    ``spa_pvalue`` is the run's reality check over every trial so far; when given, a
    pass needs it at or below ``criteria.spa_threshold`` (None: not run, not required).
    ``lookahead`` checks each variant that passes everything else, in input order (the
    check is costly, so only those); a report that is biased, unchecked or an integrity
    error puts it out (``lookahead_veto``). None: no check (tests of the rest).
    ``series``: each variant's portfolio returns by date (``gate.aggregate.portfolio_series``)
    when the caller has them already (the gate node's run series): computed once a variant.
    """
    scorer = scorer or FuzzyScorer(criteria)
    by_variant: dict[str, list[BacktestResult]] = {}
    for r in results:
        by_variant.setdefault(r.variant_id, []).append(r)

    evals: list[VariantEvaluation] = []
    for variant_id, family, trial_key in variants:
        e = _evaluation(
            variant_id,
            family,
            trial_key,
            by_variant.get(variant_id, []),
            criteria,
            benchmark,
            benchmark_name,
            periods_per_year,
            spa_pvalue,
            None if series is None else series.get(variant_id),
        )
        evals.append(e)
        metrics, alpha = e.metrics, e.alpha
        sr = metrics.sharpe_per_period if metrics is not None else None
        ledger.record(
            trial_key,
            sr,
            n_obs=metrics.n_obs if metrics is not None else None,
            alpha_sharpe=alpha.alpha_sharpe_per_period if alpha is not None else None,
        )

    # One vectorised simulation for all variants.
    scores = scorer.score([e.metrics for e in evals], [e.alpha for e in evals])
    for e, s in zip(evals, scores, strict=True):
        _decide(e, s, criteria, ledger, benchmark is None, spa_pvalue, lookahead)
    return evals


def _evaluation(
    variant_id: str,
    family: str,
    trial_key: str,
    jobs: list[BacktestResult],
    criteria: Criteria,
    benchmark: Mapping[str, float] | None,
    benchmark_name: str,
    periods_per_year: int,
    spa_pvalue: float | None,
    by_date: Mapping[str, float] | None = None,
) -> VariantEvaluation:
    """One variant's evaluation from its jobs: metrics, errors, vetoes, criteria met, alpha
    (score, DSR and the pass come later, once every variant is in the ledger)."""
    metrics, fold_sharpes, _ = aggregate_variant(jobs, periods_per_year=periods_per_year)
    failed = [r for r in jobs if r.status != JobStatus.OK]
    errors = list(
        dict.fromkeys(
            f"{r.symbol}/fold{r.fold} {r.status}: {r.error or ''}".strip() for r in failed
        )
    )[:MAX_ERRORS_KEPT]
    broken = next((r for r in jobs if r.status == JobStatus.INTEGRITY_ERROR), None)
    # A bankrupt job is not averaged away with the others: its equity went to zero.
    bust = next((r for r in jobs if r.status == JobStatus.BANKRUPT), None)
    vetoes = _vetoes(
        metrics,
        len(jobs),
        len(failed),
        criteria,
        None if broken is None else f"{broken.symbol}/fold{broken.fold}: {broken.error}",
        None if bust is None else f"{bust.symbol}/fold{bust.fold} {bust.error}",
    )
    alpha = _alpha(jobs, metrics, benchmark, benchmark_name, periods_per_year, by_date)
    return VariantEvaluation(
        variant_id=variant_id,
        family=family,
        trial_key=trial_key,
        metrics=metrics,
        fold_sharpes=fold_sharpes,
        n_jobs=len(jobs),
        n_errors=len(failed),
        errors=errors,
        vetoes=[why for _, why in vetoes],
        veto_kinds=[kind for kind, _ in vetoes],
        criteria_met={
            rule_label(c): is_met(c, metric_value(metrics, c.metric, alpha)) for c in criteria.rules
        },
        alpha=alpha,
        spa_pvalue=spa_pvalue,
    )


def _decide(
    e: VariantEvaluation,
    s: float,
    criteria: Criteria,
    ledger: TrialLedger,
    cash: bool,
    spa_pvalue: float | None,
    lookahead: LookaheadCheck | None,
) -> None:
    """Set ``e``'s score (fuzzy score ``s``), progress, DSR, deflated alpha and pass; a pass
    then faces the lookahead check."""
    # A vetoed variant is out whatever its metrics say: score 0 keeps it from ranking first.
    e.score = 0.0 if e.vetoes else float(s)
    # The graded measure ranks and measures progress; the fuzzy score above decides.
    e.progress = variant_progress(criteria, e.metrics, e.alpha, e.veto_kinds)
    e.dsr = deflated_sharpe_of(e.metrics, ledger)
    if e.alpha is not None:
        e.alpha.deflated_alpha = deflated_alpha(
            e.alpha,
            trial_variance=ledger.trial_alpha_variance(),
            n_trials=ledger.deflation_trials(),
        )
    e.passed = (
        not e.vetoes
        and e.score >= criteria.score_threshold
        and e.dsr is not None
        and e.dsr >= criteria.dsr_threshold
        and all(e.criteria_met.values())
        and alpha_ok(e, criteria, cash=cash)
        and (spa_pvalue is None or spa_pvalue <= criteria.spa_threshold)
    )
    if e.passed and lookahead is not None:
        report, symbol = lookahead(e)
        if (veto := lookahead_veto(report, symbol)) is not None:
            e.veto(*veto)


def alpha_ok(e: VariantEvaluation, criteria: Criteria, *, cash: bool) -> bool:
    """Against a benchmark, the deflated alpha must clear its bar; against cash the
    absolute DSR is the whole test (the alpha series is the strategy's own)."""
    if cash:
        return True
    da = e.alpha.deflated_alpha if e.alpha is not None else None
    return da is not None and da >= criteria.deflated_alpha_threshold


def _alpha(
    jobs: list[BacktestResult],
    metrics: Metrics | None,
    benchmark: Mapping[str, float] | None,
    name: str,
    periods_per_year: int,
    by_date: Mapping[str, float] | None = None,
) -> AlphaStats | None:
    if metrics is None:
        return None
    series = portfolio_series(jobs) if by_date is None else by_date
    return aligned_stats(series, benchmark, name=name, periods_per_year=periods_per_year)


def rank_key(e: VariantEvaluation) -> tuple[bool, float, float, float, float]:
    """How variants rank, best highest: passed first, then the graded progress
    (``gate.progress``: it keeps ordering variants the fuzzy score floors alike, and puts
    vetoed ones last), then deflated alpha, DSR and Sharpe (None lowest)."""
    m = e.metrics
    sharpe = m.sharpe if m is not None and m.sharpe is not None else -1e9
    da = e.alpha.deflated_alpha if e.alpha is not None else None
    return (
        e.passed,
        e.progress,
        da if da is not None else -1.0,
        e.dsr if e.dsr is not None else -1.0,
        sharpe,
    )


def best_evaluation(evaluations: list[VariantEvaluation]) -> VariantEvaluation | None:
    """The variant a quant would look at (``rank_key``); the first of equals wins."""
    if not evaluations:
        return None
    return max(evaluations, key=rank_key)


def run_pbo(series: Mapping[str, Mapping[str, float]], *, n_blocks: int = 16) -> float | None:
    """PBO by CSCV over every variant of the run so far (variant id -> date -> return).

    The selection a run makes is among all the variants it tried, not among one
    iteration's five, so this is the overfitting probability of the run's choice.
    None below 8 variants with returns or with too few shared dates.
    """
    ids = sorted(v for v, s in series.items() if s)  # sorted: ties rank the same on resume
    if len(ids) < PBO_MIN_VARIANTS:
        return None
    m = common_matrix([dict(series[v]) for v in ids])
    if m.shape[0] < 2 * n_blocks:
        return None
    return pbo_cscv(m, n_blocks)
