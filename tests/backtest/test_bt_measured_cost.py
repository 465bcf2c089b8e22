"""The batcher learns each code's cost from completed jobs (``update_rate``, ``expected_costs``)
and plans the chunks of later submissions with it."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import date
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors.batching import (
    RATE_MEMORY,
    Batcher,
    Rate,
    expected_costs,
    plan_chunks,
    update_rate,
)

pytestmark = pytest.mark.unit


def test_the_rate_is_the_mean_of_the_first_jobs_then_moves_slowly() -> None:
    rate = None
    for seconds in (1.0, 3.0):  # 100 bar-units each: 0.01 and 0.03 s per unit
        rate = update_rate(rate, seconds, 100.0)
    assert rate == Rate(pytest.approx(0.02), 2)
    for _ in range(RATE_MEMORY):
        rate = update_rate(rate, 2.0, 100.0)
    assert rate is not None and rate.jobs == RATE_MEMORY + 2
    before = rate.seconds_per_unit
    rate = update_rate(rate, 100.0, 100.0)  # one outlier moves it by 1/RATE_MEMORY only
    assert rate.seconds_per_unit == pytest.approx(before + (1.0 - before) / RATE_MEMORY)


@pytest.mark.parametrize(
    ("seconds", "cost"), [(0.0, 10.0), (1.0, 0.0), (-1.0, 5.0), (float("nan"), 5.0)]
)
def test_a_job_without_a_run_time_or_cost_teaches_nothing(seconds: float, cost: float) -> None:
    assert update_rate(None, seconds, cost) is None
    assert update_rate(Rate(0.5, 3), seconds, cost) == Rate(0.5, 3)


def test_expected_costs_scale_by_the_code_then_by_the_median_then_not_at_all() -> None:
    costs = [[10.0, 20.0], [10.0], [10.0]]
    assert expected_costs(costs, [None, None, None]) == costs  # the static model
    scaled = expected_costs(costs, [Rate(3.0, 1), Rate(1.0, 4), None])
    assert scaled == [[30.0, 60.0], [10.0], [20.0]]  # unmeasured: median(3, 1) = 2


def test_a_measured_slow_code_is_split_where_the_static_model_kept_it_whole() -> None:
    """Two codes, same bars: statically equal, so each stays in one child per worker; once
    code 0 is measured 3x slower, it is cut so both workers share it."""
    costs = [[10.0] * 4, [10.0] * 4]
    assert sorted(plan_chunks(costs, 2)) == [(0, 0, 4), (1, 0, 4)]
    slow = expected_costs(costs, [Rate(3.0, 5), Rate(1.0, 5)])
    chunks = plan_chunks(slow, 2)
    assert len([c for c in chunks if c[0] == 0]) == 2


FOLD = Fold(index=0, warmup_start=date(2020, 1, 1), start=date(2020, 2, 1), end=date(2020, 6, 30))
BARS = pd.DataFrame(
    {c: np.ones(100) for c in ("open", "high", "low", "close", "volume")},
    index=pd.bdate_range("2020-01-01", periods=100),
)


def _job(k: int, code: str) -> BacktestJob:
    return BacktestJob(job_id=f"j{k}", variant_id="v", code=code, symbol="S", bars=BARS, fold=FOLD)


def test_the_batcher_learns_from_completed_jobs_and_plans_later_chunks_with_it() -> None:
    """A dispatch that reports code "slow" 3x the run time of "fast" per bar: the second
    submission's plan gives "slow" the larger share (it goes first and is cut in two)."""
    plans: list[list[str]] = []

    def dispatch(chunk, policy) -> None:
        plans[-1].append(chunk[0][0].code)
        for job, outer in chunk:
            seconds = 3.0 if job.code == "slow" else 1.0
            outcome = SimpleNamespace(
                result=SimpleNamespace(status=JobStatus.OK, duration_s=seconds)
            )
            outer.set_result(outcome)

    batcher = Batcher(2, dispatch, lambda job, msg: None, window_s=0.01, max_wait_s=0.05)
    try:
        for _ in range(2):
            plans.append([])
            futures = []
            for k in range(8):
                outer: Future = Future()
                batcher.add(_job(k, "fast" if k < 4 else "slow"), None, outer)
                futures.append(outer)
            for f in futures:
                f.result(timeout=10)
        rates = sorted(r.seconds_per_unit for r in batcher.rates().values())
        assert len(rates) == 2 and rates[1] == pytest.approx(3 * rates[0])
    finally:
        batcher.close()
    assert sorted(plans[0]) == ["fast", "slow"]  # static: equal costs, one child each
    assert plans[1][0] == "slow" and plans[1].count("slow") == 2
