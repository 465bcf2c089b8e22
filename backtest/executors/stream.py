"""The process pool's result stream: each job's outcome leaves its worker once booked.

Worker side: ``pool_worker_init`` hands each pool worker the pool's result pipe, and
``streamed_batch_task`` runs a chunk of same-code jobs and sends each outcome on it as soon as
the sandbox booked it. Orchestrator side: ``ResultStream`` reads the pipe in a thread and
``InFlight`` settles each job's future as its outcome arrives.
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
import struct
import threading
from concurrent.futures import Future, InvalidStateError
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

from backtest.contracts import BacktestJob
from backtest.executors.base import outcome_error
from backtest.executors.batching import Item
from backtest.executors.pool_frames import open_frames
from backtest.lifeline import die_with_parent
from backtest.sandbox import (
    SandboxOutcome,
    SandboxPolicy,
    run_sandboxed_batch,
    warm_worker,
    written_pages,
)

__all__ = [
    "InFlight",
    "ResultStream",
    "pool_worker_init",
    "streamed_batch_task",
]

# ---------------------------------------------------------------------------- worker side

_stream: tuple[Connection, Any] | None = None  # this pool worker's (result pipe, its lock)
_HEADER = struct.Struct("<qq")  # a streamed message: (chunk token, job index), then the outcome


def pool_worker_init(
    stream: tuple[Connection, Any] | None = None, probe_pages: bool = False
) -> None:
    """Set up a pool worker: die with its parent, keep the result stream, warm the imports
    (and, when the pool's policy prefaults, probe the pages its jobs' processes copy)."""
    global _stream
    die_with_parent()  # a pool worker never outlives the forkserver it came from
    _stream = stream
    warm_worker()
    if probe_pages:  # at the worker's start, not at its first batch
        written_pages()


def streamed_batch_task(
    token: int, jobs: list[BacktestJob], policy: SandboxPolicy
) -> list[tuple[int, SandboxOutcome]]:
    """Entry point of pool workers for a chunk (its published frames mapped, ``pool_frames``):
    each job's outcome is sent on the pool's result pipe as soon as it is booked; returns the
    ones that could not be sent.

    The worker is the trusted parent of the job's child: the child never holds the pipe
    (its descriptors are closed and the lock's semaphore made private before any strategy
    code runs; ``backtest.sandbox.child``), so what arrives on it is the worker's booking.
    """
    warm_worker()
    jobs = open_frames(jobs)  # the published frames, mapped: the sandbox cuts each window
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


def _settle(outer: Future[Any], value: Any) -> bool:
    """Resolve ``outer`` unless it already is (a streamed result and a retry may race: both
    are the same job's outcome; the first stands)."""
    try:
        outer.set_result(value)
    except InvalidStateError:
        return False
    return True


class InFlight:
    """Chunks whose outcomes stream back: token -> their items, until every one is settled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens = itertools.count()
        self._chunks: dict[int, tuple[list[Item], set[int]]] = {}

    def add(self, items: list[Item]) -> int:
        """Track ``items`` as one chunk; returns its token."""
        token = next(self._tokens)
        with self._lock:
            self._chunks[token] = (items, set(range(len(items))))
        return token

    def settle(self, token: int, index: int, outcome: SandboxOutcome) -> None:
        """Resolve item ``index`` of chunk ``token`` with ``outcome``, once (later: no-ops)."""
        with self._lock:
            entry = self._chunks.get(token)
            if entry is None or index not in entry[1]:
                return  # unknown, or already settled (a retry won the race)
            entry[1].discard(index)
            if not entry[1]:
                del self._chunks[token]
        _settle(entry[0][index][1], outcome)

    def fail(self, token: int, index: int, message: str) -> None:
        """Settle item ``index`` of chunk ``token`` as a pool error, unless settled already."""
        with self._lock:
            entry = self._chunks.get(token)
            job = entry[0][index][0] if entry is not None and index in entry[1] else None
        if job is not None:
            self.settle(token, index, outcome_error(job, f"PoolError: {message}"))

    def unsettled(self, token: int) -> list[tuple[int, BacktestJob]]:
        """The items of chunk ``token`` not settled yet, as (index, job), in index order."""
        with self._lock:
            entry = self._chunks.get(token)
            return [] if entry is None else [(k, entry[0][k][0]) for k in sorted(entry[1])]


class ResultStream:
    """One pool's result pipe: its workers write each booked outcome (under a lock shared by
    the workers), a thread here reads them and settles the futures as they come.

    One per pool: a worker that dies mid-write leaves the lock held and the pipe with half a
    message, so a broken pool's stream is drained and dropped with it. Only workers write
    to it (they are the trusted side); a job's child never holds it.
    """

    def __init__(self, ctx: Any, inflight: InFlight) -> None:
        self._reader, self.writer = ctx.Pipe(duplex=False)
        self.lock = ctx.Lock()
        self._inflight = inflight
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="backtest-results", daemon=True)
        self._thread.start()

    @property
    def worker_args(self) -> tuple[Connection, Any]:
        """What a pool worker needs to write to the stream: the pipe's write end and its lock."""
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
