"""Executors: run many backtest jobs, serially, on a process pool (forkserver), or on Ray.

Every backend runs each job through ``backtest.sandbox``: static validation,
then a forked, resource-limited child of a warm worker (see that module). The
pool's and Ray's workers are only ever the *parents* of job processes, so the
generated code never runs in the orchestrator or in a long-lived worker.

Futures returned by an executor never raise: a worker that dies anyway
(segfault in the sandbox itself, OOM kill of the worker) or any other failure
becomes a ``BacktestResult`` with status error, and later jobs still run.

Besides the ``Executor`` protocol (submit / map / close, context manager), the
backends here offer ``submit_trace(job) -> Future[SandboxOutcome]``: the result
plus the run's orders and indicator lines, used by ``backtest.lookahead``.

The process pool streams: a chunk of same-code jobs runs in one sandboxed child, and each
job's outcome leaves its worker as soon as the worker has booked it (``_ResultStream``),
so a job's future resolves when that job is done, not when its chunk is. Submitting is
O(1) in the bars: windows are cut and costs estimated in the batcher's thread, once per
chunk (``backtest.batching``).
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
import os
import pickle
import struct
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from backtest.batching import Batcher, Item
from backtest.compat import patch_backtrader
from backtest.contracts import BacktestJob, BacktestResult, JobStatus
from backtest.engine import run_job, trim_bars
from backtest.errors import BacktestError
from backtest.lifeline import die_with_parent
from backtest.sandbox import (
    DEFAULT_POLICY,
    SandboxOutcome,
    SandboxPolicy,
    run_sandboxed,
    run_sandboxed_batch,
    sandbox_batch_task,
    sandbox_task,
    warm_worker,
)

EXECUTOR_KINDS = ("process", "serial", "ray")
OnResult = Callable[[BacktestResult], None]

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


# ---------------------------------------------------------------------------- worker side

_stream: tuple[Connection, Any] | None = None  # this pool worker's (result pipe, its lock)
_HEADER = struct.Struct("<qq")  # a streamed message: (chunk token, job index), then the outcome


def _pool_worker_init(stream: tuple[Connection, Any] | None = None) -> None:
    global _stream
    die_with_parent()  # a pool worker never outlives the forkserver it came from
    _stream = stream
    warm_worker()


def streamed_batch_task(
    token: int, jobs: list[BacktestJob], policy: SandboxPolicy
) -> list[tuple[int, SandboxOutcome]]:
    """Entry point of pool workers for a chunk: each job's outcome is sent on the pool's
    result pipe as soon as it is booked; returns the ones that could not be sent.

    The worker is the trusted parent of the job's child: the child never holds the pipe
    (its descriptors are closed and the lock's semaphore made private before any strategy
    code runs; ``backtest.sandbox_child``), so what arrives on it is the worker's booking.
    """
    warm_worker()
    sent: set[int] = set()

    def send(index: int, out: SandboxOutcome) -> None:
        if _stream is None:
            return
        conn, lock = _stream
        data = _HEADER.pack(token, index) + ForkingPickler.dumps(out)  # outside the lock
        with lock:
            conn.send_bytes(data)
        sent.add(index)

    outs = run_sandboxed_batch(jobs, policy, on_outcome=send)
    return [(k, out) for k, out in enumerate(outs) if k not in sent]


# ---------------------------------------------------------------------------- orchestrator side


def error_result(job: BacktestJob, message: str) -> BacktestResult:
    return BacktestResult(
        job_id=job.job_id,
        variant_id=job.variant_id,
        symbol=job.symbol,
        fold=job.fold.index,
        status=JobStatus.ERROR,
        error=" ".join(message.split())[:500],
    )


def _chain(inner: Future[Any], convert: Callable[[Any], Any]) -> Future[Any]:
    """A future of ``convert(inner.result())``; ``inner`` never raises here."""
    outer: Future[Any] = Future()

    def done(f: Future[Any]) -> None:
        outer.set_result(convert(f.result()))

    inner.add_done_callback(done)
    return outer


@runtime_checkable
class Executor(Protocol):
    def submit(self, job: BacktestJob) -> Future[BacktestResult]: ...

    def map(
        self, jobs: Iterable[BacktestJob], on_result: OnResult | None = None
    ) -> list[BacktestResult]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


def _outcome_error(job: BacktestJob, message: str) -> SandboxOutcome:
    return SandboxOutcome(error_result(job, message))


def _raw_task(job: BacktestJob, policy: SandboxPolicy, trace: bool) -> SandboxOutcome:
    """No sandbox (``sandbox=False``): run in the worker itself, as before."""
    return SandboxOutcome(run_job(job))


def _settle(outer: Future[Any], value: Any) -> bool:
    """Resolve ``outer`` unless it already is (a streamed result and a retry may race: both
    are the same job's outcome; the first stands)."""
    try:
        outer.set_result(value)
    except InvalidStateError:
        return False
    return True


class _InFlight:
    """Chunks whose outcomes stream back: token -> their items, until every one is settled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._chunks: dict[int, tuple[list[Item], set[int]]] = {}

    def add(self, items: list[Item]) -> int:
        token = next(self._tokens)
        with self._lock:
            self._chunks[token] = (items, set(range(len(items))))
        return token

    def settle(self, token: int, index: int, outcome: SandboxOutcome) -> None:
        with self._lock:
            entry = self._chunks.get(token)
            if entry is None or index not in entry[1]:
                return  # unknown, or already settled (a retry won the race)
            entry[1].discard(index)
            if not entry[1]:
                del self._chunks[token]
        _settle(entry[0][index][1], outcome)

    def fail(self, token: int, index: int, message: str) -> None:
        with self._lock:
            entry = self._chunks.get(token)
            job = entry[0][index][0] if entry is not None and index in entry[1] else None
        if job is not None:
            self.settle(token, index, _outcome_error(job, f"PoolError: {message}"))

    def unsettled(self, token: int) -> list[tuple[int, BacktestJob]]:
        with self._lock:
            entry = self._chunks.get(token)
            return [] if entry is None else [(k, entry[0][k][0]) for k in sorted(entry[1])]


class _ResultStream:
    """One pool's result pipe: its workers write each booked outcome (under a lock shared by
    the workers), a thread here reads them and settles the futures as they come.

    One per pool: a worker that dies mid-write leaves the lock held and the pipe with half a
    message, so a broken pool's stream is drained and dropped with it. Only workers write
    to it (they are the trusted side); a job's child never holds it.
    """

    def __init__(self, ctx: Any, inflight: _InFlight) -> None:
        self._reader, self.writer = ctx.Pipe(duplex=False)
        self.lock = ctx.Lock()
        self._inflight = inflight
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="backtest-results", daemon=True)
        self._thread.start()

    @property
    def worker_args(self) -> tuple[Connection, Any]:
        return self.writer, self.lock

    def _read(self) -> None:
        try:
            while True:
                if self._reader.poll(0.1):
                    data = self._reader.recv_bytes()
                elif self._stop.is_set():  # drained: nothing more can come
                    return
                else:
                    continue
                token, index = _HEADER.unpack_from(data)
                try:
                    outcome = pickle.loads(memoryview(data)[_HEADER.size :])
                except Exception as exc:  # never stop reading: the workers would block
                    self._inflight.fail(token, index, f"unreadable result: {exc!r}")
                    continue
                self._inflight.settle(token, index, outcome)
        except (EOFError, OSError):  # every writer is gone
            return
        finally:
            self._reader.close()

    def close(self, timeout: float = 5.0) -> None:
        """After the pool's workers stopped writing: read what is left, then stop."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self.writer.close()  # a dead worker's half message then ends in EOF
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


@dataclass
class _Pool:
    executor: ProcessPoolExecutor
    stream: _ResultStream | None


class _BaseExecutor:
    def submit_trace(
        self, job: BacktestJob, policy: SandboxPolicy | None = None
    ) -> Future[SandboxOutcome]:
        """Run ``job`` and also return its orders and indicator lines.

        ``policy`` overrides the executor's sandbox policy for this job.
        """
        return self._submit(job, True, policy)

    def submit(self, job: BacktestJob) -> Future[BacktestResult]:
        return _chain(self._submit(job, False, None), lambda o: o.result)

    def _submit(
        self, job: BacktestJob, trace: bool, policy: SandboxPolicy | None
    ) -> Future[SandboxOutcome]:
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
    """Runs each job when submitted, in a sandboxed child of this process.

    For the CLI, tests and tiny runs. ``sandbox=False`` runs the code in this very
    process (debugging only: ``os._exit`` in the code then ends this process).
    Forking from a process with other busy threads is safe for the job (the
    child only runs the backtest) but prefer the process pool there.
    """

    def __init__(self, *, policy: SandboxPolicy | None = None, sandbox: bool = True) -> None:
        self.policy = policy or DEFAULT_POLICY
        self.sandbox = sandbox
        patch_backtrader()

    def _submit(
        self, job: BacktestJob, trace: bool, policy: SandboxPolicy | None
    ) -> Future[SandboxOutcome]:
        fut: Future[SandboxOutcome] = Future()
        try:
            if self.sandbox:
                warm_worker()
                fut.set_result(run_sandboxed(job, policy or self.policy, trace=trace))
            else:
                fut.set_result(SandboxOutcome(run_job(job)))
        except BaseException as exc:  # neither should raise; stay safe anyway
            fut.set_result(_outcome_error(job, f"{type(exc).__name__}: {exc}"))
        return fut


class ProcessPoolBackend(_BaseExecutor):
    """Fork process pool of warm workers; each job runs in a sandboxed child of one.

    Workers inherit the already-imported backtrader (cheap start) and warm up
    once. A job cannot kill its worker through the sandbox, but if a worker dies
    anyway every job in flight in that pool fails with ``BrokenProcessPool``; we
    cannot tell which job was guilty, so each is retried once in its own
    one-worker pool: innocent jobs succeed, the guilty one is reported as an
    error. The shared pool is recreated for later jobs.

    Jobs submitted together are micro-batched (``backtest.batching``): chunks of same-code
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
        forkserver.ensure_running()
        self._lock = threading.Lock()
        self._retry_slots = threading.Semaphore(1)  # isolated retries one at a time
        self._pool: _Pool | None = None
        self._closed = False
        self._inflight = _InFlight()
        # Micro-batching (backtest.batching): same-code jobs submitted together share children.
        self._batcher = (
            Batcher(
                self.workers,
                self._submit_batch,
                _outcome_error,
                window_s=batch_window_s,
                max_wait_s=batch_max_wait_s,
            )  # fmt: skip
            if sandbox and batch_window_s > 0
            else None
        )

    def _new_pool(self, workers: int, *, stream: bool = False) -> _Pool:
        results = _ResultStream(self._ctx, self._inflight) if stream else None
        if self._task is sandbox_task:
            init: Callable[..., Any] = _pool_worker_init
            args: tuple[Any, ...] = (results.worker_args if results else None,)
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
        policy = policy or self.policy
        if self._batcher is not None and not trace:
            self._batcher.add(job, policy, outer)  # the batcher's thread cuts the windows
            return outer
        job = trim_bars(job)  # only the window crosses the pipe
        try:
            pool, inner = self._pool_submit(self._task, job, policy, trace)
        except Exception as exc:
            outer.set_result(_outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return outer
        inner.add_done_callback(lambda f: self._on_done(f, job, trace, policy, outer, pool))
        return outer

    def _submit_batch(self, items: list[Item], policy: SandboxPolicy) -> None:
        """Run a planned chunk in one task; its outcomes stream back one by one."""
        token = self._inflight.add(items)
        try:
            pool, inner = self._pool_submit(
                streamed_batch_task, token, [job for job, _ in items], policy
            )
        except Exception as exc:
            for k, job in self._inflight.unsettled(token):
                self._inflight.settle(token, k, _outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return

        def done(f: Future[list[tuple[int, SandboxOutcome]]]) -> None:
            exc = None if f.cancelled() else f.exception()
            if f.cancelled():
                for k, job in self._inflight.unsettled(token):
                    self._inflight.settle(
                        token, k, _outcome_error(job, "Cancelled: the executor was closed")
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
                        token, k, _outcome_error(job, f"{type(exc).__name__}: {exc}")
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
            outer.set_result(_outcome_error(job, "Cancelled: the executor was closed"))
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
            outer.set_result(_outcome_error(job, f"{type(exc).__name__}: {exc}"))

    def _retry_alone(self, job: BacktestJob, trace: bool, policy: SandboxPolicy) -> SandboxOutcome:
        with self._retry_slots:
            try:
                solo = self._new_pool(1)
                with solo.executor:
                    return solo.executor.submit(self._task, trim_bars(job), policy, trace).result()
            except BrokenProcessPool:
                return _outcome_error(job, WORKER_DIED)
            except Exception as exc:
                return _outcome_error(job, f"{type(exc).__name__}: {exc}")

    def close(self) -> None:
        if self._batcher is not None:  # nothing submitted is left waiting: handed over first
            self._batcher.close()
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.executor.shutdown(wait=True, cancel_futures=True)
            if pool.stream is not None:  # what the workers streamed is read before we return
                pool.stream.close()


class RayBackend(_BaseExecutor):
    """Ray tasks running the same sandboxed functions as the process pool, micro-batched the
    same way (a task per planned chunk of same-code jobs, cut for the cluster's CPUs).

    ``address=None`` starts a local Ray instance with ``workers`` CPUs (no
    dashboard; ~5-7 s to start); an address (``auto``, ``ray://host:10001`` or
    ``host:6379``) connects to an existing cluster, whose nodes need this project
    and its dependencies installed. Ray is shut down on ``close`` only if this
    backend started it.
    """

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        *,
        policy: SandboxPolicy | None = None,
    ) -> None:
        try:
            import ray
        except ImportError as exc:
            raise BacktestError(
                "--executor ray needs the ray package: pip install 'swarm-strategy-lab[ray]'"
            ) from exc
        self._ray = ray
        self.policy = policy or DEFAULT_POLICY
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._owns = not ray.is_initialized()
        if self._owns:
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = self.workers
            try:
                ray.init(**kwargs)
            except Exception as exc:
                where = f"--ray-address {address}" if address else "a local Ray instance"
                raise BacktestError(
                    f"--executor ray: could not start/connect to {where}: "
                    f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                ) from exc
        with contextlib.suppress(Exception):  # a cluster: plan chunks for all its CPUs
            self.workers = max(1, int(ray.cluster_resources().get("CPU", self.workers)))
        self._remote = ray.remote(num_cpus=1, max_retries=1)(sandbox_task)
        self._remote_batch = ray.remote(num_cpus=1, max_retries=1)(sandbox_batch_task)
        self._batcher = Batcher(self.workers, self._submit_batch, _outcome_error)
        self._closed = False

    def _submit(
        self, job: BacktestJob, trace: bool, policy: SandboxPolicy | None
    ) -> Future[SandboxOutcome]:
        outer: Future[SandboxOutcome] = Future()
        if self._closed:
            outer.set_result(_outcome_error(job, "BacktestError: executor is closed"))
            return outer
        policy = policy or self.policy
        if not trace:
            self._batcher.add(job, policy, outer)  # the batcher's thread cuts the windows
            return outer
        job = trim_bars(job)
        try:
            inner = self._remote.remote(job, policy, trace).future()
        except Exception as exc:
            outer.set_result(_outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return outer
        inner.add_done_callback(lambda f: self._resolve([(job, outer)], f, single=True))
        return outer

    def _submit_batch(
        self, items: list[tuple[BacktestJob, Future[SandboxOutcome]]], policy: SandboxPolicy
    ) -> None:
        try:
            inner = self._remote_batch.remote([job for job, _ in items], policy).future()
        except Exception as exc:
            for job, outer in items:
                outer.set_result(_outcome_error(job, f"{type(exc).__name__}: {exc}"))
            return
        inner.add_done_callback(lambda f: self._resolve(items, f, single=False))

    @staticmethod
    def _resolve(
        items: list[tuple[BacktestJob, Future[SandboxOutcome]]], f: Future[Any], *, single: bool
    ) -> None:
        try:
            got = f.result()
            outs = [got] if single else list(got)
        except BaseException as exc:  # RayTaskError, WorkerCrashedError, cancellation
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            for job, outer in items:
                outer.set_result(_outcome_error(job, f"RayError: {type(exc).__name__}: {first}"))
            return
        for (_, outer), out in zip(items, outs, strict=True):
            outer.set_result(out)

    def close(self) -> None:
        if self._closed:
            return
        self._batcher.close()  # pending jobs are handed to Ray before it may shut down
        self._closed = True
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(
    kind: str = "process",
    workers: int | None = None,
    address: str | None = None,
    *,
    policy: SandboxPolicy | None = None,
) -> Executor:
    """``process`` (default, fork pool), ``serial`` (one job at a time) or ``ray``.

    ``address`` only applies to ``ray`` (None: start Ray locally).
    """
    if kind == "process":
        return ProcessPoolBackend(workers, policy=policy)
    if kind == "serial":
        return SerialBackend(policy=policy)
    if kind == "ray":
        return RayBackend(address=address, workers=workers, policy=policy)
    raise BacktestError(f"--executor: unknown kind {kind!r}; choose one of process, serial, ray")
