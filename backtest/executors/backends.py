"""The serial backend and ``make_executor`` (which backend a ``--executor`` name means).
What every backend promises: ``backtest.executors``."""

from __future__ import annotations

from concurrent.futures import Future

from backtest.compat import patch_backtrader
from backtest.contracts import BacktestJob
from backtest.engine import run_job
from backtest.errors import BacktestError
from backtest.executors.base import BaseExecutor, Executor, outcome_error
from backtest.executors.pool import ProcessPoolBackend
from backtest.executors.ray import RayBackend
from backtest.sandbox import (
    DEFAULT_POLICY,
    SandboxOutcome,
    SandboxPolicy,
    run_sandboxed,
    warm_worker,
)

__all__ = ["EXECUTOR_KINDS", "SerialBackend", "make_executor"]

EXECUTOR_KINDS = ("process", "serial", "ray")


class SerialBackend(BaseExecutor):
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
            fut.set_result(outcome_error(job, f"{type(exc).__name__}: {exc}"))
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
