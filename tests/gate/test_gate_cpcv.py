"""CPCV of the search's choice (gate.cpcv): the split, purge and embargo arithmetic, AFML's
path assignment, a planted edge among noise, pure noise, and the degenerate inputs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gate.cpcv import (
    CpcvResult,
    check_settings,
    cpcv_paths,
    cpcv_summary,
    group_edges,
    path_assignment,
    run_cpcv,
    split_groups,
    train_mask,
)

pytestmark = pytest.mark.unit


def _series(matrix: np.ndarray, start: str = "2015-01-02") -> dict[str, dict[str, float]]:
    dates = [d.date().isoformat() for d in pd.bdate_range(start, periods=matrix.shape[0])]
    return {
        f"v{j:02d}": dict(zip(dates, matrix[:, j].tolist(), strict=True))
        for j in range(matrix.shape[1])
    }


@pytest.mark.parametrize(
    ("n", "k", "splits", "paths"), [(6, 2, 15, 5), (5, 1, 5, 1), (8, 3, 56, 21)]
)
def test_split_and_path_counts_are_afml(n, k, splits, paths):
    assert len(split_groups(n, k)) == splits == math.comb(n, k)
    assign = path_assignment(n, k)
    assert assign.shape == (paths, n)  # phi = k / N * C(N, k)
    assert paths == k * math.comb(n, k) // n
    combos = split_groups(n, k)
    for g in range(n):
        # every path takes group g from a split that tests g, each such split once
        assert all(g in combos[s] for s in assign[:, g])
        assert len(set(assign[:, g])) == paths


def test_the_train_mask_drops_the_test_groups_the_purge_and_the_embargo():
    edges = group_edges(600, 6)  # groups of 100 rows
    train = train_mask(edges, (1, 4), purge=10, embargo=6)
    rows = np.arange(600)
    assert not train[100:200].any() and not train[400:500].any()  # no test bar
    assert not train[90:100].any() and not train[390:400].any()  # purged before each test group
    assert not train[200:216].any() and not train[500:516].any()  # purged + embargoed after
    kept = ~((rows >= 90) & (rows < 216)) & ~((rows >= 390) & (rows < 516))
    assert (train == kept).all()  # and nothing else is dropped
    assert train_mask(edges, (5,), purge=10, embargo=6)[:490].all()  # clipped at the ends


def test_each_path_is_the_chosen_variants_returns_on_every_group():
    rng = np.random.default_rng(3)
    m = rng.normal(0, 0.01, size=(300, 4))
    paths, chosen = cpcv_paths(m, n_groups=6, n_test_groups=2, purge=5, embargo=3)
    assert paths.shape == (5, 300) and chosen.shape == (15,)
    edges, assign = group_edges(300, 6), path_assignment(6, 2)
    for j in range(5):
        for g in range(6):
            lo, hi = edges[g], edges[g + 1]
            assert np.array_equal(paths[j, lo:hi], m[lo:hi, chosen[assign[j, g]]])


def test_a_planted_edge_among_noise_is_chosen_and_its_paths_are_positive():
    rng = np.random.default_rng(7)
    m = rng.normal(0.0, 0.01, size=(1500, 20))
    m[:, 11] += 0.0015  # an annualised Sharpe near 2.4
    r = run_cpcv(_series(m))
    assert r.reason is None and r.n_paths == 5 and r.n_splits == 15
    assert set(r.chosen) == {"v11"}
    assert min(r.path_sharpes) > 0 and r.share_negative == 0.0
    assert r.p5 is not None and r.p5 > 1.0


def test_pure_noise_paths_centre_near_zero_though_the_in_sample_best_looks_good():
    medians, best_in_sample = [], []
    for seed in range(12):
        m = np.random.default_rng(seed).normal(0.0, 0.01, size=(1000, 30))
        r = run_cpcv(_series(m))
        medians.append(r.median)
        best_in_sample.append(max(m.mean(0) / m.std(0, ddof=1)) * math.sqrt(252))
    assert abs(np.mean(medians)) < 0.3
    assert np.mean(best_in_sample) > 0.8  # the selection bias CPCV does not inherit


def test_the_statistics_are_the_paths():
    m = np.random.default_rng(1).normal(0.0002, 0.01, size=(600, 5))
    r = run_cpcv(_series(m), n_groups=5, n_test_groups=2, purge=10, embargo_frac=0.02)
    s = np.array(r.path_sharpes)
    assert r.n_paths == len(s) == 4 and r.embargo_bars == 12 and r.n_dates == 600
    assert r.mean == pytest.approx(s.mean()) and r.median == pytest.approx(np.median(s))
    assert r.p5 == pytest.approx(np.percentile(s, 5))
    assert r.share_negative == pytest.approx((s < 0).mean())


def test_variants_are_aligned_on_shared_dates_and_empty_ones_ignored():
    m = np.random.default_rng(2).normal(0.0, 0.01, size=(400, 3))
    series = _series(m)
    series["v01"] = dict(list(series["v01"].items())[50:])  # starts later
    series["empty"] = {}
    r = run_cpcv(series, purge=5)
    assert r.reason is None and r.n_variants == 3 and r.n_dates == 350


@pytest.mark.parametrize(
    ("matrix_shape", "kw", "why"),
    [
        ((400, 1), {}, "variants"),
        ((100, 4), {}, "shared dates"),
        ((130, 4), {"purge": 40}, "training bars"),
    ],
)
def test_too_few_variants_or_dates_give_a_reason(matrix_shape, kw, why):
    m = np.random.default_rng(0).normal(0.0, 0.01, size=matrix_shape)
    r = run_cpcv(_series(m), **kw)
    assert isinstance(r, CpcvResult) and r.reason is not None and why in r.reason
    assert r.mean is None and r.path_sharpes == []


def test_bad_settings_raise():
    assert check_settings(6, 2) is None
    assert "at least 2" in (check_settings(1, 1) or "")
    assert "between 1 and 5" in (check_settings(6, 6) or "")
    assert "12870 splits" in (check_settings(16, 8) or "")
    with pytest.raises(ValueError, match="between 1 and 3"):
        run_cpcv({}, n_groups=4, n_test_groups=0)
    with pytest.raises(ValueError, match="purge"):
        run_cpcv({}, purge=-1)


def test_the_summary_reads_the_share_below_zero_and_says_why_not():
    m = np.random.default_rng(5).normal(0.0, 0.01, size=(600, 6))
    r = run_cpcv(_series(m), purge=10)
    below = round(100 * (r.share_negative or 0.0))
    assert cpcv_summary(r).startswith(
        f"the search's choice had a negative out-of-sample Sharpe on {below} % of the 5 paths"
    )
    assert cpcv_summary(run_cpcv({})).startswith("CPCV not computed: needs >= 2 variants")
