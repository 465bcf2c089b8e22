"""Micro-batching: same-code jobs submitted together share sandboxed children.

A sandboxed child costs a fork, its guards and the page faults of a fresh heap (~30 ms, as
much as a short backtest), so the jobs of one variant (its symbols and folds) run in the same
child: they run the same, already validated code, so nothing crosses between codes. The
``Batcher`` collects what is submitted together (a graph fan-out, a map) until submissions
pause; then, in its own thread, it estimates each job's cost (``job_cost``, scaled by the
code's measured rate), ``plan_chunks`` cuts the groups so every worker gets the same share of
the *cost* (not of the job count), and the executor's ``dispatch`` runs each chunk (the
process pool publishes each frame once and its workers cut the windows,
``backtest.executors.pool_frames``; Ray ships each frame once, ``ray_shipping``;
``share_windows`` gives a chunk one window per frame where neither applies).

Measured cost: ``job_cost`` is a static model in bar-units (bars fed, indicators). A code's
``next()`` can cost several times another's per bar, which the model cannot see, so the
batcher learns: every completed job reports its run time (``duration_s``), and
``update_rate`` keeps, per code, the measured seconds per bar-unit (the mean of its first
jobs, then a moving average). Chunks planned later (the next fan-out, the next iteration's
folds and the holdout) use ``expected_costs``: each job's bar-units times its code's rate,
or, for a code not measured yet, the median rate of those measured; before any measurement,
the static model alone. Only the ratios between jobs matter to the plan.

The caller's thread only hashes the code and appends to a list: everything proportional to
the bars happens here, off it, once per chunk instead of once per job.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import math
import re
import statistics
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import date
from typing import Any

import pandas as pd

from backtest.books import feed_frame, window_bars
from backtest.contracts import BacktestJob, Fold, JobStatus

MAX_BATCH = 16  # jobs of one code in one sandboxed child

# The cost model of a job, in bar-units (one bar of a strategy without indicators). Fitted on
# 45 real jobs (benchmarks/pool_cost_model.py, 5 families x 3 symbols x 1-6 years): the bars
# fed explain most of a job's run time (R^2 0.82-0.86 against 0 for the job count); the
# indicator count adds little (fits gave -0.01 to 0.06 per indicator; kept small, it orders
# equally long jobs), the fixed part is 5-80 bars' worth. The rest (the strategy's own next(),
# ~±30% between families) is left to the pool's dynamic pulling. Only ratios matter.
BLOCK_WEIGHT = 0.05
JOB_FIXED_BARS = 50.0
# The measured rate of a code averages its first RATE_MEMORY jobs, then moves by 1/RATE_MEMORY
# of each new one (a code's rate drifts little; a single slow job, e.g. a busy machine's,
# should not reorder the plan). Rates of at most MAX_RATES codes are kept (a long run).
RATE_MEMORY = 20
MAX_RATES = 4096
_INDICATOR = re.compile(r"\bbt\.(?:ind|indicators|talib)\.\w+\s*\(")

Item = tuple[BacktestJob, Future[Any]]
Dispatch = Callable[[list[Item], Any], None]  # (chunk, policy) -> None; resolves the futures
OnError = Callable[[BacktestJob, str], Any]  # (job, message) -> the outcome to set


def code_blocks(code: str) -> int:
    """How many indicators a strategy builds (``bt.ind.X(``, ``bt.indicators.X(``,
    ``bt.talib.X(``): each is a line computed over every bar."""
    return len(_INDICATOR.findall(code))


def job_cost(job: BacktestJob, blocks: int) -> float:
    """A job's expected run time in bar-units: its bars over every feed (a portfolio job
    reads them all), weighted by the strategy's indicators (each a line computed on every
    bar), plus the fixed cost of a job. Why not the job count: a 10-year fold costs ten
    1-year folds, a symbol listed late costs less in the early folds."""
    bars = sum(window_bars(frame, job.fold) for _, frame in job.feeds())
    return bars * (1.0 + BLOCK_WEIGHT * blocks) + JOB_FIXED_BARS


@dataclass(frozen=True)
class Rate:
    """A code's measured run time per bar-unit of ``job_cost``, over ``jobs`` completed jobs."""

    seconds_per_unit: float
    jobs: int


def update_rate(rate: Rate | None, seconds: float, cost: float) -> Rate | None:
    """``rate`` after one more completed job of ``cost`` bar-units that ran ``seconds``: the
    mean of the first ``RATE_MEMORY`` jobs, then a moving average. A job without a run time
    or cost (an error, a malformed frame) teaches nothing. Pure."""
    if not (math.isfinite(seconds) and math.isfinite(cost) and seconds > 0 and cost > 0):
        return rate
    x = seconds / cost
    if rate is None:
        return Rate(x, 1)
    n = min(rate.jobs + 1, RATE_MEMORY)
    return Rate(rate.seconds_per_unit + (x - rate.seconds_per_unit) / n, rate.jobs + 1)


def expected_costs(
    costs: Sequence[Sequence[float]], rates: Sequence[Rate | None]
) -> list[list[float]]:
    """Each group's ``job_cost`` bar-units times its code's measured rate (``rates[g]``), or,
    for a code not measured yet, the median rate of the measured ones; nothing measured: the
    bar-units as they are (the static model). Pure: ``plan_chunks`` takes the result."""
    known = [r.seconds_per_unit for r in rates if r is not None]
    if not known:
        return [list(group) for group in costs]
    default = statistics.median(known)
    return [
        [c * (default if r is None else r.seconds_per_unit) for c in group]
        for group, r in zip(costs, rates, strict=True)
    ]


def plan_chunks(
    costs: Sequence[Sequence[float]], workers: int, max_batch: int = MAX_BATCH
) -> list[tuple[int, int, int]]:
    """Cut groups of same-code jobs into sandboxed children: ``(group, start, stop)`` slices,
    in the order the pool should receive them.

    ``costs[g]`` are the expected costs of group ``g``'s jobs (``expected_costs``). The plan plays
    the pool: idle workers pull the next chunk, so the next chunk goes to the worker that
    will be idle first (the least loaded). Groups are taken costliest first and stay whole
    where they fit that worker's share of the cost (``total / workers``); otherwise the
    group is cut at the job boundary nearest the share's end and the rest goes to the next
    worker. A chunk also ends at ``max_batch`` jobs. Hence, with exact costs, every worker
    finishes within one job of the ideal (``share + the costliest job``), and the plan adds
    few children (each costs a fork, its guards and a fresh heap, ~30 ms). Counting jobs
    instead of costs left workers idle a third of the time on a 16-core machine. Pure: the
    executor applies it.
    """
    if workers < 1 or max_batch < 1:
        raise ValueError("plan_chunks: workers and max_batch must be >= 1")
    if any(c < 0 for group in costs for c in group):
        raise ValueError("plan_chunks: costs must be >= 0")
    share = float(sum(sum(group) for group in costs)) / workers
    loads = [(0.0, w) for w in range(workers)]  # a heap: (planned load, worker)
    chunks: list[tuple[int, int, int]] = []
    for g in sorted(range(len(costs)), key=lambda g: (-sum(costs[g]), g)):
        group, start = costs[g], 0
        while start < len(group):
            load, w = heapq.heappop(loads)  # the worker idle first
            stop, cost = start, 0.0
            while stop < len(group) and stop - start < max_batch:
                c = group[stop]
                # the share ends before this job's midpoint: cut here (but take one job)
                if stop > start and load + cost + c / 2 > share:
                    break
                cost += c
                stop += 1
            chunks.append((g, start, stop))
            heapq.heappush(loads, (load + cost, w))
            start = stop
    return chunks


def share_windows(jobs: list[BacktestJob]) -> list[BacktestJob]:
    """``jobs`` with one window per distinct frame: the bars every job of the chunk that
    reads the frame needs (earliest warm-up start to latest fold end), sliced once.

    Pickling a chunk then carries each symbol's window once (pickle keeps one copy of an
    object referenced by several jobs) instead of one trimmed copy per job, and the
    caller's thread slices nothing. A run's result is unchanged: ``feed_frame`` of a
    window that contains the fold's is the fold's frame. Frames that cannot be sliced
    (malformed, unsorted) travel as they are, for the run to report.
    """
    spans: dict[int, tuple[pd.DataFrame, date, date]] = {}
    for job in jobs:
        for _, frame in job.feeds():
            if not isinstance(frame, pd.DataFrame):  # a reference (pool_frames), or malformed
                continue
            lo, hi = job.fold.warmup_start, job.fold.end
            if id(frame) in spans:
                _, a, b = spans[id(frame)]
                lo, hi = min(lo, a), max(hi, b)
            spans[id(frame)] = (frame, lo, hi)
    sliced: dict[int, pd.DataFrame] = {}
    for key, (frame, lo, hi) in spans.items():
        try:
            if not frame.index.is_monotonic_increasing:
                continue
            window = feed_frame(frame, Fold(index=0, warmup_start=lo, start=lo, end=hi))
        except Exception:
            continue
        if len(window) < len(frame):
            sliced[key] = window
    if not sliced:
        return jobs

    return [job.map_bars(lambda f: sliced.get(id(f), f)) for job in jobs]


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
        share: bool = True,
    ) -> None:
        self.workers = workers
        # False: the chunks keep the callers' frames (the Ray backend ships each once).
        self._share = share
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
        # code hash -> its measured rate (update_rate), learned from completed jobs
        self._rates: OrderedDict[str, Rate] = OrderedDict()
        self._rates_lock = threading.Lock()

    def rates(self) -> dict[str, Rate]:
        """The measured rates so far, by code hash (for reports and tests)."""
        with self._rates_lock:
            return dict(self._rates)

    def _learn(self, code: str, cost: float, done: Future[Any]) -> None:
        """A job of ``code`` and ``cost`` bar-units completed: its run time updates the rate."""
        if done.cancelled() or done.exception() is not None:
            return
        result = getattr(done.result(), "result", None)
        if result is None or getattr(result, "status", None) != JobStatus.OK:
            return  # an error's duration is its share of a broken child, not its cost
        seconds = float(getattr(result, "duration_s", 0.0) or 0.0)
        with self._rates_lock:
            rate = update_rate(self._rates.get(code), seconds, cost)
            if rate is not None:
                self._rates[code] = rate
                self._rates.move_to_end(code)
                while len(self._rates) > MAX_RATES:
                    self._rates.popitem(last=False)

    def add(self, job: BacktestJob, policy: Any, outer: Future[Any]) -> None:
        """O(code length) on the caller's thread: nothing here touches the bars."""
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
            costs = []
            for (code, _), items in groups:
                blocks = code_blocks(items[0][0].code)  # one code per group
                costs.append([job_cost(job, blocks) for job, _ in items])
                for (_, outer), cost in zip(items, costs[-1], strict=True):
                    outer.add_done_callback(functools.partial(self._learn, code, cost))
            learned = self.rates()
            expected = expected_costs(costs, [learned.get(code) for (code, _), _ in groups])
            plan = plan_chunks(expected, self.workers, self._max_batch)
            for group, start, stop in plan:
                key, items = groups[group]
                chunk = items[start:stop]
                jobs = [job for job, _ in chunk]
                jobs = share_windows(jobs) if self._share else jobs
                self._dispatch(
                    [(job, outer) for job, (_, outer) in zip(jobs, chunk, strict=True)],
                    policies[key],
                )
        except Exception as exc:  # never leave a future unresolved: callers wait on them
            for _, items in groups:
                for job, outer in items:
                    if not outer.done():
                        outer.set_result(self._on_error(job, f"{type(exc).__name__}: {exc}"))
