"""Effective trials (``gate/effective.py``) and the ledger's deflation pair."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backtest.contracts import Metrics
from gate.effective import CORRELATION_DISTANCE, aligned, cluster_series, effective_count
from gate.evaluate import deflated_sharpe_of
from gate.ledger import EffectiveTrials, TrialLedger
from gate.stats import deflated_sharpe_ratio

pytestmark = pytest.mark.unit

T = 1500


def _noise(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.01, size=(n, T))


def _neighbours(n_groups: int, per_group: int, rho: float, seed: int = 0) -> np.ndarray:
    """``n_groups`` independent factors, ``per_group`` series each with correlation ``rho``."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_groups):
        common = rng.normal(0.0, 0.01, T)
        for _ in range(per_group):
            rows.append(np.sqrt(rho) * common + np.sqrt(1 - rho) * rng.normal(0.0, 0.01, T))
    return np.array(rows)


def test_uncorrelated_series_are_each_their_own_trial():
    assert cluster_series(_noise(40)).n == 40


def test_correlated_neighbours_count_once_per_group():
    clusters = cluster_series(_neighbours(4, 25, rho=0.9))
    assert clusters.n == 4
    assert sorted(len(m) for m in clusters.members) == [25, 25, 25, 25]


def test_effective_never_exceeds_raw_and_weak_correlation_stays_apart():
    for rho in (0.0, 0.2, 0.45, 0.7, 0.95):
        n = cluster_series(_neighbours(3, 10, rho=rho, seed=int(rho * 100))).n
        assert 1 <= n <= 30
        if rho < 1 - CORRELATION_DISTANCE - 0.1:
            assert n == 30
        if rho > 1 - CORRELATION_DISTANCE + 0.1:
            assert n == 3


def test_flat_series_are_one_trial_between_them():
    matrix = np.vstack([np.zeros((5, T)), _noise(3)])
    clusters = cluster_series(matrix)
    assert clusters.n == 4 and [0, 1, 2, 3, 4] in clusters.members


def test_run_level_count_adds_trials_without_series():
    dates = [str(i) for i in range(T)]
    reps = _noise(3, seed=5)
    count = effective_count(
        [(["a", "b"], reps[0]), (["c"], reps[1]), (["d"], reps[2])],
        dates=dates,
        n_without_series=2,
    )
    assert count.n_effective == 5 and count.n_with_series == 4
    assert len(count.cluster_sharpes) == 3


def test_aligned_fills_missing_dates_with_zero():
    axis, m = aligned([{"2020-01-02": 0.01}, {"2020-01-03": -0.02, "2020-01-02": 0.0}])
    assert axis == ["2020-01-02", "2020-01-03"]
    assert m.tolist() == [[0.01, 0.0], [0.0, -0.02]]


def _ledger(n: int) -> TrialLedger:
    ledger = TrialLedger()
    rng = np.random.default_rng(1)
    for k in range(n):
        ledger.record(f"k{k}", float(rng.normal(0, 0.02)), n_obs=T)
    return ledger


def _m(sr_pp: float = 0.08) -> Metrics:
    return Metrics(
        sharpe=sr_pp * 15.87,
        sharpe_per_period=sr_pp,
        sortino=None,
        cagr_pct=5,
        total_return_pct=10,
        max_drawdown_pct=10,
        win_rate_pct=50,
        profit_factor=1.1,
        n_trades=40,
        exposure_pct=50,
        final_value=110_000,
        n_obs=T,
        skew=0,
        kurtosis=3,
    )


def test_raw_deflation_is_unchanged_by_a_measured_effective_count():
    ledger = _ledger(50)
    before = deflated_sharpe_of(_m(), ledger)
    ledger.effective = EffectiveTrials(n=5, threshold=0.5, cluster_sharpes=[0.0, 0.01, -0.01])
    assert ledger.n_effective == 5 and ledger.n_trials == 50
    assert deflated_sharpe_of(_m(), ledger) == before  # deflate_effective is off
    expected = deflated_sharpe_ratio(0.08, ledger.trial_sharpe_variance(), 50, T, 0.0, 3.0)
    assert before == expected


def test_effective_deflation_uses_the_cluster_count_and_their_dispersion():
    ledger = _ledger(50)
    sharpes = [0.0, 0.01, -0.01, 0.02, -0.02]
    ledger.effective = EffectiveTrials(n=5, threshold=0.5, cluster_sharpes=sharpes)
    ledger.deflate_effective = True
    v = min(float(np.var(sharpes, ddof=1)), 1.0 / (T - 1))
    assert ledger.deflation_trials() == 5 and ledger.deflation_variance() == pytest.approx(v)
    assert deflated_sharpe_of(_m(), ledger) == pytest.approx(
        deflated_sharpe_ratio(0.08, v, 5, T, 0.0, 3.0)
    )
    # Never more clusters than trials.
    ledger.effective = EffectiveTrials(n=80, threshold=0.5)
    assert ledger.n_effective == 50


def _aligned_value_by_value(series, dates=None):
    """``aligned`` as it was first written (a value at a time): the reference it must equal."""
    axis = sorted({d for s in series for d in s}) if dates is None else list(dates)
    out = np.zeros((len(series), len(axis)))
    at = {d: i for i, d in enumerate(axis)}
    for row, s in enumerate(series):
        for d, x in s.items():
            i = at.get(d)
            if i is not None and x is not None and np.isfinite(x):
                out[row, i] = float(x)
    return axis, out


_VALUES = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(-5, 5),
    st.floats(-0.1, 0.1).map(np.float64),
)


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    series=st.lists(
        st.dictionaries(st.sampled_from([f"2020-01-{d:02d}" for d in range(1, 21)]), _VALUES),
        max_size=6,
    ),
    dates=st.none() | st.lists(st.sampled_from([f"2020-01-{d:02d}" for d in range(5, 25)])),
)
def test_aligned_is_the_value_by_value_alignment_bit_for_bit(series, dates):
    axis, got = aligned(series, dates)
    ref_axis, ref = _aligned_value_by_value(series, dates)
    assert axis == ref_axis and got.shape == ref.shape
    assert got.tobytes() == ref.tobytes()
