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
job's outcome leaves its worker as soon as the worker has booked it (``_ResultStream``), so
a job's future resolves when that job is done, not when its chunk is. Submitting is O(1) in
the bars: windows are cut and costs estimated in the batcher's thread, once per chunk
(``backtest.batching``).

This module holds the serial backend and ``make_executor``; the protocol and base class are
in ``backtest.executor_base``, the process pool in ``backtest.executor_pool`` (its result
stream in ``backtest.executor_stream``) and Ray in ``backtest.executor_ray``.
"""

from __future__ import annotations

from concurrent.futures import Future

from backtest.compat import patch_backtrader
from backtest.contracts import BacktestJob
from backtest.engine import run_job
from backtest.errors import BacktestError
from backtest.executor_base import Executor, _BaseExecutor, _outcome_error, error_result
from backtest.executor_pool import ProcessPoolBackend
from backtest.executor_ray import RayBackend
from backtest.sandbox import (
    DEFAULT_POLICY,
    SandboxOutcome,
    SandboxPolicy,
    run_sandboxed,
    warm_worker,
)

__all__ = [
    "EXECUTOR_KINDS",
    "Executor",
    "ProcessPoolBackend",
    "RayBackend",
    "SerialBackend",
    "error_result",
    "make_executor",
]

EXECUTOR_KINDS = ("process", "serial", "ray")


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
