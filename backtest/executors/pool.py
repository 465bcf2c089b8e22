"""The process pool backend: warm forkserver workers, each job in a sandboxed child of one.

Jobs submitted together are micro-batched (``backtest.executors.batching``) into chunks of same-code
jobs, and each job's outcome streams back as soon as its worker booked it
(``backtest.executors.stream``). A worker that dies anyway breaks its pool: the jobs it was
running are retried alone, and the pool is recreated for later jobs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import forkserver
from typing import Any

from backtest.compat import patch_backtrader
from backtest.contracts import BacktestJob
from backtest.engine import run_job, trim_bars
from backtest.errors import BacktestError
from backtest.executors.base import BaseExecutor, outcome_error
from backtest.executors.batching import Batcher, Item, share_windows
from backtest.executors.pool_frames import FrameRef, FrameStore
from backtest.executors.stream import (
    InFlight,
    ResultStream,
    pool_worker_init,
    streamed_batch_task,
)
from backtest.lifeline import die_with_parent
from backtest.sandbox import (
    DEFAULT_POLICY,
    SandboxOutcome,
    SandboxPolicy,
    for_workers,
    sandbox_task,
)

WORKER_DIED = (
    "WorkerCrashed: the worker process running this job died abruptly "
    "(os._exit, segfault or out-of-memory kill); the job was retried alone and died again"
)


WORKER_PRELOAD = [
    "backtest.lifeline",
    "backtest.compat",
    "backtest.engine",
    "backtest.sandbox",
    "strategies.validate",
]


def _raw_task(job: BacktestJob, policy: SandboxPolicy, trace: bool) -> SandboxOutcome:
    """No sandbox (``sandbox=False``): run in the worker itself, as before."""
    return SandboxOutcome(run_job(job))


@dataclass
class _Pool:
    executor: ProcessPoolExecutor
    stream: ResultStream | None


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ctrl-C is the orchestrator's to handle: the forkserver and the workers forked from it
    inherit an ignored SIGINT. Otherwise a Ctrl-C reaching the whole terminal process group
    while the server imports its preload prints a traceback per process, over the parent's
    one-line "interrupted" message."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class ProcessPoolBackend(BaseExecutor):
    """Fork process pool of warm workers; each job runs in a sandboxed child of one.

    Workers inherit the already-imported backtrader (cheap start) and warm up
    once. A job cannot kill its worker through the sandbox, but if a worker dies
    anyway every job in flight in that pool fails with ``BrokenProcessPool``; we
    cannot tell which job was guilty, so each is retried once in its own
    one-worker pool: innocent jobs succeed, the guilty one is reported as an
    error. The shared pool is recreated for later jobs.

    Jobs submitted together are micro-batched (``backtest.executors.batching``): chunks of same-code
    jobs, balanced by expected cost, each run in one sandboxed child; every job's outcome
    streams back on the pool's result pipe as soon as its worker booked it.

    ``sandbox=False`` runs jobs directly in the workers (no limits; benchmarks).
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        policy: SandboxPolicy | None = None,
        sandbox: bool = True,
        batch_window_s: float = 0.01,
        batch_max_wait_s: float = 0.25,
    ) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.policy = policy or DEFAULT_POLICY
        self._task = sandbox_task if sandbox else _raw_task
        patch_backtrader()
        # Workers come from a forkserver: a clean interpreter that imported the engine once.
        # Forking the orchestrator itself is unsafe once it runs threaded native libraries
        # (ChromaDB's Rust runtime for research memory, the LLM client's HTTP pools): such
        # children crashed. The forkserver is forked from before any of that starts.
        self._ctx = mp.get_context("forkserver")
        self._ctx.set_forkserver_preload(WORKER_PRELOAD)
        # Start it now, from the constructing (normally the main) thread: the server dies with
        # the thread that started it (parent-death signal), so never from a short-lived one.
        with _sigint_ignored():
            forkserver.ensure_running()
        self._lock = threading.Lock()
        self._retry_slots = threading.Semaphore(1)  # isolated retries one at a time
        self._pool: _Pool | None = None
        self._closed = False
        self._inflight = InFlight()
        # Each frame is written once for the workers to map (pool_frames); a chunk's jobs
        # cross the pipe as references and the worker cuts the windows.
        self._frames = FrameStore()
        # Micro-batching (backtest.executors.batching): same-code jobs submitted together share children.
        self._batcher = (
            Batcher(
                self.workers,
                self._submit_batch,
                outcome_error,
                window_s=batch_window_s,
                max_wait_s=batch_max_wait_s,
                share=False,
            )
            if sandbox and batch_window_s > 0
            else None
        )

    def _new_pool(self, workers: int, *, stream: bool = False) -> _Pool:
        results = ResultStream(self._ctx, self._inflight) if stream else None
        if self._task is sandbox_task:
            init: Callable[..., Any] = pool_worker_init
            # Batches whose jobs' processes copy their pages ahead: probe the pages now.
            pol = for_workers(self.policy, workers)
            probe = stream and pol.kernel and pol.isolate_jobs and pol.prefault
            args: tuple[Any, ...] = (results.worker_args if results else None, probe)
        else:
            init, args = die_with_parent, ()
        executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=self._ctx, initializer=init, initargs=args
        )
        return _Pool(executor, results)

    def _get_pool(self) -> _Pool:
        with self._lock:
            if self._closed:
                raise BacktestError("executor is closed")
            if self._pool is None:
                self._pool = self._new_pool(self.workers, stream=self._batcher is not None)
            return self._pool

    def _discard_pool(self, pool: _Pool) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.executor.shutdown(wait=False, cancel_futures=False)
        if pool.stream is not None:  # its reader drains what came, then stops
            pool.stream.close(timeout=0)

    def _pool_submit(self, fn: Callable[..., Any], *args: Any) -> tuple[_Pool, Future[Any]]:
        pool = self._get_pool()
        try:
            return pool, pool.executor.submit(fn, *args)
        except BrokenProcessPool:  # broke between jobs: start a fresh pool once
            self._discard_pool(pool)
            pool = self._get_pool()
            return pool, pool.executor.submit(fn, *args)

    def _submit(
        self, job: BacktestJob, trace: bool, policy: SandboxPolicy | None
    ) -> Future[SandboxOutcome]:
        outer: Future[SandboxOutcome] = Future()
        policy = for_workers(policy or self.policy, self.workers)
        if self._batcher is not None and not trace:
            self._batcher.add(job, policy, outer)  # the batcher's thread cuts the windows
            return outer
        job = trim_bars(job)  # only the window crosses the pipe
        try:
            pool, inner = self._pool_submit(self._task, job, policy, trace)
        except Exception as exc:
            outer.set_result(outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return outer
        inner.add_done_callback(lambda f: self._on_done(f, job, trace, policy, outer, pool))
        return outer

    def _submit_batch(self, items: list[Item], policy: SandboxPolicy) -> None:
        """Run a planned chunk in one task; its outcomes stream back one by one.

        The task carries the jobs with their frames as references (``pool_frames``; frames
        that cannot be published as one window each, ``share_windows``); the retries and
        errors keep the callers' jobs."""
        token = self._inflight.add(items)
        refs: list[FrameRef] = []
        try:
            jobs, refs = self._frames.pack([job for job, _ in items])
            pool, inner = self._pool_submit(streamed_batch_task, token, share_windows(jobs), policy)
        except Exception as exc:
            self._frames.release(refs)
            for k, job in self._inflight.unsettled(token):
                self._inflight.settle(token, k, outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return

        def done(f: Future[list[tuple[int, SandboxOutcome]]]) -> None:
            self._frames.release(refs)  # the task has ended: its worker read what it needed
            exc = None if f.cancelled() else f.exception()
            if f.cancelled():
                for k, job in self._inflight.unsettled(token):
                    self._inflight.settle(
                        token, k, outcome_error(job, "Cancelled: the executor was closed")
                    )
            elif exc is None:  # the rest came (or is still coming) on the stream
                for k, out in f.result():
                    self._inflight.settle(token, k, out)
            elif isinstance(exc, BrokenProcessPool):  # the worker died: the unsettled alone
                self._discard_pool(pool)
                threading.Thread(
                    target=self._retry_chunk, args=(token, pool, policy), daemon=True
                ).start()
            else:
                for k, job in self._inflight.unsettled(token):
                    self._inflight.settle(
                        token, k, outcome_error(job, f"{type(exc).__name__}: {exc}")
                    )

        inner.add_done_callback(done)

    def _retry_chunk(self, token: int, pool: _Pool, policy: SandboxPolicy) -> None:
        """After a dead worker: take in what its pool's workers already streamed, then run
        each job still unsettled alone."""
        if pool.stream is not None:
            pool.stream.close()
        for k, job in self._inflight.unsettled(token):
            self._inflight.settle(token, k, self._retry_alone(job, False, policy))

    def _on_done(
        self,
        inner: Future[SandboxOutcome],
        job: BacktestJob,
        trace: bool,
        policy: SandboxPolicy,
        outer: Future[SandboxOutcome],
        pool: _Pool,
    ) -> None:
        if inner.cancelled():
            outer.set_result(outcome_error(job, "Cancelled: the executor was closed"))
            return
        exc = inner.exception()
        if exc is None:
            outer.set_result(inner.result())
        elif isinstance(exc, BrokenProcessPool):
            self._discard_pool(pool)
            # Not in this callback thread: it belongs to the dead pool's manager.
            threading.Thread(
                target=lambda: outer.set_result(self._retry_alone(job, trace, policy)),
                daemon=True,
            ).start()
        else:  # e.g. the job could not be pickled
            outer.set_result(outcome_error(job, f"{type(exc).__name__}: {exc}"))

    def _retry_alone(self, job: BacktestJob, trace: bool, policy: SandboxPolicy) -> SandboxOutcome:
        with self._retry_slots:
            try:
                solo = self._new_pool(1)
                with solo.executor:
                    return solo.executor.submit(self._task, trim_bars(job), policy, trace).result()
            except BrokenProcessPool:
                return outcome_error(job, WORKER_DIED)
            except Exception as exc:
                return outcome_error(job, f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        """Hand over what is waiting, then shut the pool down and drain its result stream."""
        if self._batcher is not None:  # nothing submitted is left waiting: handed over first
            self._batcher.close()
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.executor.shutdown(wait=True, cancel_futures=True)
            if pool.stream is not None:  # what the workers streamed is read before we return
                pool.stream.close()
        self._frames.close()
