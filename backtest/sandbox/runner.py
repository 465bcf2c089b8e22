"""The sandbox's entry points: validate, then run one job or a same-code batch in confined
children of a warm worker (``run_sandboxed``, ``run_sandboxed_batch``), and the pool's and
Ray's task functions. Why and how the children are confined: ``backtest.sandbox``."""

from __future__ import annotations

import contextlib
import time

from backtest.contracts import BacktestJob, JobStatus
from backtest.sandbox.policy import DEFAULT_POLICY, SandboxPolicy
from backtest.sandbox.process import run_in_children
from backtest.sandbox.result import OnOutcome, SandboxOutcome, error_outcome
from backtest.sandbox.warm import warm_worker

__all__ = ["run_sandboxed", "run_sandboxed_batch", "sandbox_batch_task", "sandbox_task"]


def _rejection(code: str, policy: SandboxPolicy) -> str | None:
    """The static lint's verdict (a convenience before forking, not the boundary)."""
    if not policy.validate:
        return None
    from strategies.validate import validate_code

    report = validate_code(code, require_params=policy.require_params)
    return None if report.ok else "Rejected by validation: " + "; ".join(report.errors)


def run_sandboxed(
    job: BacktestJob, policy: SandboxPolicy = DEFAULT_POLICY, *, trace: bool = False
) -> SandboxOutcome:
    """Validate, then run ``job`` in a confined child of this process. Never raises.

    With ``trace`` the outcome also carries the run's orders, fills and every
    indicator line (see ``backtest.lookahead``).
    """
    started = time.perf_counter()
    try:
        rejected = _rejection(job.code, policy)
        if rejected:
            out = error_outcome(job, JobStatus.REJECTED, rejected)
        else:
            out = run_in_children([job], policy, trace)[0]
    except BaseException as exc:  # the parent side must never raise
        out = error_outcome(job, JobStatus.ERROR, f"SandboxError: {type(exc).__name__}: {exc}")
    out.result.duration_s = round(time.perf_counter() - started, 4)
    return out


def sandbox_task(job: BacktestJob, policy: SandboxPolicy, trace: bool) -> SandboxOutcome:
    """Entry point of pool and Ray workers."""
    warm_worker()
    return run_sandboxed(job, policy, trace=trace)


def run_sandboxed_batch(
    jobs: list[BacktestJob],
    policy: SandboxPolicy = DEFAULT_POLICY,
    *,
    on_outcome: OnOutcome | None = None,
) -> list[SandboxOutcome]:
    """Run jobs that share one code in ONE confined child, one after another. Never raises.

    Why: the fork, the guards and the copy-on-write faults cost ~35 ms per child, as much
    as a short backtest; a variant's folds and symbols can share a child because they run
    the same (already validated) code, so nothing crosses between different codes. If the
    child dies, hangs or floods part-way, the jobs that finished keep their results, the
    one that was running gets the verdict, and the rest run in a fresh child.

    ``on_outcome(index, outcome)`` is called as soon as each job's outcome is final (its
    line checked and booked, or its verdict), in job order, so a pool can stream results
    instead of waiting for the whole batch; an exception it raises is ignored (the returned
    list still has every outcome).
    """
    last = time.perf_counter()
    emitted: dict[int, SandboxOutcome] = {}

    def emit(index: int, out: SandboxOutcome) -> None:
        nonlocal last
        now = time.perf_counter()
        if not out.result.duration_s:  # no run time of its own (an error): its wall share
            out.result.duration_s = round(now - last, 4)
        last = now
        emitted[index] = out
        if on_outcome is not None:
            with contextlib.suppress(Exception):
                on_outcome(index, out)

    if len(jobs) <= 1:
        outs = [run_sandboxed(j, policy) for j in jobs]
        for k, out in enumerate(outs):
            emit(k, out)
        return outs
    if len({j.code for j in jobs}) != 1:
        raise ValueError("run_sandboxed_batch: every job in a batch must have the same code")
    try:
        rejected = _rejection(jobs[0].code, policy)
        if rejected:
            outs = [error_outcome(j, JobStatus.REJECTED, rejected) for j in jobs]
        else:
            outs = run_in_children(list(jobs), policy, False, emit)
    except BaseException as exc:  # the parent side must never raise
        message = f"SandboxError: {type(exc).__name__}: {exc}"
        outs = [
            emitted.get(k) or error_outcome(j, JobStatus.ERROR, message) for k, j in enumerate(jobs)
        ]
    for k, out in enumerate(outs):
        if k not in emitted:
            emit(k, out)
    return outs


def sandbox_batch_task(jobs: list[BacktestJob], policy: SandboxPolicy) -> list[SandboxOutcome]:
    """Entry point of pool workers for a batch of same-code jobs."""
    warm_worker()
    return run_sandboxed_batch(jobs, policy)
