"""The reality check paid for over a run's looks (issue 23): a run tests SPA at every
iteration and stops at its first pass, so look k may spend only alpha / (k (k + 1))."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gate.alpha import (
    SPA_MAX_REPS,
    SPA_REPS,
    run_spa,
    spa_look_factor,
    spa_over_looks,
    spa_reps_for,
)

pytestmark = pytest.mark.unit


def test_the_spending_sums_to_alpha_over_any_number_of_looks():
    spent = sum(0.05 / spa_look_factor(k) for k in range(1, 10_001))
    assert spent == pytest.approx(0.05, rel=1e-3)
    assert spent <= 0.05
    assert [spa_look_factor(k) for k in (1, 2, 3, 10)] == [2, 6, 12, 110]


def test_the_adjusted_pvalue_is_the_raw_one_times_the_factor_capped_at_one():
    assert spa_over_looks(0.01, 1) == pytest.approx(0.02)
    assert spa_over_looks(0.013, 5) == pytest.approx(0.39)  # s10's null-drift #5: no pass
    assert spa_over_looks(0.2, 4) == 1.0
    assert spa_over_looks(None, 3) is None
    with pytest.raises(ValueError, match="look must be >= 1"):
        spa_over_looks(0.01, 0)


def test_more_reps_only_when_the_threshold_is_finer_than_the_bootstrap_and_p_is_near_it():
    assert spa_reps_for(None, 0.0) == SPA_REPS
    assert spa_reps_for(0.025, 0.0) == SPA_REPS  # 25 exceedances: resolved
    assert spa_reps_for(0.0005, 0.3) == SPA_REPS  # clearly above: more reps change nothing
    assert spa_reps_for(0.0005, 0.0) == 20_000  # 10 exceedances at the threshold
    assert spa_reps_for(0.05 / 110, 0.004) == 22_000
    assert spa_reps_for(1e-7, 0.0) == SPA_MAX_REPS


def _trials(rng: np.random.Generator, n_days: int, n_trials: int, edge: float):
    dates = [d.date().isoformat() for d in pd.bdate_range("2015-01-01", periods=n_days)]
    bench = {d: float(x) for d, x in zip(dates, rng.normal(0.0004, 0.01, n_days), strict=True)}
    trials = {}
    for j in range(n_trials):
        r = rng.normal(0.0, 0.01, n_days) + (edge if j == 0 else 0.0)
        trials[f"t{j}"] = {d: float(x) for d, x in zip(dates, r, strict=True)}
    return trials, bench


def test_a_strong_edge_is_resolved_below_a_late_looks_threshold():
    rng = np.random.default_rng(3)
    trials, bench = _trials(rng, 300, 5, edge=0.004)  # t ~ 7: never exceeded by the bootstrap
    threshold = 0.05 / spa_look_factor(9)
    p, n = run_spa(trials, bench, resolve=threshold)
    assert n == 5
    assert p is not None and p <= threshold


@pytest.mark.slow
def test_noise_looked_at_every_iteration_passes_far_less_often_adjusted_than_raw():
    """Ten looks at a growing set of pure-noise trials (each look adds three), 40 runs on
    ~4 years of days (the test is sized there; it is liberal on a year): the raw p-value's
    first pass comes often, the adjusted one's at most at the nominal rate."""
    raw_passes = adjusted_passes = 0
    for run in range(40):
        rng = np.random.default_rng(100 + run)
        trials, bench = _trials(rng, 1000, 30, edge=0.0)
        keys = sorted(trials, key=lambda k: int(k[1:]))
        raw_hit = adj_hit = False
        for look in range(1, 11):
            seen = {k: trials[k] for k in keys[: 3 * look]}
            p, _ = run_spa(seen, bench, seed=run, resolve=0.05 / spa_look_factor(look))
            raw_hit |= p is not None and p <= 0.05
            adj_hit |= p is not None and spa_over_looks(p, look) <= 0.05
        raw_passes += raw_hit
        adjusted_passes += adj_hit
    # Seeded, so deterministic: raw 4/40 first passes over ten looks, adjusted 1/40.
    assert adjusted_passes <= 2 < raw_passes
