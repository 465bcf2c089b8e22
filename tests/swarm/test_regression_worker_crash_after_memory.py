"""Regression: with research memory on (ChromaDB's native runtime) and yfinance's threaded
network stack used by the fundamentals subagent in the same orchestrator, every forked
backtest worker died ('WorkerCrashed') — the default develop command lost all its backtests.
Forking a process that runs native threads is unsafe; workers now come from a forkserver, a
clean interpreter started before any of that, so nothing the orchestrator loads reaches them.
(The crash needs a DNS attempt to reproduce, which tests may not make; these pin the design.)"""

import threading
from datetime import date

import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors import ProcessPoolBackend
from strategies.codegen import render
from strategies.families import default_spec

pytestmark = pytest.mark.integration


def test_pool_workers_are_not_forked_from_the_orchestrator():
    with ProcessPoolBackend(workers=1) as ex:
        assert ex._ctx.get_start_method() == "forkserver"


def test_jobs_run_while_the_orchestrator_has_busy_native_threads(tmp_path):
    from swarm.memory import ResearchMemory

    memory = ResearchMemory(tmp_path / "memory")
    memory.remember_lesson("r", 1, "momentum failed on AAPL", symbols=["AAPL"], family="momentum")
    stop = threading.Event()
    busy = threading.Thread(  # a native-backed store busy in another thread while workers start
        target=lambda: [
            memory.recall(["AAPL"], ["momentum"], "trending-up") for _ in iter(stop.is_set, True)
        ],
        daemon=True,
    )
    busy.start()
    bars = read_real_bars("AAPL", "2014-01-01", "2016-12-31")
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30)
    )
    code = render(default_spec("momentum"))
    jobs = [
        BacktestJob(job_id=f"j{i}", variant_id="v", code=code, symbol="AAPL", bars=bars, fold=fold)
        for i in range(4)
    ]
    try:
        with ProcessPoolBackend(workers=2) as ex:
            results = ex.map(jobs)
    finally:
        stop.set()
        busy.join(timeout=10)
    assert [r.status for r in results] == [JobStatus.OK] * 4, [r.error for r in results]
