"""``gate.spa_exact.consistent_pvalue`` is ``arch.bootstrap.SPA``'s consistent p-value bit for
bit: the same variances, the same bootstrap maxima, the same p-value, on every shape the gate
meets (one column, a few, many; short and long samples; flat and dominant columns)."""

from __future__ import annotations

import numpy as np
import pytest
from arch.bootstrap import StationaryBootstrap
from hypothesis import given, settings
from hypothesis import strategies as st

import gate.spa_exact as se

pytestmark = pytest.mark.unit


def _models(t: int, k: int, seed: int, shift: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.standard_t(4, size=(t, k)) * rng.uniform(0.2, 3.0, size=k)
    m[:, : k // 2] += shift  # some columns far from the others
    if k >= 3:
        m[:, -1] = 0.25  # a flat column
    return m


@settings(max_examples=40, deadline=None)
@given(
    t=st.integers(30, 400),
    k=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    shift=st.sampled_from([0.0, 0.3, -0.3, 2.0]),
    block=st.sampled_from([2, 10, 25]),
)
def test_the_pvalue_is_archs(t, k, seed, shift, block):
    m = _models(t, k, seed, shift)
    expected = float(se.arch_spa(m, block_size=block, reps=150, seed=seed).pvalues["consistent"])
    assert se.consistent_pvalue(m, block_size=block, reps=150, seed=seed) == expected


@pytest.mark.parametrize(("t", "k"), [(31, 2), (97, 5), (250, 40), (1200, 7)])
def test_the_variances_and_every_bootstrap_maximum_are_archs(t, k):
    m = _models(t, k, t + k, 0.2)
    spa = se.arch_spa(m, block_size=10, reps=120, seed=3)
    ld = np.zeros((t, 1)) - m
    demeaned = ld - ld.mean(axis=0)
    variances = np.sum(demeaned**2, 0) / t
    p = 1.0 / 10
    kappa2 = np.array(
        [
            2 * (((1.0 - (i / t)) * ((1 - p) ** i)) + ((i / t) * ((1 - p) ** (t - i))))
            for i in range(1, t)
        ]
    )
    se._lag_sums(np.ascontiguousarray(demeaned.T), kappa2, t, variances)
    assert variances.tobytes() == spa._loss_diff_var.tobytes()
    centre = ld.mean(0).copy()
    centre[np.logical_not(spa._valid_columns)] = 0.0
    bs = StationaryBootstrap(10, ld, seed=3)
    index = np.stack([bs.update_indices() for _ in range(120)])
    maxima = se._boot_maxima(ld, index, centre)
    assert maxima.tobytes() == np.max(spa._simulated_vals[:, :, 1], 0).tobytes()
