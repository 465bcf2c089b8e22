"""What every executor shares: the ``Executor`` protocol, the base class and error results.

A backend implements ``_submit(job, trace, policy) -> Future[SandboxOutcome]``; the base
class derives ``submit``, ``submit_trace``, ``map`` and the context manager from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, as_completed
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from backtest.contracts import BacktestJob, BacktestResult, JobStatus
from backtest.sandbox import SandboxOutcome, SandboxPolicy

__all__ = [
    "BaseExecutor",
    "Executor",
    "error_result",
    "outcome_error",
]

OnResult = Callable[[BacktestResult], None]


def error_result(job: BacktestJob, message: str) -> BacktestResult:
    """An ERROR result for ``job`` with ``message`` on one line, capped at 500 characters."""
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
    def submit(self, job: BacktestJob) -> Future[BacktestResult]:
        """Start ``job``; the future resolves to its result."""

    def map(
        self, jobs: Iterable[BacktestJob], on_result: OnResult | None = None
    ) -> list[BacktestResult]:
        """Every job's result, in job order; ``on_result`` is called as each one lands."""

    def close(self) -> None:
        """Stop the workers; nothing may be submitted after."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...


def outcome_error(job: BacktestJob, message: str) -> SandboxOutcome:
    """``error_result`` wrapped as a sandbox outcome."""
    return SandboxOutcome(error_result(job, message))


class BaseExecutor:
    def submit_trace(
        self, job: BacktestJob, policy: SandboxPolicy | None = None
    ) -> Future[SandboxOutcome]:
        """Run ``job`` and also return its orders and indicator lines.

        ``policy`` overrides the executor's sandbox policy for this job.
        """
        return self._submit(job, True, policy)

    def submit(self, job: BacktestJob) -> Future[BacktestResult]:
        """Start ``job``; the future resolves to its result."""
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
        """Release the workers (none by default)."""
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
