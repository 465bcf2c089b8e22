"""Micro-batching: same-code jobs submitted together share sandboxed children.

A sandboxed child costs a fork, its guards and the page faults of a fresh heap (~30 ms, as
much as a short backtest), so the jobs of one variant (its symbols and folds) run in the same
child: they run the same, already validated code, so nothing crosses between codes. The
``Batcher`` collects what is submitted together (a graph fan-out, a map) until submissions
pause, then ``plan_chunks`` cuts the groups so every worker gets its share; the executor's
``dispatch`` runs each chunk. Used by the process pool and by Ray.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from backtest.contracts import BacktestJob

MAX_BATCH = 16  # jobs of one code in one sandboxed child

Item = tuple[BacktestJob, Future[Any]]
Dispatch = Callable[[list[Item], Any], None]  # (chunk, policy) -> None; resolves the futures
OnError = Callable[[BacktestJob, str], Any]  # (job, message) -> the outcome to set


def plan_chunks(
    sizes: list[int], workers: int, max_batch: int = MAX_BATCH
) -> list[tuple[int, int, int]]:
    """Cut groups of same-code jobs into sandboxed children: ``(group, start, stop)`` slices.

    Each child costs a fork, its guards and the page faults of a fresh heap (~30 ms), so
    groups stay whole where they can; a group is cut only where a worker's share of the
    work ends (fill to ``total / workers``, greedy over the groups) and where it exceeds
    ``max_batch``. That gives every worker the same number of jobs with at most
    ``workers - 1`` extra children. Largest slices first, so the pool's dynamic pulling
    ends with the small ones. Pure: the executor applies it.
    """
    if workers < 1 or max_batch < 1:
        raise ValueError("plan_chunks: workers and max_batch must be >= 1")
    total = sum(sizes)
    share = total / workers if total else 0.0
    chunks: list[tuple[int, int, int]] = []
    load = 0.0  # jobs given to the worker being filled
    for group, size in enumerate(sizes):
        start = 0
        while start < size:
            room = share - load
            take = size - start
            if room >= 1 and take > room:  # the share ends inside this group: cut there
                take = max(1, round(room))
            take = min(take, max_batch)
            chunks.append((group, start, start + take))
            start += take
            load += take
            while share and load >= share - 0.5:  # this worker's share is full: next one
                load -= share
    chunks.sort(key=lambda c: (-(c[2] - c[1]), c[0], c[1]))
    return chunks


class Batcher:
    """Collects jobs until submissions pause for ``window_s`` (at most ``max_wait_s`` after
    the first), then hands them to ``dispatch`` in planned chunks, from its own thread.

    A LangGraph fan-out starts its tasks over tens of milliseconds: a fixed short window
    would cut it into many small children. Every future is resolved: by ``dispatch``, or
    with ``on_error`` if dispatching fails or the batcher is closed.
    """

    def __init__(
        self,
        workers: int,
        dispatch: Dispatch,
        on_error: OnError,
        *,
        window_s: float = 0.01,
        max_wait_s: float = 0.25,
        max_batch: int = MAX_BATCH,
    ) -> None:
        self.workers = workers
        self._dispatch = dispatch
        self._on_error = on_error
        self._window = window_s
        self._max_wait = max(max_wait_s, window_s)
        self._max_batch = max_batch
        self._cond = threading.Condition()
        self._pending: dict[tuple[str, int], list[Item]] = {}
        self._policies: dict[tuple[str, int], Any] = {}
        self._first = self._last = 0.0  # monotonic times of the pending window
        self._thread: threading.Thread | None = None
        self._stopping = False

    def add(self, job: BacktestJob, policy: Any, outer: Future[Any]) -> None:
        key = (hashlib.sha256(job.code.encode()).hexdigest(), id(policy))
        with self._cond:
            if self._stopping:
                outer.set_result(self._on_error(job, "BacktestError: executor is closed"))
                return
            now = time.monotonic()
            if not self._pending:
                self._first = now
            self._last = now
            self._pending.setdefault(key, []).append((job, outer))
            self._policies[key] = policy
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="backtest-batcher", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        """Hand over whatever is pending, then stop (later ``add`` calls resolve as errors)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:  # stopping, nothing left
                    return
                while not self._stopping:
                    due = min(self._last + self._window, self._first + self._max_wait)
                    remaining = due - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                pending, self._pending = self._pending, {}
                policies, self._policies = self._policies, {}
            self._hand_over(list(pending.items()), policies)

    def _hand_over(
        self, groups: list[tuple[tuple[str, int], list[Item]]], policies: dict[tuple[str, int], Any]
    ) -> None:
        try:
            plan = plan_chunks([len(items) for _, items in groups], self.workers, self._max_batch)
            for group, start, stop in plan:
                key, items = groups[group]
                self._dispatch(items[start:stop], policies[key])
        except Exception as exc:  # never leave a future unresolved: callers wait on them
            for _, items in groups:
                for job, outer in items:
                    if not outer.done():
                        outer.set_result(self._on_error(job, f"{type(exc).__name__}: {exc}"))
