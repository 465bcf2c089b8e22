"""Run backtest jobs isolated: forked, confined, resource-limited children of a warm worker.

Why a fork: a fresh interpreter per job costs ~1-2 s of imports, more than most
backtests. A worker (a pool process, a Ray worker, or the CLI itself) imports
backtrader/pandas once (``warm_worker``); every job then runs in a ``fork()`` of
it, which costs a few milliseconds and inherits the job's bars copy-on-write.

What the child gets before the strategy source is compiled is listed, in order, in
``backtest.sandbox_child``: a new session without a terminal, no inherited descriptors
but its pipes, private copies of the worker's semaphores, a private size-capped tmpfs,
rlimits, a scrubbed environment, a uid of its own without groups or capabilities
(as root), no_new_privs, the Python-level guards (``backtest.python_guards``) and the
kernel guards, Landlock and seccomp (``backtest.kernel_guards``;
``kernel_capabilities()`` says which this machine offers). The static lint
(``strategies.validate``) runs first, in the parent: a convenience that names the
problem early, not the boundary.

The parent side never raises: every outcome is a
``BacktestResult`` with status ok / error / timeout / rejected / integrity_error. The
parent keeps the books (``backtest.books``): a child's line is only a claim (its status and
fill log, with the nonce the parent sent it for that job, one at a time, on a pipe); the
parent checks the fills against the bars and costs, replays them and computes the
metrics. A line that is not the running job's (another job id, a wrong nonce, malformed)
is an integrity error, and the child is killed; the jobs after it run in a fresh child. It reads the child's
result pipe and its stdout/stderr through ``poll`` with bounded buffers: a result line
longer than ``policy.result_mb`` kills the child and is an error, output beyond a short
tail is discarded. The wall clock is enforced twice: the engine's SIGALRM inside the
child (a clean "timeout" result) and, ``grace_s`` later, ``SIGKILL`` to the child's
process group from the parent, per job (a batch child's clock restarts at each result
line) and for the child as a whole (the sum of its jobs' limits). Whatever stops a
batch child part-way, the jobs that finished keep their results, the running one gets
the verdict and the rest run in a fresh child. Each job's outcome is final as soon as its
line is booked (``run_sandboxed_batch``'s ``on_outcome``: the pool streams it from there),
so the temporary-file quota is checked before each line is believed, not once at the end.

This module holds the entry points (validate, then run one job or a same-code batch; the
pool's and Ray's task functions). The parts: ``backtest.sandbox_warm`` (the warm worker),
``backtest.sandbox_process`` (forking the children, the pipes, deadlines, kills, verdicts),
``backtest.sandbox_result`` (the outcome, and a result line checked and booked) and
``backtest.sandbox_child`` (the child's confinement).
"""

from __future__ import annotations

import contextlib
import time

from backtest.contracts import BacktestJob, JobStatus
from backtest.kernel_guards import kernel_capabilities, landlock_abi, seccomp_program
from backtest.sandbox_policy import DEFAULT_POLICY, SandboxPolicy
from backtest.sandbox_process import _run_in_children
from backtest.sandbox_result import OnOutcome, SandboxOutcome, error_outcome
from backtest.sandbox_warm import warm_worker
from backtest.trace import decode_line

__all__ = [
    "DEFAULT_POLICY",
    "SandboxOutcome",
    "SandboxPolicy",
    "decode_line",
    "kernel_capabilities",
    "landlock_abi",
    "run_sandboxed",
    "run_sandboxed_batch",
    "sandbox_batch_task",
    "sandbox_task",
    "seccomp_program",
    "warm_worker",
]


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
            out = _run_in_children([job], policy, trace)[0]
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
            outs = _run_in_children(list(jobs), policy, False, emit)
    except BaseException as exc:  # the parent side must never raise
        message = f"SandboxError: {type(exc).__name__}: {exc}"
        outs = [emitted.get(k) or error_outcome(j, JobStatus.ERROR, message)
                for k, j in enumerate(jobs)]  # fmt: skip
    for k, out in enumerate(outs):
        if k not in emitted:
            emit(k, out)
    return outs


def sandbox_batch_task(jobs: list[BacktestJob], policy: SandboxPolicy) -> list[SandboxOutcome]:
    """Entry point of pool workers for a batch of same-code jobs."""
    warm_worker()
    return run_sandboxed_batch(jobs, policy)
