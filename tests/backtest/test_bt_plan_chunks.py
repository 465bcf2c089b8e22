"""How the pool cuts same-code job groups into sandboxed children: balanced by cost."""

from __future__ import annotations

import heapq
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backtest.executors.batching import plan_chunks

pytestmark = pytest.mark.unit


def _simulate(
    chunks: list[tuple[int, int, int]], costs: list[list[float]], workers: int
) -> list[float]:
    """Each worker's busy time when idle workers pull the chunks in plan order (the pool's
    way) and every job takes exactly its cost."""
    loads = [(0.0, w) for w in range(workers)]
    for g, start, stop in chunks:
        load, w = heapq.heappop(loads)
        heapq.heappush(loads, (load + sum(costs[g][start:stop]), w))
    return sorted(load for load, _ in loads)


def _units(sizes: list[int]) -> list[list[float]]:
    return [[1.0] * n for n in sizes]


COSTS = st.lists(
    st.lists(st.one_of(st.floats(0.0, 10.0), st.sampled_from([1.0, 2.0])), max_size=40),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(costs=COSTS, workers=st.integers(1, 16), max_batch=st.integers(1, 20))
def test_every_job_once_and_no_worker_past_its_share_by_more_than_one_job(
    costs, workers, max_batch
) -> None:
    chunks = plan_chunks(costs, workers, max_batch)
    covered = sorted((g, i) for g, a, b in chunks for i in range(a, b))
    assert covered == [(g, i) for g, group in enumerate(costs) for i in range(len(group))]
    assert all(1 <= b - a <= max_batch for _, a, b in chunks)  # one group (one code) each
    total = sum(map(sum, costs))
    if not total:
        return
    ideal = total / workers
    costliest = max(max(group) for group in costs if group)
    tol = 1e-9 * total
    # The bound the equal-count plan broke: no child costs more than a share plus one job...
    assert max(sum(costs[g][a:b]) for g, a, b in chunks) <= ideal + costliest + tol
    # ...and, pulled by idle workers in plan order, every worker ends within one job of ideal.
    assert max(_simulate(chunks, costs, workers)) <= ideal + costliest + tol
    minimum = sum(math.ceil(len(group) / max_batch) for group in costs)
    assert len(chunks) <= minimum + 2 * workers  # few extra children (forks)


def test_unequal_costs_are_balanced_where_equal_counts_were_not() -> None:
    """5 variants x 5 symbols x 3 folds in bar-units: variants 35% apart per step, one symbol
    listed late (no bars in the first fold, half in the second)."""
    bars = [[1000, 1000, 1000]] * 4 + [[0, 500, 1000]]
    costs = [[b * (1 + 0.35 * k) + 300 for folds in bars for b in folds] for k in (1, 2, 3, 4, 5)]
    # (workers, makespan over ideal with equal counts at least, with costs at most)
    for workers, by_count_over, by_cost_under in (
        (2, 1.01, 1.005),
        (8, 1.2, 1.07),
        (16, 1.5, 1.08),
    ):
        ideal = sum(map(sum, costs)) / workers
        by_count = max(_simulate(plan_chunks(_units([15] * 5), workers), costs, workers))
        by_cost = max(_simulate(plan_chunks(costs, workers), costs, workers))
        assert by_count / ideal > by_count_over  # what equal job counts left idle
        assert by_cost / ideal < by_cost_under


@pytest.mark.parametrize(
    ("sizes", "workers", "children", "loads"),
    [
        ([8] * 5, 2, 6, [20, 20]),  # the throughput benchmark: 5 codes x 8 jobs
        ([15] * 5, 2, 6, [37, 38]),  # a develop iteration: 5 variants x 5 symbols x 3 folds
        ([8] * 5, 1, 5, [40]),  # one worker: groups stay whole
        ([40], 2, 4, [20, 20]),  # one big group: cut at the share and at MAX_BATCH
    ],
)
def test_equal_costs_balanced_with_the_fewest_children(sizes, workers, children, loads) -> None:
    chunks = plan_chunks(_units(sizes), workers)
    assert len(chunks) == children
    assert _simulate(chunks, _units(sizes), workers) == loads


def test_costliest_groups_go_first() -> None:
    chunks = plan_chunks([[1.0] * 4, [5.0] * 4, [2.0] * 4], 1)
    assert [g for g, _, _ in chunks] == [1, 2, 0]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="workers"):
        plan_chunks([[1.0] * 3], 0)
    with pytest.raises(ValueError, match="costs"):
        plan_chunks([[1.0, -1.0]], 2)
