"""Multiple-testing statistics of Bailey & López de Prado.

Conventions: Sharpe ratios are per period (not annualised) unless a function says
otherwise, kurtosis is raw (normal = 3), skew is the sample skewness. These are the
numbers ``backtest.metrics.compute_metrics`` reports as ``sharpe_per_period``,
``skew`` and ``kurtosis``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

EULER_GAMMA = 0.5772156649015329
_VAR_FLOOR = 1e-12  # the SR-estimator variance term can round to <= 0 on odd sample moments


def _norm():
    """scipy's standard normal, imported on first use: scipy.stats takes ~0.5 s to import,
    and modules that only need this package's contracts (``swarm.analyze``) should not pay."""
    from scipy.stats import norm

    return norm


def expected_max_sharpe(n_trials: int) -> float:
    """E[max] of ``n_trials`` independent standard normals (False Strategy Theorem).

    Standard-normal units: multiply by the trials' Sharpe standard deviation to get
    the Sharpe a pure-noise search would be expected to "find".
    """
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    if n_trials == 1:
        return 0.0  # a single trial involves no selection: no inflation
    n = float(n_trials)
    return (1.0 - EULER_GAMMA) * _norm().ppf(1.0 - 1.0 / n) + EULER_GAMMA * _norm().ppf(
        1.0 - 1.0 / (n * math.e)
    )


def _sr_std(sharpe: float, n_obs: int, skew: float, kurtosis: float) -> float:
    """Standard error of an estimated Sharpe under non-normal returns (Mertens)."""
    var = 1.0 - skew * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2
    return math.sqrt(max(var, _VAR_FLOOR) / (n_obs - 1))


def probabilistic_sharpe_ratio(
    sharpe: float,
    n_obs: int,
    skew: float,
    kurtosis: float,
    target_sharpe: float = 0.0,
) -> float:
    """P(true Sharpe > ``target_sharpe``) given the observed per-period Sharpe."""
    if n_obs < 2:
        raise ValueError(f"n_obs must be >= 2, got {n_obs}")
    z = (sharpe - target_sharpe) / _sr_std(sharpe, n_obs, skew, kurtosis)
    return float(_norm().cdf(z))


def deflated_sharpe_ratio(
    sharpe: float,
    trial_sharpe_variance: float,
    n_trials: int,
    n_obs: int,
    skew: float,
    kurtosis: float,
) -> float:
    """PSR against the Sharpe the best of ``n_trials`` noise trials would reach.

    ``trial_sharpe_variance`` is the variance of the per-period Sharpes across all
    trials (the dispersion of the search), not of one strategy's estimate.
    """
    if trial_sharpe_variance < 0:
        raise ValueError("trial_sharpe_variance must be >= 0")
    sr0 = math.sqrt(trial_sharpe_variance) * expected_max_sharpe(n_trials)
    return probabilistic_sharpe_ratio(sharpe, n_obs, skew, kurtosis, target_sharpe=sr0)


def min_track_record_length(
    sharpe: float,
    target_sharpe: float,
    skew: float,
    kurtosis: float,
    confidence: float = 0.95,
) -> float:
    """Observations needed for PSR(target) to reach ``confidence`` (one-sided)."""
    if sharpe <= target_sharpe:
        return math.inf  # the observed Sharpe never beats the target, however long
    var = max(1.0 - skew * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2, _VAR_FLOOR)
    z = _norm().ppf(confidence)
    return 1.0 + var * (z / (sharpe - target_sharpe)) ** 2


def min_backtest_length(n_trials: int, sharpe: float) -> float:
    """Years of data below which ``n_trials`` noise trials are expected to reach an
    annualised Sharpe of ``sharpe`` (annualised, in years: the units of the paper)."""
    if sharpe <= 0:
        raise ValueError(f"sharpe must be > 0, got {sharpe}")
    return (expected_max_sharpe(n_trials) / sharpe) ** 2


def pbo_cscv(returns_matrix: np.ndarray, n_blocks: int = 16) -> float:
    """Probability of Backtest Overfitting by combinatorially symmetric CV.

    ``returns_matrix`` is T x N (periods x strategies). The rows are cut into
    ``n_blocks`` contiguous blocks; for every half/half split the in-sample best
    strategy (by Sharpe) is ranked out of sample; PBO is the share of splits where
    it lands at or below the OOS median (logit <= 0). Only meaningful for N >= 8.
    """
    m = np.asarray(returns_matrix, dtype=float)
    if m.ndim != 2 or m.shape[1] < 2:
        raise ValueError("returns_matrix must be 2-D with at least 2 strategies (columns)")
    if n_blocks < 2 or n_blocks % 2:
        raise ValueError(f"n_blocks must be an even number >= 2, got {n_blocks}")
    t, n = m.shape
    if t < 2 * n_blocks:
        raise ValueError(f"need at least {2 * n_blocks} rows for {n_blocks} blocks, got {t}")
    m = np.nan_to_num(m, nan=0.0)
    # Per-block sufficient statistics, so each split's Sharpe is a sum, not a re-scan.
    edges = np.linspace(0, t, n_blocks + 1).astype(int)
    cnt = np.diff(edges).astype(float)
    s1 = np.add.reduceat(m, edges[:-1], axis=0)
    s2 = np.add.reduceat(m * m, edges[:-1], axis=0)

    combos = np.array(list(itertools.combinations(range(n_blocks), n_blocks // 2)))
    is_mask = np.zeros((len(combos), n_blocks))
    is_mask[np.arange(len(combos))[:, None], combos] = 1.0
    oos_mask = 1.0 - is_mask

    def sharpe(mask: np.ndarray) -> np.ndarray:
        k = (mask @ cnt)[:, None]
        mean = (mask @ s1) / k
        var = np.maximum((mask @ s2) / k - mean**2, 0.0) * k / np.maximum(k - 1, 1)
        std = np.sqrt(var)
        return np.where(std > 1e-15, mean / np.where(std > 1e-15, std, 1.0), 0.0)

    sr_is, sr_oos = sharpe(is_mask), sharpe(oos_mask)
    best = np.argmax(sr_is, axis=1)
    chosen = sr_oos[np.arange(len(combos)), best][:, None]
    # Rank 1..N of the chosen strategy out of sample (ties get the mid rank).
    rank = (sr_oos < chosen).sum(axis=1) + 0.5 * ((sr_oos == chosen).sum(axis=1) - 1) + 1.0
    omega = rank / (n + 1.0)
    logit = np.log(omega / (1.0 - omega))
    return float(np.mean(logit <= 0.0))
