"""The reality check counts the screened search: one series per cluster of the screened sets
(``swarm.nodes.trials.screened_representatives``) beside every Backtrader trial, capped."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from backtest.screen import ScreenedSet, Sweep, write_batch
from gate.alpha import run_spa
from gate.effective import cluster_series, hedge_rows
from swarm.memo import RunMemo
from swarm.nodes.trials import SCREEN_PREFIX, screened_representatives

pytestmark = pytest.mark.unit

T = 400
DATES = [f"2015-{1 + d // 28:02d}-{1 + d % 28:02d}" for d in range(T)]


def _ctx(root: Path):
    return SimpleNamespace(memo=RunMemo(), run=SimpleNamespace(path=lambda rel: root / rel))


def _batch(root: Path, name: str, rows: np.ndarray, tag: str) -> list[str]:
    keys = [f"{tag}{i:03d}" for i in range(rows.shape[0])]
    sets = [ScreenedSet(None, k, None, None, T, 0) for k in keys]  # type: ignore[arg-type]
    write_batch(root / "screens" / name, Sweep(sets, DATES, rows, 3, 2))
    return keys


def _families(rng: np.random.Generator, drifts: list[float], n: int = 6) -> np.ndarray:
    """``len(drifts)`` groups of ``n`` near-identical series (one factor each, drift ``d``)."""
    rows = []
    for d in drifts:
        factor = rng.normal(d, 0.01, T)
        rows += [factor + rng.normal(0, 0.0005, T) for _ in range(n)]
    return np.vstack(rows)


def test_one_representative_per_cluster_of_every_batch_and_flat_ones_left_out(tmp_path):
    rng = np.random.default_rng(0)
    a = _families(rng, [0.0, 0.001, -0.001])
    a = np.vstack([a, np.zeros((2, T))])  # two sets that never traded: a flat cluster
    _batch(tmp_path, "i02.npz", a, "a")
    _batch(tmp_path, "i03-portfolio.npz", _families(rng, [0.0005, 0.002]), "b")
    reps = screened_representatives(_ctx(tmp_path), None)
    assert len(reps) == 5 and all(k.startswith(SCREEN_PREFIX) for k in reps)
    assert {k[len(SCREEN_PREFIX) :] for k in reps} == {"a000", "a006", "a012", "b000", "b006"}
    # Each is its cluster's mean series, on the batch's dates.
    want = cluster_series(a.astype(np.float32).astype(float)).representatives[0]
    got = np.array([reps[f"{SCREEN_PREFIX}a000"][d] for d in DATES])
    assert np.allclose(got, want)


def test_against_a_benchmark_the_representatives_are_of_the_alpha_series(tmp_path):
    rng = np.random.default_rng(1)
    bench = rng.normal(0.0005, 0.01, T)
    rows = _families(rng, [0.0, 0.001]) + bench  # every set holds the market as well
    _batch(tmp_path, "i02.npz", rows, "a")
    reps = screened_representatives(_ctx(tmp_path), dict(zip(DATES, bench, strict=True)))
    assert len(reps) == 2  # the common market exposure does not merge the two bets
    hedged = hedge_rows(rows.astype(np.float32).astype(float), bench)
    got = np.array([reps[f"{SCREEN_PREFIX}a000"][d] for d in DATES])
    assert np.allclose(got, hedged[:6].mean(axis=0))


def test_the_cap_keeps_the_representatives_with_the_highest_mean(tmp_path):
    rng = np.random.default_rng(2)
    _batch(tmp_path, "i02.npz", _families(rng, [-0.002, 0.003, 0.0, 0.001], n=3), "a")
    reps = screened_representatives(_ctx(tmp_path), None, cap=2)
    assert set(reps) == {f"{SCREEN_PREFIX}a003", f"{SCREEN_PREFIX}a009"}


def test_spa_tests_the_backtrader_trials_and_the_screened_representatives(tmp_path):
    rng = np.random.default_rng(3)
    bench = rng.normal(0.0003, 0.01, T)
    bdict = dict(zip(DATES, bench, strict=True))
    trials = {f"v{i}": dict(zip(DATES, rng.normal(0, 0.01, T), strict=True)) for i in range(3)}
    p_before, n_before = run_spa(trials, bdict, seed=0)
    assert n_before == 3 and p_before is not None and p_before > 0.2
    # The search screened a cluster with a real edge the Backtrader trials never showed.
    edge = _families(rng, [0.004, 0.0], n=5)
    _batch(tmp_path, "i02-portfolio.npz", edge, "s")
    reps = screened_representatives(_ctx(tmp_path), bdict)
    p_after, n_after = run_spa(trials | reps, bdict, seed=0)
    assert n_after == 3 + len(reps) == 5
    assert p_after < 0.05 < p_before


def test_a_batch_left_half_written_by_a_kill_is_not_counted(tmp_path):
    """A SIGKILL between the temp file and its rename leaves the temp behind; the resumed run
    writes the batch again. The leftover (whole or torn) is neither a second batch nor an
    error: the count is the uninterrupted run's."""
    rng = np.random.default_rng(3)
    _batch(tmp_path, "i02.npz", _families(rng, [0.0, 0.001, -0.001]), "a")
    want = screened_representatives(_ctx(tmp_path), None)
    screens = tmp_path / "screens"
    whole = (screens / "i02.npz").read_bytes()
    # The temp names this writer and earlier ones used, whole and cut short.
    (screens / "i02.npz.tmp.npz").write_bytes(whole)
    (screens / ".i02.npz.tmp").write_bytes(whole[: len(whole) // 2])
    (screens / "i03.npz.tmp.npz").write_bytes(whole[:100])
    assert screened_representatives(_ctx(tmp_path), None) == want


def test_write_batch_leaves_no_temp_file_and_replaces_an_earlier_batch(tmp_path):
    rng = np.random.default_rng(4)
    _batch(tmp_path, "i02.npz", _families(rng, [0.0]), "a")
    keys = _batch(tmp_path, "i02.npz", _families(rng, [0.001]), "b")
    assert sorted(p.name for p in (tmp_path / "screens").iterdir()) == ["i02.npz"]
    reps = screened_representatives(_ctx(tmp_path), None)
    assert {k[len(SCREEN_PREFIX) :] for k in reps} == {keys[0]}
