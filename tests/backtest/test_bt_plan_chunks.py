"""How the pool cuts same-code job groups into sandboxed children."""

from __future__ import annotations

import heapq
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backtest.batching import plan_chunks

pytestmark = pytest.mark.unit


def _simulate(chunks: list[tuple[int, int, int]], workers: int) -> list[int]:
    """Jobs per worker when idle workers pull the chunks in plan order (the pool's way)."""
    loads = [(0, w) for w in range(workers)]
    for _, start, stop in chunks:
        load, w = heapq.heappop(loads)
        heapq.heappush(loads, (load + stop - start, w))
    return sorted(load for load, _ in loads)


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 60), max_size=12),
    workers=st.integers(1, 16),
    max_batch=st.integers(1, 20),
)
def test_every_job_once_one_code_per_child_and_few_children(sizes, workers, max_batch) -> None:
    chunks = plan_chunks(sizes, workers, max_batch)
    covered = sorted((g, i) for g, a, b in chunks for i in range(a, b))
    assert covered == [(g, i) for g, n in enumerate(sizes) for i in range(n)]
    assert all(1 <= b - a <= max_batch for _, a, b in chunks)
    minimum = sum(math.ceil(n / max_batch) for n in sizes)
    assert minimum <= len(chunks) <= minimum + workers - 1  # cuts only where a share ends
    sizes_in_order = [b - a for _, a, b in chunks]
    assert sizes_in_order == sorted(sizes_in_order, reverse=True)  # largest first


@pytest.mark.parametrize(
    ("sizes", "workers", "children", "loads"),
    [
        ([8] * 5, 2, 6, [20, 20]),  # the throughput benchmark: 5 codes x 8 jobs
        ([15] * 5, 2, 6, [37, 38]),  # a develop iteration: 5 variants x 5 symbols x 3 folds
        ([8] * 5, 1, 5, [40]),  # one worker: groups stay whole
        ([40], 2, 4, [20, 20]),  # one big group: cut at the share and at MAX_BATCH
    ],
)
def test_balanced_with_the_fewest_children(sizes, workers, children, loads) -> None:
    chunks = plan_chunks(sizes, workers)
    assert len(chunks) == children
    assert _simulate(chunks, workers) == loads


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="workers"):
        plan_chunks([3], 0)
