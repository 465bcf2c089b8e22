"""Combinatorial purged cross-validation of the search's choice (López de Prado, AFML ch. 12).

The lab's rules fit nothing per fold, so what CPCV validates here is the selection itself:
"pick the trial with the best in-sample Sharpe". The dates the variants share are cut into
``n_groups`` contiguous groups; each of the C(N, k) splits tests ``k`` groups and trains on
the rest, less a purge around each test group and an embargo after it. On each split the
variant with the best training Sharpe is chosen and its returns on the test groups are kept.
The splits' test groups are assembled into phi = k / N * C(N, k) backtest paths, each a full
sequence of the N groups (AFML's path assignment), and each path's annualised Sharpe is one
draw of how the search's choice does on data it did not choose on.

Purge: a trade open across a test group's edge ties the returns on both sides (the position,
its stop, its exit), so training bars within ``purge_bars`` of either edge are dropped. The
default is 40 bars, the longest time stop of the catalogue's exit blocks (``max_hold_bars``);
trend rules can hold longer, so it bounds most trades, not all. Embargo: a further
``embargo_frac`` of the bars after each test group (AFML's 1 %), for the serial correlation
that outlives a trade (volatility, the indicators' memory).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from gate.aggregate import common_matrix

N_GROUPS = 6
N_TEST_GROUPS = 2
PURGE_BARS = 40
EMBARGO_FRAC = 0.01
MIN_VARIANTS = 2  # one variant involves no choice to validate
MIN_GROUP_BARS = 20  # a group's Sharpe needs some bars
MIN_TRAIN_BARS = 20  # nor can a choice be made on fewer training bars
MAX_SPLITS = 1000  # C(N, k) grows fast (C(16, 8) = 12870); each split re-selects over every trial
_STD_FLOOR = 1e-15


class CpcvResult(BaseModel):
    """The paths' Sharpe distribution of the search's choice, or why it was not computed
    (``reason``; the statistics are then None)."""

    model_config = ConfigDict(extra="forbid")

    n_groups: int
    n_test_groups: int
    purge_bars: int
    embargo_frac: float
    embargo_bars: int = 0
    n_splits: int = 0
    n_paths: int = 0
    n_variants: int = 0
    n_dates: int = 0
    path_sharpes: list[float] = Field(default_factory=list)  # annualised, path order
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    p5: float | None = None
    share_negative: float | None = None  # of the paths, with a Sharpe below zero
    chosen: list[str] = Field(default_factory=list)  # per split: the variant its training chose
    reason: str | None = None  # why not computed; None when it was
    unit: Literal["annualised"] = "annualised"


def check_settings(n_groups: int, n_test_groups: int) -> str | None:
    """What is wrong with N groups and k test groups, in a phrase; None when they are usable."""
    if n_groups < 2:
        return f"the number of groups must be at least 2, got {n_groups}"
    if not 1 <= n_test_groups < n_groups:
        return f"the test groups must be between 1 and {n_groups - 1} (groups - 1), got {n_test_groups}"
    if (n := math.comb(n_groups, n_test_groups)) > MAX_SPLITS:
        return (
            f"{n_groups} groups with {n_test_groups} tested make {n} splits, over the "
            f"{MAX_SPLITS} this computes: fewer groups or test groups (e.g. 6 and 2)"
        )
    return None


def group_edges(n_rows: int, n_groups: int) -> np.ndarray:
    """The N + 1 row edges of N contiguous groups of (near) equal size."""
    return np.linspace(0, n_rows, n_groups + 1).astype(int)


def split_groups(n_groups: int, n_test_groups: int) -> list[tuple[int, ...]]:
    """Every split's test groups, in lexicographic order: C(N, k) of them."""
    return list(itertools.combinations(range(n_groups), n_test_groups))


def train_mask(
    edges: np.ndarray, test_groups: tuple[int, ...], purge: int, embargo: int
) -> np.ndarray:
    """The training rows of one split: not in a test group, not within ``purge`` rows before
    a test group's start, nor within ``purge + embargo`` rows after its end."""
    n_rows = int(edges[-1])
    train = np.ones(n_rows, dtype=bool)
    for g in test_groups:
        lo, hi = int(edges[g]), int(edges[g + 1])
        train[max(lo - purge, 0) : min(hi + purge + embargo, n_rows)] = False
    return train


def path_assignment(n_groups: int, n_test_groups: int) -> np.ndarray:
    """phi x N split indices: path ``j`` takes group ``g`` from the ``j``-th split (in
    ``split_groups`` order) that tests ``g``; each group is tested by phi splits."""
    combos = split_groups(n_groups, n_test_groups)
    by_group = [[s for s, c in enumerate(combos) if g in c] for g in range(n_groups)]
    return np.array(by_group, dtype=int).T


def _sharpe(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Per-period Sharpe along ``axis`` (sample std); 0 where the returns are flat."""
    mean = x.mean(axis=axis)
    std = x.std(axis=axis, ddof=1) if x.shape[axis] > 1 else np.zeros_like(mean)
    return np.where(std > _STD_FLOOR, mean / np.where(std > _STD_FLOOR, std, 1.0), 0.0)


def cpcv_paths(
    matrix: np.ndarray,
    *,
    n_groups: int = N_GROUPS,
    n_test_groups: int = N_TEST_GROUPS,
    purge: int = PURGE_BARS,
    embargo: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """(paths x T returns of the chosen variants, the variant chosen on each split) for a
    T x V ``matrix`` of returns (NaN counts as a flat day). Raises ValueError when a split
    has no training rows."""
    m = np.nan_to_num(np.asarray(matrix, dtype=float), nan=0.0)
    edges = group_edges(m.shape[0], n_groups)
    combos = split_groups(n_groups, n_test_groups)
    chosen = np.empty(len(combos), dtype=int)
    for s, test in enumerate(combos):
        train = train_mask(edges, test, purge, embargo)
        if not train.any():
            raise ValueError(f"split {s} (test groups {test}) has no training rows left")
        chosen[s] = int(np.argmax(_sharpe(m[train])))  # the first of equals: stable ids
    assign = path_assignment(n_groups, n_test_groups)
    paths = np.empty((assign.shape[0], m.shape[0]))
    for j, row in enumerate(assign):
        for g, s in enumerate(row):
            lo, hi = edges[g], edges[g + 1]
            paths[j, lo:hi] = m[lo:hi, chosen[s]]
    return paths, chosen


def _unavailable(base: dict[str, Any], reason: str) -> CpcvResult:
    return CpcvResult(**base, reason=reason)


def run_cpcv(
    series: Mapping[str, Mapping[str, float]],
    *,
    n_groups: int = N_GROUPS,
    n_test_groups: int = N_TEST_GROUPS,
    purge: int = PURGE_BARS,
    embargo_frac: float = EMBARGO_FRAC,
    periods_per_year: int = 252,
) -> CpcvResult:
    """CPCV over every variant's returns (variant id -> date -> return), aligned on the
    dates they all share as ``gate.evaluate.run_pbo`` is; ``reason`` says why not when there
    are too few variants or dates. Raises ValueError on unusable N, k, purge or embargo."""
    if (bad := check_settings(n_groups, n_test_groups)) is not None:
        raise ValueError(bad)
    if purge < 0 or not 0.0 <= embargo_frac < 1.0:
        raise ValueError(
            f"purge must be >= 0 and embargo_frac in [0, 1), got {purge}, {embargo_frac}"
        )
    base: dict[str, Any] = {
        "n_groups": n_groups,
        "n_test_groups": n_test_groups,
        "purge_bars": purge,
        "embargo_frac": embargo_frac,
    }
    ids = sorted(v for v, s in series.items() if s)  # sorted: ties choose the same on resume
    if len(ids) < MIN_VARIANTS:
        return _unavailable(base, f"needs >= {MIN_VARIANTS} variants with returns, has {len(ids)}")
    m = common_matrix([dict(series[v]) for v in ids])
    t = m.shape[0]
    embargo = math.ceil(embargo_frac * t)
    base |= {"n_variants": len(ids), "n_dates": t, "embargo_bars": embargo}
    if t < n_groups * MIN_GROUP_BARS:
        return _unavailable(
            base,
            f"needs >= {n_groups * MIN_GROUP_BARS} shared dates for {n_groups} groups of "
            f">= {MIN_GROUP_BARS} bars, has {t}",
        )
    edges = group_edges(t, n_groups)
    fewest = min(
        int(train_mask(edges, c, purge, embargo).sum())
        for c in split_groups(n_groups, n_test_groups)
    )
    if fewest < MIN_TRAIN_BARS:
        return _unavailable(
            base,
            f"the purge ({purge} bars) and embargo ({embargo}) leave a split "
            f"{fewest} training bars of {t} (needs >= {MIN_TRAIN_BARS}): fewer groups or a "
            "longer window",
        )
    paths, chosen = cpcv_paths(
        m, n_groups=n_groups, n_test_groups=n_test_groups, purge=purge, embargo=embargo
    )
    sharpes = _sharpe(paths, axis=1) * math.sqrt(periods_per_year)
    return CpcvResult(
        **base,
        n_splits=len(chosen),
        n_paths=len(sharpes),
        path_sharpes=[float(x) for x in sharpes],
        mean=float(np.mean(sharpes)),
        median=float(np.median(sharpes)),
        std=float(np.std(sharpes, ddof=1)) if len(sharpes) > 1 else 0.0,
        p5=float(np.percentile(sharpes, 5)),
        share_negative=float(np.mean(sharpes < 0.0)),
        chosen=[ids[i] for i in chosen],
    )


def cpcv_summary(r: CpcvResult) -> str:
    """One line on the paths: how often the search's choice lost out of sample, the median
    and 5th percentile (the report's reading and the gate's progress line)."""
    if r.reason is not None:
        return f"CPCV not computed: {r.reason}"
    return (
        f"the search's choice had a negative out-of-sample Sharpe on "
        f"{100 * (r.share_negative or 0.0):.0f} % of "
        f"the {r.n_paths} paths (median {r.median:.2f}, 5th percentile {r.p5:.2f}, annualised; "
        f"{r.n_splits} splits of {r.n_groups} groups, {r.n_test_groups} tested, over "
        f"{r.n_variants} variants)"
    )
