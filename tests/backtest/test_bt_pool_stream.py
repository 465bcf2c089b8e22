"""The pool on many cores: results stream per job, the caller's thread never touches the
bars, chunks carry one window per symbol, and none of it changes a result."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from datetime import date

import bt_strategy_sources as src
import pandas as pd
import pytest
from conftest import read_real_bars

import backtest.executors.batching as batching
import backtest.executors.pool as executor_pool
from backtest.books import feed_frame, window_bars
from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.engine import run_job
from backtest.executors import ProcessPoolBackend, SerialBackend
from backtest.executors.batching import code_blocks, job_cost, share_windows
from backtest.executors.stream import InFlight
from backtest.sandbox import SandboxOutcome, SandboxPolicy, error_outcome
from strategies.codegen import render
from strategies.families import default_spec
from strategies.spec import Family

FOLDS = [
    Fold(index=0, warmup_start=date(2014, 1, 2), start=date(2014, 6, 2), end=date(2015, 6, 30)),
    Fold(index=1, warmup_start=date(2015, 1, 2), start=date(2015, 7, 1), end=date(2016, 6, 30)),
    Fold(index=2, warmup_start=date(2016, 1, 4), start=date(2016, 7, 1), end=date(2017, 6, 30)),
]
# Spins for 3 s on the 2017 bars: only the last fold's job is slow.
SLOW_ON_FOLD_2 = """
import time

import backtrader as bt


class SlowLate(bt.Strategy):
    def next(self):
        if self.data.datetime.date(0).year == 2017 and not getattr(self, "spun", False):
            self.spun = True
            t = time.perf_counter()
            while time.perf_counter() - t < 3.0:
                pass
"""


def _comparable(results):
    return [r.model_dump(exclude={"duration_s"}) for r in results]


@pytest.fixture(scope="module")
def bars() -> dict[str, pd.DataFrame]:
    return {s: read_real_bars(s, "2013-01-01", "2017-12-31") for s in ("AAPL", "MSFT")}


def _jobs(code: str, bars: dict[str, pd.DataFrame], variant: str = "v") -> list[BacktestJob]:
    return [
        BacktestJob(
            job_id=f"{variant}|{s}|f{f.index}",
            variant_id=variant,
            code=code,
            symbol=s,
            bars=frame,
            fold=f,
        )
        for s, frame in bars.items()
        for f in FOLDS
    ]


# ---------------------------------------------------------------------------- unit


@pytest.mark.unit
def test_a_chunk_carries_one_window_per_frame_and_every_run_sees_the_same_bars(bars) -> None:
    jobs = _jobs(src.SMA_CROSS, bars)
    portfolio = BacktestJob(
        job_id="p", variant_id="v", code=src.SMA_CROSS, symbol="ALL", bars=dict(bars), fold=FOLDS[1]
    )
    shared = share_windows([*jobs, portfolio])
    windows = {id(f) for job in shared for _, f in job.feeds()}
    assert len(windows) == 2  # one window per symbol, shared by its jobs and the portfolio's
    for before, after in zip([*jobs, portfolio], shared, strict=True):
        assert [n for n, _ in after.feeds()] == [n for n, _ in before.feeds()]
        for (_, full), (_, cut) in zip(before.feeds(), after.feeds(), strict=True):
            assert len(cut) < len(full)
            got, want = feed_frame(cut, before.fold), feed_frame(full, before.fold)
            assert got.equals(want) and got.index.equals(want.index)
    unsorted = bars["AAPL"].iloc[::-1]
    odd = BacktestJob(job_id="u", variant_id="v", code="", symbol="X", bars=unsorted, fold=FOLDS[0])
    assert share_windows([odd])[0].bars is unsorted  # left for the run to report


@pytest.mark.unit
def test_the_cost_of_a_job_follows_its_bars_and_indicators(bars) -> None:
    frame = bars["AAPL"]
    short, long_ = (
        FOLDS[0],
        Fold(
            index=9, warmup_start=date(2013, 1, 2), start=date(2014, 1, 2), end=date(2017, 12, 29)
        ),
    )
    assert window_bars(frame, short) == len(feed_frame(frame, short))
    assert window_bars(frame.iloc[::-1], short) == len(feed_frame(frame, short))
    assert code_blocks(src.SMA_CROSS) == 3
    trend = render(default_spec(Family.TREND))
    assert code_blocks(trend) > code_blocks(render(default_spec(Family.MOMENTUM)))
    job = _jobs(src.SMA_CROSS, {"AAPL": frame})[0]
    cheap = job_cost(job, 1)
    assert job_cost(job, 5) > cheap
    assert job_cost(replace(job, fold=long_), 1) > 2 * cheap


@pytest.mark.unit
def test_a_streamed_result_and_a_retry_of_the_same_job_settle_it_once() -> None:
    jobs = [
        BacktestJob(
            job_id=f"j{i}", variant_id="v", code="", symbol="X", bars=pd.DataFrame(), fold=FOLDS[0]
        )
        for i in range(2)
    ]
    futures: list[Future] = [Future(), Future()]
    inflight = InFlight()
    token = inflight.add(list(zip(jobs, futures, strict=True)))
    first = error_outcome(jobs[0], JobStatus.ERROR, "first")
    inflight.settle(token, 0, first)
    inflight.settle(token, 0, error_outcome(jobs[0], JobStatus.ERROR, "second"))
    assert futures[0].result() is first
    assert [k for k, _ in inflight.unsettled(token)] == [1]
    inflight.fail(token, 1, "unreadable")
    assert "PoolError: unreadable" in futures[1].result().result.error
    assert inflight.unsettled(token) == []  # all settled: the chunk is forgotten
    inflight.settle(token, 1, SandboxOutcome(first.result))  # late: ignored
    assert "unreadable" in futures[1].result().result.error


# ---------------------------------------------------------------------------- integration


@pytest.mark.integration
def test_each_result_arrives_when_its_job_is_done_not_when_its_chunk_is(bars) -> None:
    """One worker, one chunk of three same-code jobs, the last one 3 s slower: the first two
    results reach the caller (future and callback) seconds before the chunk ends."""
    jobs = _jobs(SLOW_ON_FOLD_2, {"AAPL": bars["AAPL"]})
    arrived: dict[str, float] = {}
    with ProcessPoolBackend(1, policy=SandboxPolicy(validate=False)) as pool:
        pool.map(jobs[:1])  # a warm worker
        t0 = time.perf_counter()
        results = pool.map(
            jobs, on_result=lambda r: arrived.setdefault(r.job_id, time.perf_counter() - t0)
        )
    assert [r.status for r in results] == [JobStatus.OK] * 3
    fast = max(arrived[j.job_id] for j in jobs[:2])
    assert arrived[jobs[2].job_id] - fast > 2.0, arrived


@pytest.mark.integration
def test_the_driver_never_cuts_bars(bars, monkeypatch) -> None:
    """Submitting is O(1) in the bars and the driver cuts no window: each symbol's frame is
    published once for the run (``pool_frames``), every job crosses as a reference, and the
    workers cut the windows."""
    calls: list[str] = []
    real = batching.feed_frame

    def spy(frame, fold):
        calls.append(threading.current_thread().name)
        return real(frame, fold)

    monkeypatch.setattr(batching, "feed_frame", spy)
    monkeypatch.setattr(executor_pool, "trim_bars", lambda job: pytest.fail("trimmed per job"))
    jobs = _jobs(src.SMA_CROSS, bars) + _jobs(
        src.SMA_CROSS.replace("fast=10", "fast=12"), bars, "w"
    )
    with ProcessPoolBackend(2) as pool:
        results = pool.map(jobs)
        results += pool.map(jobs)  # a second iteration publishes nothing again
        stats = pool._frames.stats
    assert all(r.status == JobStatus.OK for r in results)
    assert calls == []
    assert stats.frames == len({id(j.bars) for j in jobs}) == 2
    assert stats.jobs == 2 * len(jobs)


@pytest.mark.integration
def test_streamed_pool_results_are_the_serial_and_in_process_ones(bars) -> None:
    """Five families x 2 symbols x 3 folds through the streaming pool: bit-identical to
    one sandboxed child per job (serial) and to the engine in this process."""
    jobs = [job for fam in Family for job in _jobs(render(default_spec(fam)), bars, fam.value)]
    streamed: list[str] = []
    with ProcessPoolBackend(2) as pool:
        pooled = pool.map(jobs, on_result=lambda r: streamed.append(r.job_id))
    assert sorted(streamed) == sorted(j.job_id for j in jobs)  # one callback per job
    assert [r.job_id for r in pooled] == [j.job_id for j in jobs]
    assert all(r.status == JobStatus.OK for r in pooled)
    with SerialBackend() as serial:
        assert _comparable(pooled) == _comparable(serial.map(jobs))
    assert _comparable(pooled) == _comparable([run_job(j) for j in jobs])


# Looks for its worker's pipes (the result stream among them) through /proc and writes a
# forged message into every one it can open.
FORGES_ON_THE_WORKERS_PIPES = """
import os

import backtrader as bt


class Forger(bt.Strategy):
    def __init__(self):
        base = f"/proc/{os.getppid()}/fd"
        try:
            names = os.listdir(base)
        except OSError:
            names = [str(n) for n in range(64)]
        for name in names:
            try:
                fd = os.open(f"{base}/{name}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(fd, bytes(16) + b"forged")  # chunk 0, job 0: a result of another job
            except OSError:
                pass

    def next(self):
        pass
"""


@pytest.mark.integration
def test_a_child_cannot_reach_the_result_stream(bars) -> None:
    """The forger's chunk runs beside honest chunks on a 2-worker pool: every honest result
    is the serial one (a forged message would settle job 0 of chunk 0 as an error)."""
    honest = _jobs(src.SMA_CROSS, bars)
    forger = _jobs(FORGES_ON_THE_WORKERS_PIPES, bars, "forger")
    policy = SandboxPolicy(validate=False)
    with ProcessPoolBackend(2, policy=policy) as pool:
        got = pool.map(honest + forger)
    assert all(r.status == JobStatus.OK for r in got), [r.error for r in got]
    with SerialBackend(policy=policy) as serial:
        assert _comparable(got[: len(honest)]) == _comparable(serial.map(honest))
