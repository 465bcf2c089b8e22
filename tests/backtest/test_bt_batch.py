"""Same-code jobs share one sandboxed child: identical results, and a crash part-way costs
only the job that was running (finished ones keep their results, the rest run alone)."""

from __future__ import annotations

from datetime import date

import bt_strategy_sources as src
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors import ProcessPoolBackend
from backtest.sandbox import SandboxPolicy, run_sandboxed, run_sandboxed_batch

pytestmark = pytest.mark.integration

FOLDS = [
    Fold(index=0, warmup_start=date(2014, 1, 2), start=date(2014, 6, 2), end=date(2015, 6, 30)),
    Fold(index=1, warmup_start=date(2015, 1, 2), start=date(2015, 7, 1), end=date(2016, 6, 30)),
    Fold(index=2, warmup_start=date(2016, 1, 4), start=date(2016, 7, 1), end=date(2017, 6, 30)),
]
# Exits the process only on the 2016-07 fold: the crash hits the middle job of a batch.
CRASH_ON_FOLD_2 = """
import os

import backtrader as bt


class CrashesLate(bt.Strategy):
    def next(self):
        if self.data.datetime.date(0).year == 2017:
            os._exit(3)
"""


def _jobs(code: str) -> list[BacktestJob]:
    bars = read_real_bars("AAPL", "2014-01-01", "2017-12-31")
    return [
        BacktestJob(
            job_id=f"j{f.index}", variant_id="v", code=code, symbol="AAPL", bars=bars, fold=f
        )
        for f in FOLDS
    ]


def _comparable(result):
    return result.model_dump(exclude={"duration_s"})


def test_a_batch_gives_the_results_of_separate_children():
    jobs = _jobs(src.SMA_CROSS)
    batched = run_sandboxed_batch(jobs)
    alone = [run_sandboxed(j) for j in jobs]
    assert [o.result.status for o in batched] == [JobStatus.OK] * 3
    assert [_comparable(o.result) for o in batched] == [_comparable(o.result) for o in alone]


def test_a_crash_part_way_costs_only_the_running_job():
    jobs = _jobs(CRASH_ON_FOLD_2)
    outs = run_sandboxed_batch([jobs[0], jobs[2], jobs[1]], SandboxPolicy(validate=False))
    assert outs[0].result.status == JobStatus.OK  # finished before the crash: kept
    assert outs[1].result.status == JobStatus.ERROR and "SandboxCrash" in outs[1].result.error
    assert outs[2].result.status == JobStatus.OK  # after the crash: ran alone


def test_a_rejected_code_rejects_the_whole_batch():
    outs = run_sandboxed_batch(_jobs(src.EXITS_PROCESS))
    assert {o.result.status for o in outs} == {JobStatus.REJECTED}


def test_jobs_of_different_codes_never_share_a_child():
    a, b = _jobs(src.SMA_CROSS)[:1], _jobs(src.BUY_EVERY_BAR)[:1]
    with pytest.raises(ValueError, match="same code"):
        run_sandboxed_batch(a + b)


def test_the_pool_batches_submissions_and_keeps_job_order():
    jobs = _jobs(src.SMA_CROSS) + _jobs(src.BUY_EVERY_BAR)
    with ProcessPoolBackend(workers=2) as pool:
        batched = pool.map(jobs)
    with ProcessPoolBackend(workers=2, batch_window_s=0) as pool:
        alone = pool.map(jobs)
    assert [r.job_id for r in batched] == [j.job_id for j in jobs]
    assert [_comparable(r) for r in batched] == [_comparable(r) for r in alone]
