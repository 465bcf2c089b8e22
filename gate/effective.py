"""Effective trials: how many genuinely different trials a run made.

A hundred neighbouring parameter sets are not a hundred independent trials: their returns move
together, and the best of them is barely better than the best of a few. The deflated Sharpe
ratio's E[max of N] should count independent draws. We count them as López de Prado (2019,
"A data science solution to the multiple-testing crisis") does: cluster the trials' in-sample
return series by correlation and count the clusters.

The rule, stated once: average-linkage hierarchical clustering on the distance ``1 - rho``
(Pearson correlation of the per-period returns), cut at ``CORRELATION_DISTANCE`` = 0.2: two
groups merge when the average correlation between their members is at least 0.8. Independent
series of T returns have sample correlations of about ``1/sqrt(T)`` (0.03 for six in-sample
years), far from the cut: they stay apart and the count equals the raw count. Trials whose
series is flat (no trade, no return) are one trial between them: they are the same "nothing".

Against a benchmark the series clustered are the trials' alpha series (each minus the
benchmark held at its beta, ``gate.alpha.hedged``, as the reality check tests them): long-only
strategies on one universe all share the market, and that common exposure is not a choice
among different bets. Measured on the README's acceptance run, the raw returns of 200
neighbouring sets correlated at a median 0.75-0.86 and a 0.5 cut on them left 1-2 clusters;
a cut that lenient would deflate less than the raw count with its plug-in variance does.
At 0.8 on the alpha series, a 200-set batch keeps 26-81 clusters.

Each cluster is represented by the equal-weight mean of its members' series; the deflation's
``V`` is then the dispersion of the representatives' Sharpes (``gate.ledger``, under the same
null-variance cap), so correlation is not credited twice (the raw plug-in variance already
shrinks with correlation).

Series are grouped in two levels, so memory stays bounded by the batch: a screened batch is
clustered on its own, then its clusters' representatives are clustered with every other trial
of the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

CORRELATION_DISTANCE = 0.2  # cut of the average-linkage tree on 1 - rho
FLAT_STD = 1e-15  # a series with no more spread than this is flat (as compute_metrics)


@dataclass(frozen=True)
class Clusters:
    """Trials grouped by correlation: member rows per cluster, and each cluster's mean series."""

    members: list[list[int]]
    representatives: np.ndarray  # n_clusters x T

    @property
    def n(self) -> int:
        """The number of clusters."""
        return len(self.members)


def cluster_series(matrix: np.ndarray, *, threshold: float = CORRELATION_DISTANCE) -> Clusters:
    """Cluster the rows of ``matrix`` (trials x periods, one common date axis)."""
    matrix = np.asarray(matrix, dtype=float)
    n = matrix.shape[0]
    if n == 0:
        return Clusters([], np.zeros((0, matrix.shape[1] if matrix.ndim == 2 else 0)))
    std = matrix.std(axis=1)
    flat = [i for i in range(n) if not std[i] > FLAT_STD]
    live = [i for i in range(n) if std[i] > FLAT_STD]
    members: list[list[int]] = []
    if len(live) == 1:
        members.append(live)
    elif live:
        from scipy.cluster.hierarchy import fcluster, linkage
        from scipy.spatial.distance import squareform

        rho = np.corrcoef(matrix[live])
        dist = np.clip(1.0 - rho, 0.0, 2.0)
        np.fill_diagonal(dist, 0.0)
        dist = (dist + dist.T) / 2.0  # exactly symmetric for squareform
        tree = linkage(squareform(dist, checks=False), method="average")
        labels = fcluster(tree, t=threshold, criterion="distance")
        groups: dict[int, list[int]] = {}
        for row, label in zip(live, labels.tolist(), strict=True):
            groups.setdefault(label, []).append(row)
        members.extend(sorted(groups.values()))  # ordered by first member: deterministic
    if flat:
        members.append(flat)
    reps = np.vstack([matrix[m].mean(axis=0) for m in members])
    return Clusters(members, reps)


def aligned(
    series: Sequence[Mapping[str, float]], dates: Sequence[str] | None = None
) -> tuple[list[str], np.ndarray]:
    """Series (ISO date -> return) on one date axis (their union unless ``dates`` is given);
    a date a series lacks counts as a zero return (flat that day)."""
    axis = sorted({d for s in series for d in s}) if dates is None else list(dates)
    out = np.zeros((len(series), len(axis)))
    at = {d: i for i, d in enumerate(axis)}
    for row, s in enumerate(series):  # a row at a time, not a value at a time: same floats
        if not s:
            continue
        cols = np.fromiter((at.get(d, -1) for d in s), dtype=np.int64, count=len(s))
        vals = np.fromiter((np.nan if x is None else x for x in s.values()), float, len(s))
        keep = (cols >= 0) & np.isfinite(vals)
        out[row, cols[keep]] = vals[keep]
    return axis, out


def hedge_rows(matrix: np.ndarray, benchmark: np.ndarray | None) -> np.ndarray:
    """Each row (a trial's returns) minus the benchmark held at the row's beta: the alpha
    series the clustering compares against a benchmark (None: the rows as they are)."""
    if benchmark is None:
        return np.asarray(matrix, dtype=float)
    from gate.alpha import hedged

    return hedged(np.asarray(matrix, dtype=float).T, np.asarray(benchmark, dtype=float)).T


def per_period_sharpe(rows: np.ndarray) -> list[float | None]:
    """Each row's per-period Sharpe (None when flat), as ``compute_metrics`` defines it."""
    out: list[float | None] = []
    for r in np.atleast_2d(rows):
        std = float(r.std(ddof=1)) if r.size >= 2 else 0.0
        out.append(float(r.mean()) / std if std > FLAT_STD else None)
    return out


@dataclass(frozen=True)
class EffectiveCount:
    """The run-level count: clusters of series plus trials that left no series."""

    n_effective: int
    n_with_series: int
    cluster_sharpes: list[float]  # representatives' per-period Sharpes (flat ones left out)


def effective_count(
    groups: Sequence[tuple[list[str], np.ndarray]],
    *,
    dates: Sequence[str],
    n_without_series: int = 0,
    threshold: float = CORRELATION_DISTANCE,
) -> EffectiveCount:
    """Cluster representative series (``groups``: per level-one group, its trial keys and one
    representative row on ``dates``) and count the clusters, weighting nothing: a cluster is
    one trial. Trials without a series (they failed before any return) count one each."""
    if not groups:
        return EffectiveCount(n_without_series, 0, [])
    matrix = np.vstack([row for _, row in groups])
    top = cluster_series(matrix, threshold=threshold)
    sharpes = [s for s in per_period_sharpe(top.representatives) if s is not None]
    return EffectiveCount(
        n_effective=top.n + n_without_series,
        n_with_series=sum(len(keys) for keys, _ in groups),
        cluster_sharpes=sharpes,
    )
