"""The run's effective trial count, measured from the run folder (``gate.effective``).

Every trial's in-sample return series is on disk, never in the checkpointed state: the screened
sets' in ``screens/iNN.npz`` (``backtest.screen.write_batch``), the Backtrader variants' in
``backtests/<variant_id>/`` (read by the gate for PBO and the reality check). Each screened batch
is clustered once (memoised in the run context); the run level clusters the batches'
representatives with every Backtrader trial that is not a screened set already.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from gate.effective import (
    CORRELATION_DISTANCE,
    aligned,
    cluster_series,
    effective_count,
    hedge_rows,
)
from gate.ledger import EffectiveTrials
from strategies.spec import StrategyVariant
from swarm.context import RunContext
from swarm.state import StoredVariant


def _batch_groups(
    ctx: RunContext, benchmark: Mapping[str, float] | None
) -> list[tuple[list[str], dict[str, float]]]:
    """Every screened batch's clusters: (member trial keys, representative series)."""
    from backtest.screen import batch_files, read_batch

    memo = ctx.memo.screen_groups.setdefault(benchmark is None, {})
    out: list[tuple[list[str], dict[str, float]]] = []
    for path in batch_files(ctx.run.path("screens")):
        if path.name not in memo:
            keys, dates, matrix = read_batch(path)
            bench = None if benchmark is None else [benchmark.get(d, 0.0) for d in dates]
            clusters = cluster_series(hedge_rows(matrix, bench))
            memo[path.name] = [
                ([keys[i] for i in members], dict(zip(dates, rep.tolist(), strict=True)))
                for members, rep in zip(clusters.members, clusters.representatives, strict=True)
            ]
        out.extend(memo[path.name])
    return out


# The reality check's cap on screened cluster representatives (``screened_representatives``):
# arch's SPA costs reps x T x K, so with 1,000 reps, ~1,500 in-sample days and K <= 200 + the
# run's Backtrader trials (tens) it stays ~1-3 s per gate, however many sets were screened.
SPA_MAX_SCREENED = 200
SCREEN_PREFIX = "screen:"  # the ids the reality check gives screened representatives


def screened_representatives(
    ctx: RunContext,
    benchmark: Mapping[str, float] | None,
    *,
    cap: int = SPA_MAX_SCREENED,
) -> dict[str, dict[str, float]]:
    """One series per cluster of every screened batch so far (``_batch_groups``: the alpha
    series' clusters against ``benchmark``, the raw ones for cash), for the reality check:
    id ``screen:<first member's trial key>`` -> the cluster's mean series. Over ``cap``
    clusters, those with the highest mean return are kept (the ones that can carry SPA's
    maximum; ties by id), so the cost stays bounded."""
    reps = {
        f"{SCREEN_PREFIX}{keys[0]}": rep
        for keys, rep in _batch_groups(ctx, benchmark)
        if any(x != 0.0 for x in rep.values())  # a flat cluster (no trade) tests nothing
    }
    if len(reps) <= cap:
        return reps
    mean = {k: sum(v.values()) / max(len(v), 1) for k, v in reps.items()}
    keep = sorted(reps, key=lambda k: (-mean[k], k))[: max(0, cap)]
    return {k: reps[k] for k in sorted(keep)}


def measure_effective(
    ctx: RunContext,
    trial_keys: Iterable[str],
    variant_series: Mapping[str, Mapping[str, float]],
    variant_keys: Mapping[str, str],
    benchmark: Mapping[str, float] | None = None,
) -> EffectiveTrials:
    """Clusters of the trials in ``trial_keys`` (the ledger's, this iteration's included).

    ``variant_series``: variant id -> its in-sample portfolio returns; ``variant_keys``:
    variant id -> trial key; ``benchmark`` (date -> return; None for cash): the series are
    clustered as alpha series against it. A trial with no series anywhere counts as one.
    """
    wanted = set(trial_keys)
    groups: list[tuple[list[str], Mapping[str, float]]] = []
    hedged_already: list[bool] = []
    claimed: set[str] = set()
    for keys, rep in _batch_groups(ctx, benchmark):
        members = [k for k in keys if k in wanted]
        if members:
            groups.append((members, rep))
            hedged_already.append(True)
            claimed.update(members)
    for vid in sorted(variant_series):
        key = variant_keys.get(vid)
        series = variant_series[vid]
        if key is None or key not in wanted or key in claimed or not series:
            continue
        groups.append(([key], series))
        hedged_already.append(False)
        claimed.add(key)
    dates, matrix = aligned([rep for _, rep in groups])
    if benchmark is not None and groups:
        own = [i for i, done in enumerate(hedged_already) if not done]
        bench = np.array([benchmark.get(d, 0.0) for d in dates])
        matrix[own] = hedge_rows(matrix[own], bench)
    count = effective_count(
        [(keys, row) for (keys, _), row in zip(groups, matrix, strict=True)],
        dates=dates,
        n_without_series=len(wanted - claimed),
    )
    return EffectiveTrials(
        n=count.n_effective,
        n_with_series=count.n_with_series,
        threshold=CORRELATION_DISTANCE,
        cluster_sharpes=count.cluster_sharpes,
    )


def variant_trial_keys(
    all_variants: Mapping[str, StoredVariant], current: Iterable[StrategyVariant]
) -> dict[str, str]:
    """Variant id -> trial key, for every variant of the run and this iteration's."""
    out = {vid: v.spec.trial_key() for vid, v in all_variants.items()}
    out.update({v.variant_id: v.spec.trial_key() for v in current})
    return out
