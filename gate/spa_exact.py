"""Hansen's SPA "consistent" p-value as ``arch.bootstrap.SPA`` computes it, bit for bit,
without the work it does not need.

Why: the gate runs the reality check at every iteration over every trial so far. Profiled, a
265 s null calibration run spent 77 s in ``arch``'s SPA (10 gates): per bootstrap rep it
copies the resampled T x K loss matrix and takes its column means three times (once per
p-value: lower, consistent, upper; the gate reads only "consistent"), and it estimates the
columns' variances with a Python loop over the T lags.

Here the same arithmetic runs once: ``arch``'s own ``StationaryBootstrap``, built as SPA
builds it, draws the same indices; each rep's column sums add the same rows in the same order
as numpy's reduction over axis 0 (row after row), without the copy; the lag sums likewise.
Everything else (the means, the validity threshold, the re-centring, the maxima) is the same
numpy expression as ``arch``'s. One column (K = 1) is handed to ``arch`` itself: numpy sums a
single column pairwise, not row after row. ``tests/gate/test_spa_exact.py`` checks the
p-value against ``arch`` on many shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True)
def _lag_sums(columns: np.ndarray, kappa2: np.ndarray, t: int, variances: np.ndarray) -> None:
    """``variances += 2 * kappa * np.sum(d[: t - i] * d[i:], 0) / t`` for i = 1 .. t - 1, in
    place, each column's products added row after row as numpy's axis-0 sum adds them.
    ``columns``: the demeaned losses transposed (K x T, each column contiguous);
    ``kappa2[i - 1]`` is ``2 * kappa`` as Python computes it."""
    k = columns.shape[0]
    for c in range(k):
        x = columns[c]
        i = 1
        while i + 3 < t:  # four lags at once: four independent chains, each in row order
            s0, s1, s2, s3 = x[0] * x[i], x[0] * x[i + 1], x[0] * x[i + 2], x[0] * x[i + 3]
            for r in range(1, t - i - 3):
                xr = x[r]
                s0 += xr * x[r + i]
                s1 += xr * x[r + i + 1]
                s2 += xr * x[r + i + 2]
                s3 += xr * x[r + i + 3]
            for r in range(t - i - 3, t - i):  # the longer chains' last rows
                s0 += x[r] * x[r + i]
                if r < t - i - 1:
                    s1 += x[r] * x[r + i + 1]
                if r < t - i - 2:
                    s2 += x[r] * x[r + i + 2]
            variances[c] += kappa2[i - 1] * s0 / t
            variances[c] += kappa2[i] * s1 / t
            variances[c] += kappa2[i + 1] * s2 / t
            variances[c] += kappa2[i + 2] * s3 / t
            i += 4
        for j in range(i, t):  # the last lags, one at a time
            s = x[0] * x[j]
            for r in range(1, t - j):
                s += x[r] * x[r + j]
            variances[c] += kappa2[j - 1] * s / t


@njit(cache=True)
def _boot_maxima(ld: np.ndarray, index: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Each rep's ``max(ld[index[rep]].mean(0) - centre)``: the resampled rows added in
    ``index`` order, as numpy's mean over axis 0 adds the rows of the resampled copy."""
    reps, t = index.shape
    k = ld.shape[1]
    out = np.empty(reps)
    acc = np.empty(k)
    for rep in range(reps):
        first = index[rep, 0]
        for c in range(k):
            acc[c] = ld[first, c]
        for j in range(1, t):
            row = index[rep, j]
            for c in range(k):
                acc[c] += ld[row, c]
        best = -np.inf
        for c in range(k):
            v = acc[c] / t - centre[c]
            if v > best or np.isnan(v):
                best = v
        out[rep] = best
    return out


def arch_spa(models: np.ndarray, *, block_size: int, reps: int, seed: int) -> Any:
    """``arch.bootstrap.SPA`` as the gate runs it (zero benchmark, stationary bootstrap),
    computed: the reference ``consistent_pvalue`` reproduces."""
    from arch.bootstrap import SPA

    spa = SPA(
        np.zeros(models.shape[0]),
        models,
        block_size=block_size,
        reps=reps,
        bootstrap="stationary",
        seed=seed,
    )
    spa.compute()
    return spa


def arch_pvalue(models: np.ndarray, *, block_size: int, reps: int, seed: int) -> float:
    """``arch_spa``'s consistent p-value."""
    spa = arch_spa(models, block_size=block_size, reps=reps, seed=seed)
    return float(spa.pvalues["consistent"])


def consistent_pvalue(models: np.ndarray, *, block_size: int, reps: int, seed: int) -> float:
    """``arch.bootstrap.SPA(np.zeros(T), models, block_size=block_size, reps=reps,
    bootstrap="stationary", seed=seed)``'s ``pvalues["consistent"]`` (``models``: T x K
    losses, K >= 1)."""
    from arch.bootstrap import StationaryBootstrap

    models = np.asarray(models, dtype=float)
    t, k = models.shape
    if k == 1:  # numpy sums one column pairwise: arch itself, which is cheap here
        return arch_pvalue(models, block_size=block_size, reps=reps, seed=seed)
    ld = np.zeros((t, 1)) - models  # arch: benchmark - models, the benchmark as a column
    # arch's _compute_variance (not nested): the lag-0 term, then every lag's.
    demeaned = ld - ld.mean(axis=0)
    variances = np.sum(demeaned**2, 0) / t
    p = 1.0 / block_size
    kappa2 = np.array(
        [
            2 * (((1.0 - (i / t)) * ((1 - p) ** i)) + ((i / t) * ((1 - p) ** (t - i))))
            for i in range(1, t)
        ]
    )
    _lag_sums(np.ascontiguousarray(demeaned.T), kappa2, t, variances)
    # arch's _check_column_validity and the "consistent" re-centring.
    mean_loss_diff = ld.mean(0)
    threshold = -1.0 * np.sqrt((variances / t) * 2 * np.log(np.log(t)))
    valid = mean_loss_diff >= threshold
    consistent_mean = mean_loss_diff.copy()
    consistent_mean[np.logical_not(valid)] = 0.0
    # The indices arch's bootstrap draws: the same class, data and seed, so the same stream.
    bs = StationaryBootstrap(block_size, ld, seed=seed)
    index = np.empty((reps, t), dtype=np.int64)
    for rep in range(reps):
        index[rep] = bs.update_indices()
    maxima = _boot_maxima(ld, index, consistent_mean)
    max_loss_diff = np.max(ld.mean(axis=0))
    return float((maxima > max_loss_diff).mean(axis=0))
