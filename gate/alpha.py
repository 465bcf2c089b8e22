"""Alpha over a benchmark, and a data-snooping test over every trial.

A long-biased rule on a market that drifts up earns a positive Sharpe from exposure
alone, so "Sharpe > 0" is not an edge. The question a quant asks is whether the
strategy beats holding what it trades: the intercept of its daily returns regressed
on the benchmark's (alpha), with Newey-West (HAC) errors because strategy returns are
autocorrelated (positions persist) and heteroskedastic. ``deflated_alpha`` applies the
deflated Sharpe ratio to the alpha series ``r_s - beta * r_b`` (whose per-period Sharpe
is the appraisal ratio), so the trial count deflates alpha as it deflates Sharpe.

``run_spa`` is Hansen's Superior Predictive Ability test (``arch``) of all the run's
trials against the benchmark: the probability, under "no trial beats the benchmark",
of seeing a best trial this good given how many were tried and how they co-move. Each
trial is compared with the benchmark held at the trial's own beta (its loss is minus its
alpha series ``r - beta * r_b``): on a market that drifts up, a timing rule with real alpha
and beta 0.2 earns less than buy & hold in raw return, so "beats the benchmark" must mean
"beats the same exposure to it", the question the alpha regression asks of one trial.

Against ``cash`` (a zero benchmark) the regression has no slope: alpha is the mean
return and the alpha series is the strategy's own, so the tests are the absolute ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from pydantic import BaseModel

from gate.spa_exact import consistent_pvalue
from gate.stats import deflated_sharpe_ratio

SPA_REPS = 1_000
# A p-value the bootstrap must resolve to decide: it is re-run with enough reps that a
# threshold this small is SPA_RESOLVE exceedances away from zero (capped: cost is linear).
SPA_RESOLVE = 10
SPA_MAX_REPS = 25_000
SPA_BLOCK = 10  # mean block length of the stationary bootstrap (daily returns, ~2 weeks)
MIN_ALIGNED_OBS = 30  # below this a regression on daily returns says nothing
SPA_MIN_COVERAGE = 0.5  # a trial with returns on fewer of the benchmark's dates is left out


class AlphaStats(BaseModel):
    """One return series against a benchmark, on the dates both have. Annualised unless
    the name says per period; None when undefined (flat series, too few dates)."""

    benchmark: str
    n_obs: int
    alpha_annual_pct: float | None = None
    beta: float | None = None  # None against cash: there is nothing to regress on
    t_stat: float | None = None  # HAC (Newey-West) t-statistic of the intercept
    hac_lags: int = 0
    appraisal_ratio: float | None = None  # alpha / residual volatility, annualised
    information_ratio: float | None = None  # mean / std of (strategy - benchmark), annualised
    excess_sharpe: float | None = None  # strategy Sharpe - benchmark Sharpe, same dates
    benchmark_sharpe: float | None = None
    alpha_sharpe_per_period: float | None = None  # the appraisal ratio per period (for the DSR)
    alpha_skew: float | None = None
    alpha_kurtosis: float | None = None  # raw (normal = 3)
    deflated_alpha: float | None = None


# Criteria names that read an AlphaStats field (the rest read Metrics).
ALPHA_CRITERIA: dict[str, str] = {
    "alpha_t": "t_stat",
    "alpha_annual_pct": "alpha_annual_pct",
    "beta": "beta",
    "information_ratio": "information_ratio",
    "appraisal_ratio": "appraisal_ratio",
    "excess_sharpe": "excess_sharpe",
}


def newey_west_lags(n_obs: int) -> int:
    """The usual automatic bandwidth, floor(4 (T/100)^(2/9))."""
    return int(math.floor(4.0 * (max(n_obs, 1) / 100.0) ** (2.0 / 9.0)))


def align(
    strategy: Mapping[str, float] | pd.Series, benchmark: Mapping[str, float] | pd.Series
) -> tuple[np.ndarray, np.ndarray]:
    """The two series on the dates both have, in date order (keys are ISO dates or
    timestamps; both sides must use the same kind)."""
    s = pd.Series(strategy, dtype=float)
    b = pd.Series(benchmark, dtype=float)
    both = pd.concat([s.rename("s"), b.rename("b")], axis=1, join="inner").dropna().sort_index()
    return both["s"].to_numpy(), both["b"].to_numpy()


def _sharpe(x: np.ndarray) -> float | None:
    sd = float(np.std(x, ddof=1)) if x.size >= 2 else 0.0
    return float(np.mean(x)) / sd if sd > 1e-15 else None


def alpha_stats(
    strategy: np.ndarray,
    benchmark: np.ndarray | None,
    *,
    name: str,
    periods_per_year: int = 252,
    hac_lags: int | None = None,
) -> AlphaStats:
    """Regress ``strategy`` on ``benchmark`` (aligned per-period returns) with HAC errors.

    ``benchmark`` None (or identically zero: cash) regresses on a constant only.
    """
    import statsmodels.api as sm  # heavy: imported by the gate, never by backtest workers

    y = np.asarray(strategy, dtype=float)
    n = int(y.size)
    if n < MIN_ALIGNED_OBS:
        return AlphaStats(benchmark=name, n_obs=n)
    x = None if benchmark is None else np.asarray(benchmark, dtype=float)
    if x is not None and x.shape != y.shape:
        raise ValueError(f"strategy ({y.shape}) and benchmark ({x.shape}) must be aligned")
    cash = x is None or float(np.std(x)) <= 1e-15
    lags = newey_west_lags(n) if hac_lags is None else int(hac_lags)
    design = np.ones((n, 1)) if cash else sm.add_constant(x, prepend=True)
    fit = sm.OLS(y, design).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    alpha = float(fit.params[0])
    beta = None if cash else float(fit.params[1])
    t = float(fit.tvalues[0]) if math.isfinite(float(fit.tvalues[0])) else None
    alpha_series = y if cash else y - beta * x  # type: ignore[operator]
    sr_alpha = _sharpe(alpha_series)
    root = math.sqrt(periods_per_year)
    sr_s = _sharpe(y)
    sr_b = None if cash else _sharpe(x)  # type: ignore[arg-type]  # cash covers x None
    active = y if cash else y - x
    sr_active = _sharpe(active)
    moments = pd.Series(alpha_series)
    skew = float(moments.skew()) if n >= 3 and sr_alpha is not None else None
    kurt = float(moments.kurt()) + 3.0 if n >= 4 and sr_alpha is not None else None
    return AlphaStats(
        benchmark=name,
        n_obs=n,
        alpha_annual_pct=alpha * periods_per_year * 100.0,
        beta=beta,
        t_stat=t,
        hac_lags=lags,
        appraisal_ratio=None if sr_alpha is None else sr_alpha * root,
        information_ratio=None if sr_active is None else sr_active * root,
        excess_sharpe=None if sr_s is None else (sr_s - (sr_b or 0.0)) * root,
        benchmark_sharpe=None if sr_b is None else sr_b * root,
        alpha_sharpe_per_period=sr_alpha,
        alpha_skew=skew if skew is not None and math.isfinite(skew) else None,
        alpha_kurtosis=kurt if kurt is not None and math.isfinite(kurt) else None,
    )


def deflated_alpha(stats: AlphaStats, *, trial_variance: float, n_trials: int) -> float | None:
    """The deflated Sharpe ratio of the alpha series for ``n_trials`` trials whose alpha
    Sharpes disperse with ``trial_variance`` (per period); None when undefined."""
    if stats.alpha_sharpe_per_period is None or stats.n_obs < 2:
        return None
    return deflated_sharpe_ratio(
        stats.alpha_sharpe_per_period,
        trial_variance,
        max(n_trials, 1),
        stats.n_obs,
        stats.alpha_skew if stats.alpha_skew is not None else 0.0,
        stats.alpha_kurtosis if stats.alpha_kurtosis is not None else 3.0,
    )


def trial_matrix(
    trials: Mapping[str, Mapping[str, float]], benchmark: Mapping[str, float]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(trial ids, T x K trial returns, T benchmark returns) on the dates they all share.

    A trial with returns on fewer than half the benchmark's dates (most of its jobs
    failed) is left out rather than shrinking every other trial's sample to its own.
    """
    bench_dates = set(benchmark)
    keep = sorted(
        k
        for k, s in trials.items()
        if s and len(bench_dates.intersection(s)) >= SPA_MIN_COVERAGE * max(len(bench_dates), 1)
    )
    if not keep:
        return [], np.zeros((0, 0)), np.zeros(0)
    common = sorted(bench_dates.intersection(*(set(trials[k]) for k in keep)))
    m = np.array([[trials[k][d] for k in keep] for d in common], dtype=float)
    return keep, m.reshape(len(common), len(keep)), np.array([benchmark[d] for d in common])


def long_run_variance(x: np.ndarray, block_size: float = SPA_BLOCK) -> np.ndarray:
    """Each column's long-run variance of its mean (times T) under the stationary bootstrap:
    Politis and Romano's kernel, the estimator ``arch`` and Hansen (2005) use for the SPA's
    studentization. The autocovariances come from one FFT per column, O(T log T)."""
    d = np.asarray(x, dtype=float)
    d = d.reshape(d.shape[0], -1)
    t = d.shape[0]
    dm = d - d.mean(axis=0)
    size = 1 << int(2 * t - 1).bit_length()
    spec = np.fft.rfft(dm, n=size, axis=0)
    acov = np.fft.irfft(spec * np.conj(spec), n=size, axis=0)[:t] / t  # gamma_0 .. gamma_{T-1}
    i = np.arange(1, t, dtype=float)
    p = 1.0 / block_size
    kappa = (1.0 - i / t) * (1.0 - p) ** i + (i / t) * (1.0 - p) ** (t - i)
    return acov[0] + 2.0 * (kappa[:, None] * acov[1:]).sum(axis=0)


def spa_pvalue(
    models: np.ndarray,
    benchmark: np.ndarray,
    *,
    seed: int = 0,
    reps: int = SPA_REPS,
    block_size: int = SPA_BLOCK,
) -> float | None:
    """Hansen's SPA p-value (the "consistent" one) that no column of ``models`` (T x K
    returns) beats ``benchmark`` (T returns) on mean return; None with too few dates.

    Studentized as Hansen's test is: each loss differential is divided by its long-run
    standard deviation before ``arch`` bootstraps it. ``arch.bootstrap.SPA`` (8.0) records
    ``studentize=True`` but compares raw mean differentials, which is White's reality check:
    one volatile zero-mean trial then widens the bootstrap maximum past a calm trial with
    t 5, and the test loses the power studentization exists to keep. A column with no
    variance (never trades) is left out: it cannot beat the benchmark.
    """
    m = np.asarray(models, dtype=float)
    b = np.asarray(benchmark, dtype=float)
    if m.ndim != 2 or m.shape[1] == 0 or m.shape[0] < MIN_ALIGNED_OBS or b.shape[0] != m.shape[0]:
        return None
    # Losses: SPA asks whether some model has a lower expected loss than the benchmark.
    diff = m - b[:, None]  # arch's loss differential (benchmark loss - model loss)
    omega = np.sqrt(np.maximum(long_run_variance(diff, block_size), 0.0))
    live = omega > 1e-12 * max(float(np.abs(diff).max()), 1e-300)
    if not live.any():
        return None
    scaled = diff[:, live] / omega[live]
    # arch.bootstrap.SPA(np.zeros(T), -scaled, ...).pvalues["consistent"], bit for bit,
    # without the work the gate does not read (gate.spa_exact).
    return consistent_pvalue(-scaled, block_size=block_size, reps=reps, seed=seed)


def hedged(models: np.ndarray, benchmark: np.ndarray) -> np.ndarray:
    """Each column minus the benchmark held at that column's OLS beta: the alpha series
    (plus the intercept). A zero benchmark (cash) leaves the columns as they are."""
    m = np.asarray(models, dtype=float)
    b = np.asarray(benchmark, dtype=float)
    bc = b - b.mean()
    var = float(bc @ bc)
    if var <= 1e-30:
        return m.copy()
    betas = (bc @ (m - m.mean(axis=0))) / var
    return m - np.outer(b, betas)


def run_spa(
    trials: Mapping[str, Mapping[str, float]],
    benchmark: Mapping[str, float],
    *,
    seed: int = 0,
    resolve: float | None = None,
) -> tuple[float | None, int]:
    """(SPA p-value, trials tested): does any trial beat the benchmark held at its beta?

    ``resolve``: the threshold the p-value will be compared with. When it is finer than
    the bootstrap's ``SPA_REPS`` can resolve and the p-value is near it, the test is re-run
    with more reps (``spa_reps_for``): 0 exceedances in 1,000 reps is no evidence of p below
    0.0005."""
    keep, m, b = trial_matrix(trials, benchmark)
    if not keep:
        return None, 0
    losses, zero = hedged(m, b), np.zeros_like(b)
    p = spa_pvalue(losses, zero, seed=seed)
    reps = spa_reps_for(resolve, p)
    if reps > SPA_REPS:
        p = spa_pvalue(losses, zero, seed=seed, reps=reps)
    return p, len(keep)


def spa_reps_for(threshold: float | None, pvalue: float | None, reps: int = SPA_REPS) -> int:
    """The bootstrap reps a decision ``pvalue <= threshold`` needs: ``reps`` unless the
    threshold is under ``SPA_RESOLVE / reps`` and the p-value is within that resolution of it,
    then enough that the threshold is ``SPA_RESOLVE`` exceedances (at most ``SPA_MAX_REPS``)."""
    if threshold is None or pvalue is None or threshold <= 0 or threshold * reps >= SPA_RESOLVE:
        return reps
    if pvalue * reps > SPA_RESOLVE:  # clearly above the threshold: more reps change nothing
        return reps
    return min(SPA_MAX_REPS, max(reps, math.ceil(SPA_RESOLVE / threshold)))


def spa_look_factor(look: int) -> int:
    """How many times a run's ``look``-th reality check (1-based: one per gate) is stricter
    than one test at the nominal level: ``look * (look + 1)``.

    The run tests SPA at every iteration and stops at its first pass, so each look spends
    part of the 5 %: ``alpha / (k (k + 1))`` at look k, which sums to ``alpha`` over any
    number of looks (a resumed run keeps counting). Spending the most early keeps the power
    where planted edges are found (one or two iterations); a lead pursued for ten iterations
    must beat its search by more, which is what ten looks at the same data cost."""
    if look < 1:
        raise ValueError(f"look must be >= 1 (the gate's iteration), got {look}")
    return look * (look + 1)


def spa_over_looks(pvalue: float | None, look: int) -> float | None:
    """The reality check's p-value adjusted for the run's ``look`` looks
    (``spa_look_factor``), capped at 1: what a pass compares with ``spa_threshold``."""
    if pvalue is None:
        return None
    return min(1.0, pvalue * spa_look_factor(look))


def criteria_value(stats: AlphaStats | None, name: str) -> float | None:
    """The AlphaStats figure a criterion names (``alpha_t`` -> ``t_stat``), finite or None."""
    if stats is None or name not in ALPHA_CRITERIA:
        return None
    v = getattr(stats, ALPHA_CRITERIA[name])
    return float(v) if v is not None and math.isfinite(float(v)) else None


def aligned_stats(
    strategy: Mapping[str, float],
    benchmark: Mapping[str, float] | None,
    *,
    name: str,
    periods_per_year: int,
) -> AlphaStats:
    """``alpha_stats`` of a date -> return mapping against another (None: cash)."""
    if benchmark is None:
        y = pd.Series(strategy, dtype=float).sort_index().to_numpy()
        return alpha_stats(y, None, name=name, periods_per_year=periods_per_year)
    y, x = align(strategy, benchmark)
    return alpha_stats(y, x, name=name, periods_per_year=periods_per_year)
