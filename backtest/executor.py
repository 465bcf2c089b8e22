"""Executors: run many backtest jobs, serially or on a fork process pool.

Futures returned by an executor never raise: a worker that dies (``os._exit``,
segfault, OOM kill) or any other failure becomes a ``BacktestResult`` with
status error, and later jobs still run.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from backtest.compat import patch_backtrader
from backtest.contracts import BacktestJob, BacktestResult, JobStatus
from backtest.engine import run_job
from backtest.errors import BacktestError

EXECUTOR_KINDS = ("process", "serial", "ray")
OnResult = Callable[[BacktestResult], None]

WORKER_DIED = (
    "WorkerCrashed: the worker process running this job died abruptly "
    "(os._exit, segfault or out-of-memory kill); the job was retried alone and died again"
)


def error_result(job: BacktestJob, message: str) -> BacktestResult:
    return BacktestResult(
        job_id=job.job_id,
        variant_id=job.variant_id,
        symbol=job.symbol,
        fold=job.fold.index,
        status=JobStatus.ERROR,
        error=" ".join(message.split())[:500],
    )


@runtime_checkable
class Executor(Protocol):
    def submit(self, job: BacktestJob) -> Future[BacktestResult]: ...

    def map(
        self, jobs: Iterable[BacktestJob], on_result: OnResult | None = None
    ) -> list[BacktestResult]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class _BaseExecutor:
    def submit(self, job: BacktestJob) -> Future[BacktestResult]:
        raise NotImplementedError

    def map(
        self, jobs: Iterable[BacktestJob], on_result: OnResult | None = None
    ) -> list[BacktestResult]:
        """Run ``jobs``; results in job order, ``on_result`` called as each one finishes."""
        futures = [self.submit(job) for job in jobs]
        if on_result is not None:
            for fut in as_completed(futures):
                on_result(fut.result())
        return [fut.result() for fut in futures]

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SerialBackend(_BaseExecutor):
    """Runs each job in this process when submitted (debugging, tests, tiny runs).

    No isolation: code that calls ``os._exit`` ends this process.
    """

    def submit(self, job: BacktestJob) -> Future[BacktestResult]:
        fut: Future[BacktestResult] = Future()
        try:
            fut.set_result(run_job(job))
        except BaseException as exc:  # run_job should not raise; stay safe anyway
            fut.set_result(error_result(job, f"{type(exc).__name__}: {exc}"))
        return fut


class ProcessPoolBackend(_BaseExecutor):
    """Fork process pool: workers inherit the already-imported backtrader (cheap start).

    When a worker dies, every job in flight in that pool fails with
    ``BrokenProcessPool``; we cannot tell which job was guilty, so each of them is
    retried once in its own one-worker pool: innocent jobs succeed, the guilty
    one is reported as an error. The shared pool is recreated for later jobs.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        patch_backtrader()  # before forking, so children inherit the patch
        self._ctx = mp.get_context("fork")
        self._lock = threading.Lock()
        self._retry_slots = threading.Semaphore(1)  # isolated retries one at a time
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def _get_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise BacktestError("executor is closed")
            if self._pool is None:
                self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._ctx)
            return self._pool

    def _discard_pool(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=False)

    def submit(self, job: BacktestJob) -> Future[BacktestResult]:
        outer: Future[BacktestResult] = Future()
        try:
            pool = self._get_pool()
            try:
                inner = pool.submit(run_job, job)
            except BrokenProcessPool:  # broke between jobs: start a fresh pool once
                self._discard_pool(pool)
                pool = self._get_pool()
                inner = pool.submit(run_job, job)
        except Exception as exc:
            outer.set_result(error_result(job, f"{type(exc).__name__}: {exc}"))
            return outer
        inner.add_done_callback(lambda f: self._on_done(f, job, outer, pool))
        return outer

    def _on_done(
        self,
        inner: Future[BacktestResult],
        job: BacktestJob,
        outer: Future[BacktestResult],
        pool: ProcessPoolExecutor,
    ) -> None:
        if inner.cancelled():
            outer.set_result(error_result(job, "Cancelled: the executor was closed"))
            return
        exc = inner.exception()
        if exc is None:
            outer.set_result(inner.result())
        elif isinstance(exc, BrokenProcessPool):
            self._discard_pool(pool)
            # Not in this callback thread: it belongs to the dead pool's manager.
            threading.Thread(target=self._retry_alone, args=(job, outer), daemon=True).start()
        else:  # e.g. the job could not be pickled
            outer.set_result(error_result(job, f"{type(exc).__name__}: {exc}"))

    def _retry_alone(self, job: BacktestJob, outer: Future[BacktestResult]) -> None:
        with self._retry_slots:
            try:
                with ProcessPoolExecutor(max_workers=1, mp_context=self._ctx) as solo:
                    outer.set_result(solo.submit(run_job, job).result())
            except BrokenProcessPool:
                outer.set_result(error_result(job, WORKER_DIED))
            except Exception as exc:
                outer.set_result(error_result(job, f"{type(exc).__name__}: {exc}"))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def make_executor(kind: str = "process", workers: int | None = None) -> Executor:
    """``process`` (default, fork pool), ``serial`` (in-process) or ``ray`` (not yet)."""
    if kind == "process":
        return ProcessPoolBackend(workers)
    if kind == "serial":
        return SerialBackend()
    if kind == "ray":
        raise BacktestError(
            "--executor ray is not available yet; use --executor process (default) or serial"
        )
    raise BacktestError(f"--executor: unknown kind {kind!r}; choose one of process, serial, ray")
