"""Executors: the fork pool matches serial runs and survives a worker that dies."""

from __future__ import annotations

from datetime import date

import bt_strategy_sources as src
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.errors import BacktestError
from backtest.executors import (
    Executor,
    ProcessPoolBackend,
    RayBackend,
    SerialBackend,
    make_executor,
)

FOLD = Fold(index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30))


@pytest.fixture(scope="module")
def jobs() -> list[BacktestJob]:
    bars = read_real_bars("AAPL", "2014-01-01", "2016-12-31")
    return [
        BacktestJob(
            job_id=f"j{i}",
            variant_id="sma",
            code=src.SMA_CROSS,
            symbol="AAPL",
            bars=bars,
            fold=FOLD,
            params={"fast": 5 + 3 * i, "slow": 30},
        )
        for i in range(4)
    ]


def _comparable(results):
    return [r.model_dump(exclude={"duration_s"}) for r in results]


@pytest.mark.integration
def test_process_pool_matches_serial(jobs: list[BacktestJob]) -> None:
    seen = []
    with ProcessPoolBackend(2) as pool:
        assert isinstance(pool, Executor)
        parallel = pool.map(jobs, on_result=lambda r: seen.append(r.job_id))
    with SerialBackend() as serial:
        expected = serial.map(jobs)
    assert [r.job_id for r in parallel] == ["j0", "j1", "j2", "j3"]  # job order
    assert sorted(seen) == ["j0", "j1", "j2", "j3"]
    assert all(r.status == JobStatus.OK for r in parallel)
    assert _comparable(parallel) == _comparable(expected)


@pytest.mark.integration
def test_exiting_code_is_an_error_and_the_worker_lives(jobs: list[BacktestJob]) -> None:
    """With the sandbox, os._exit only ends the job's own child process."""
    from backtest.sandbox import SandboxPolicy

    killer = BacktestJob(
        job_id="killer",
        variant_id="bad",
        code=src.EXITS_PROCESS,
        symbol="AAPL",
        bars=jobs[0].bars,
        fold=FOLD,
    )
    with ProcessPoolBackend(2) as pool:  # validation on: `import os` is rejected
        assert pool.submit(killer).result().status == JobStatus.REJECTED
    with ProcessPoolBackend(2, policy=SandboxPolicy(validate=False)) as pool:
        results = pool.map([jobs[0], killer, jobs[1]])
        assert [r.status for r in results] == [JobStatus.OK, JobStatus.ERROR, JobStatus.OK]
        assert "SandboxCrash" in results[1].error and "code 1" in results[1].error


@pytest.mark.integration
def test_dead_worker_is_an_error_and_the_pool_recovers(jobs: list[BacktestJob]) -> None:
    """Without the sandbox (sandbox=False) a dying worker is retried alone, then reported."""
    killer = BacktestJob(
        job_id="killer",
        variant_id="bad",
        code=src.EXITS_PROCESS,
        symbol="AAPL",
        bars=jobs[0].bars,
        fold=FOLD,
    )
    with ProcessPoolBackend(2, sandbox=False) as pool:
        results = pool.map([jobs[0], killer, jobs[1]])
        assert [r.status for r in results] == [JobStatus.OK, JobStatus.ERROR, JobStatus.OK]
        assert results[1].error.startswith("WorkerCrashed") and results[1].job_id == "killer"
        after = pool.submit(jobs[2]).result(timeout=60)
        assert after.status == JobStatus.OK


@pytest.mark.unit
def test_make_executor() -> None:
    with make_executor("serial") as ex:
        assert isinstance(ex, SerialBackend)
    with pytest.raises(BacktestError, match="--executor: unknown kind 'gpu'"):
        make_executor("gpu")


@pytest.mark.integration
def test_timeout_inside_a_worker(jobs: list[BacktestJob]) -> None:
    spin = BacktestJob(
        job_id="spin",
        variant_id="bad",
        code=src.ENDLESS,
        symbol="AAPL",
        bars=jobs[0].bars,
        fold=FOLD,
        timeout_s=1.0,
    )
    from backtest.sandbox import SandboxPolicy

    with make_executor("process", workers=1, policy=SandboxPolicy(validate=False)) as pool:
        first, second = pool.map([spin, jobs[0]])
    assert first.status == JobStatus.TIMEOUT and second.status == JobStatus.OK


@pytest.mark.integration
@pytest.mark.slow
def test_ray_matches_the_process_pool(jobs: list[BacktestJob]) -> None:
    pytest.importorskip("ray")
    with ProcessPoolBackend(2) as pool:
        expected = pool.map(jobs)
    with make_executor("ray", workers=2) as ray_ex:
        assert isinstance(ray_ex, RayBackend) and isinstance(ray_ex, Executor)
        got = ray_ex.map(jobs)
        traced = ray_ex.submit_trace(jobs[0]).result()
    assert all(r.status == JobStatus.OK for r in got)
    assert _comparable(got) == _comparable(expected)
    assert traced.trace is not None and traced.trace["orders"]
    import ray

    assert not ray.is_initialized()  # shut down by close()


@pytest.fixture(scope="module")
def portfolio_jobs() -> list[BacktestJob]:
    """Portfolio-scope jobs: one strategy over four real feeds (``bars`` a dict), each
    template of the portfolio families once (long/short, inverse-vol, rotation)."""
    from strategies.codegen import render
    from strategies.portfolio import TEMPLATES, portfolio_spec

    bars = {
        s: read_real_bars(s, "2014-01-01", "2016-12-31") for s in ("AAPL", "MSFT", "INTC", "CSCO")
    }
    jobs = []
    for i, t in enumerate(TEMPLATES):
        spec = portfolio_spec(t.family, t.params, long_short=t.long_short, note=t.note)
        jobs.append(
            BacktestJob(
                job_id=f"p{i}",
                variant_id=f"p{i}",
                code=render(spec),
                symbol="PORTFOLIO",
                bars=bars,
                fold=FOLD,
            )
        )
    return jobs


@pytest.mark.integration
@pytest.mark.slow
def test_ray_matches_the_process_pool_on_portfolio_jobs(
    portfolio_jobs: list[BacktestJob],
) -> None:
    pytest.importorskip("ray")
    with ProcessPoolBackend(2) as pool:
        expected = pool.map(portfolio_jobs)
    with make_executor("ray", workers=2) as ray_ex:
        got = ray_ex.map(portfolio_jobs)
    assert all(r.status == JobStatus.OK for r in expected), [r.error for r in expected]
    assert sum(r.metrics.n_trades for r in expected) > 0  # they trade: the comparison bites
    assert _comparable(got) == _comparable(expected)
