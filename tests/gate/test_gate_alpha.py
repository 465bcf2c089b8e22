"""Alpha over a benchmark and Hansen's SPA: pinned against statsmodels and arch directly."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from arch.bootstrap import SPA
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.alpha import (
    AlphaStats,
    aligned_stats,
    alpha_stats,
    deflated_alpha,
    hedged,
    long_run_variance,
    newey_west_lags,
    run_spa,
    spa_pvalue,
    trial_matrix,
)
from gate.stats import deflated_sharpe_ratio

pytestmark = pytest.mark.unit


def _pair(n: int = 1000, alpha: float = 0.0004, beta: float = 0.6, seed: int = 7):
    rng = np.random.default_rng(seed)
    x = rng.standard_t(4, n) * 0.01 + 0.0003
    y = alpha + beta * x + rng.normal(0, 0.008, n)
    return y, x


def test_alpha_beta_and_hac_t_match_statsmodels_on_a_fixed_series():
    y, x = _pair()
    stats = alpha_stats(y, x, name="bench", periods_per_year=252)
    lags = newey_west_lags(len(y))
    fit = sm.OLS(y, sm.add_constant(x)).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    assert stats.hac_lags == lags == 6  # floor(4 * (1000/100)^(2/9)) = floor(6.67)
    assert stats.alpha_annual_pct == pytest.approx(fit.params[0] * 252 * 100, abs=1e-9)
    assert stats.beta == pytest.approx(fit.params[1], abs=1e-12)
    assert stats.t_stat == pytest.approx(fit.tvalues[0], abs=1e-9)
    # The HAC t differs from the plain OLS t: the errors are not the textbook ones.
    plain = sm.OLS(y, sm.add_constant(x)).fit()
    assert stats.t_stat != pytest.approx(plain.tvalues[0], abs=1e-6)
    # Appraisal ratio: alpha over residual volatility (ddof=1 on the alpha series).
    alpha_series = y - fit.params[1] * x
    sr = alpha_series.mean() / alpha_series.std(ddof=1)
    assert stats.alpha_sharpe_per_period == pytest.approx(sr, abs=1e-12)
    assert stats.appraisal_ratio == pytest.approx(sr * math.sqrt(252), abs=1e-9)
    active = y - x
    assert stats.information_ratio == pytest.approx(
        active.mean() / active.std(ddof=1) * math.sqrt(252), abs=1e-9
    )
    sr_y, sr_x = y.mean() / y.std(ddof=1), x.mean() / x.std(ddof=1)
    assert stats.excess_sharpe == pytest.approx((sr_y - sr_x) * math.sqrt(252), abs=1e-9)
    assert stats.alpha_kurtosis == pytest.approx(pd.Series(alpha_series).kurt() + 3.0)


def test_pure_exposure_has_beta_and_no_alpha():
    rng = np.random.default_rng(3)
    x = rng.normal(0.0008, 0.012, 2000)  # a market with a strong drift
    y = 0.5 * x  # half invested, always: no timing at all
    stats = alpha_stats(y, x, name="bench")
    assert stats.beta == pytest.approx(0.5)
    assert abs(stats.alpha_annual_pct) < 1e-9
    # Its Sharpe equals the market's (a positive one), yet there is nothing to deflate.
    assert stats.excess_sharpe == pytest.approx(0.0, abs=1e-9)


def test_cash_benchmark_regresses_on_a_constant_only():
    y, _ = _pair()
    stats = alpha_stats(y, np.zeros_like(y), name="cash")
    lags = newey_west_lags(len(y))
    fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="HAC", cov_kwds={"maxlags": lags})
    assert stats.beta is None
    assert stats.t_stat == pytest.approx(fit.tvalues[0], abs=1e-9)
    assert stats.alpha_sharpe_per_period == pytest.approx(y.mean() / y.std(ddof=1))
    none_given = alpha_stats(y, None, name="cash")
    assert none_given.t_stat == stats.t_stat


def test_too_few_dates_give_undefined_figures_not_numbers():
    s = alpha_stats(np.array([0.01, -0.01, 0.02]), np.array([0.0, 0.01, 0.0]), name="b")
    assert s.n_obs == 3 and s.alpha_annual_pct is None and s.beta is None


def test_deflated_alpha_is_the_dsr_of_the_alpha_series():
    y, x = _pair()
    stats = alpha_stats(y, x, name="b")
    got = deflated_alpha(stats, trial_variance=1 / 999, n_trials=20)
    want = deflated_sharpe_ratio(
        stats.alpha_sharpe_per_period, 1 / 999, 20, len(y), stats.alpha_skew, stats.alpha_kurtosis
    )
    assert got == pytest.approx(want, abs=1e-12)
    # More trials, same evidence: the bar rises.
    assert deflated_alpha(stats, trial_variance=1 / 999, n_trials=200) < got
    assert deflated_alpha(AlphaStats(benchmark="b", n_obs=3), trial_variance=1, n_trials=1) is None


def test_aligned_stats_uses_only_shared_dates():
    y, x = _pair(200)
    dates = pd.bdate_range("2020-01-01", periods=200).strftime("%Y-%m-%d")
    strat = dict(zip(dates, y, strict=True))
    bench = dict(zip(dates[10:], x[10:], strict=True))
    s = aligned_stats(strat, bench, name="b", periods_per_year=252)
    assert s.n_obs == 190
    assert s.beta == pytest.approx(alpha_stats(y[10:], x[10:], name="b").beta)


def test_spa_pvalue_is_arch_on_studentized_differentials():
    rng = np.random.default_rng(11)
    b = rng.normal(0.0004, 0.01, 800)
    models = rng.normal(0.0003, 0.01, (800, 12))
    models[:, 3] += 0.0015  # one trial with a real edge over the benchmark
    got = spa_pvalue(models, b, seed=5, reps=500, block_size=10)
    diff = models - b[:, None]
    scaled = diff / np.sqrt(long_run_variance(diff, 10))
    direct = SPA(np.zeros(800), -scaled, block_size=10, reps=500, bootstrap="stationary", seed=5)
    direct.compute()
    assert got == pytest.approx(float(direct.pvalues["consistent"]), abs=1e-12)
    assert got < 0.05
    null = spa_pvalue(models[:, [0, 1, 2, 4]], b, seed=5, reps=500)
    assert null is not None and null > 0.05


def test_long_run_variance_is_arch_s_stationary_bootstrap_kernel():
    x = np.random.default_rng(4).normal(0, 1, (250, 3))
    x[:, 1] = np.convolve(x[:, 1], np.ones(5) / 5, mode="same")  # autocorrelated
    spa = SPA(np.zeros(250), -x, block_size=10, reps=10)
    spa._compute_variance()  # arch's own O(T^2) loop: the reference
    assert long_run_variance(x, 10) == pytest.approx(spa._loss_diff_var, rel=1e-9)


def test_a_volatile_zero_mean_trial_does_not_hide_a_calm_edge():
    # arch's raw-mean SPA (White's reality check) loses the calm edge behind noisy trials;
    # studentized, each trial is judged on its own t.
    rng = np.random.default_rng(0)
    t = 1400
    calm = 0.0006 + 0.004 * rng.standard_normal(t)  # t about 5.6
    noisy = 0.05 * rng.standard_normal((t, 20))
    bench = np.zeros(t)
    both = np.column_stack([calm, noisy])
    raw = SPA(bench, -both, block_size=10, reps=1000, bootstrap="stationary", seed=1)
    raw.compute()
    assert float(raw.pvalues["consistent"]) > 0.05  # the defect this guards against
    assert spa_pvalue(both, bench, seed=1) < 0.01


def test_spa_is_invariant_to_each_trial_s_scale_and_skips_flat_trials():
    rng = np.random.default_rng(8)
    m = rng.normal(0.0002, 0.01, (500, 6))
    m[:, 2] += 0.002
    b = np.zeros(500)
    scaled = m * np.array([1, 3, 0.5, 10, 1, 2])
    assert spa_pvalue(scaled, b, seed=2) == pytest.approx(spa_pvalue(m, b, seed=2))
    flat = np.column_stack([m, np.zeros(500)])  # a trial that never trades
    assert spa_pvalue(flat, b, seed=2) == pytest.approx(spa_pvalue(m, b, seed=2))
    assert spa_pvalue(np.zeros((500, 2)), b) is None


def test_spa_is_reproducible_with_the_seed():
    rng = np.random.default_rng(2)
    b = rng.normal(0, 0.01, 300)
    m = rng.normal(0, 0.01, (300, 5))
    assert spa_pvalue(m, b, seed=1) == spa_pvalue(m, b, seed=1)


def test_trial_matrix_drops_sparse_trials_instead_of_shrinking_everyone():
    dates = [f"2020-01-{d:02d}" for d in range(1, 31)]
    bench = dict.fromkeys(dates, 0.001)
    trials = {
        "full": dict.fromkeys(dates, 0.002),
        "also": dict.fromkeys(dates[2:], 0.0),
        "sparse": dict.fromkeys(dates[:5], 0.01),  # most of its jobs failed
        "empty": {},
    }
    keep, m, b = trial_matrix(trials, bench)
    assert keep == ["also", "full"]
    assert m.shape == (28, 2) and b.shape == (28,)
    p, n = run_spa(trials, bench)
    assert n == 0 or p is None or 0 <= p <= 1  # 28 dates: below the minimum, None
    assert run_spa({}, bench) == (None, 0)


@settings(max_examples=25, deadline=None)
@given(
    beta=st.floats(-1.5, 1.5),
    alpha=st.floats(-0.002, 0.002),
    seed=st.integers(0, 10_000),
)
def test_regression_recovers_a_planted_alpha_and_beta(beta, alpha, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0003, 0.01, 3000)
    y = alpha + beta * x + rng.normal(0, 0.001, 3000)
    s = alpha_stats(y, x, name="b")
    assert s.beta == pytest.approx(beta, abs=0.01)
    assert s.alpha_annual_pct == pytest.approx(alpha * 252 * 100, abs=2.5)  # ~5 std errors


def test_spa_compares_each_trial_with_the_benchmark_at_its_own_beta():
    rng = np.random.default_rng(21)
    n = 1500
    market = rng.normal(0.0008, 0.01, n)  # a strong bull market
    dates = [f"d{i:05d}" for i in range(n)]
    bench = dict(zip(dates, market, strict=True))
    # Timing alpha with little exposure: less raw return than the market, real alpha.
    timed = 0.2 * market + rng.normal(0.0004, 0.004, n)
    exposure = 0.9 * market + rng.normal(0.0, 0.002, n)  # the market, minus nothing
    p_timed, n_timed = run_spa({"timed": dict(zip(dates, timed, strict=True))}, bench, seed=3)
    p_exp, _ = run_spa({"exp": dict(zip(dates, exposure, strict=True))}, bench, seed=3)
    raw = spa_pvalue(timed[:, None], market, seed=3)  # raw returns vs the market: blind to it
    assert n_timed == 1
    assert p_timed < 0.05 < raw
    assert p_exp > 0.05
    h = hedged(np.column_stack([timed, exposure]), market)
    assert h[:, 1].std() < 0.0025  # the exposure is gone, the tracking noise stays
