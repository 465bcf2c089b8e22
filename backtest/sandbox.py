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

This module is the parent side, which never raises: every outcome is a
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
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import resource
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backtest.books import FillLog, IntegrityError, account
from backtest.contracts import BacktestJob, BacktestResult, JobStatus
from backtest.kernel_guards import (
    kernel_capabilities,
    landlock_abi,
    libc,
    sandbox_uid,
    seccomp_program,
)
from backtest.python_guards import read_roots
from backtest.sandbox_child import run_child
from backtest.sandbox_policy import DEFAULT_POLICY, SandboxPolicy
from backtest.trace import decode_line, fill_rows

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

OUTPUT_TAIL_BYTES = 4096  # of the child's stdout/stderr, kept for crash messages


@dataclass
class SandboxOutcome:
    """What a sandboxed call returns: the result and, when asked for, the run's trace."""

    result: BacktestResult
    trace: dict[str, Any] | None = None


OnOutcome = Callable[[int, SandboxOutcome], None]  # (index of the job in its batch, outcome)


# ---------------------------------------------------------------------------- worker side


_warm = False


def warm_worker() -> None:
    """Import everything a job needs once, then freeze the heap for cheap forks.

    ``gc.freeze`` moves the imported objects out of the collector's reach, so the
    child's garbage collections don't touch (and copy) the parent's pages.
    """
    global _warm
    if _warm:
        return
    import backtest.engine  # noqa: F401  (backtrader, pandas, metrics)
    import backtest.trace  # noqa: F401
    import strategies.validate  # noqa: F401

    libc()
    read_roots()  # cached: the child may no longer read the folders it lists
    _warm_up_run()
    gc.collect()
    gc.freeze()
    _warm = True


_WARMUP_CODE = """
import backtrader as bt


class Warm(bt.Strategy):
    params = dict(n=5)

    def __init__(self):
        self.sma = bt.ind.SMA(self.data.close, period=self.p.n)

    def next(self):
        if not self.position and self.data.close[0] > self.sma[0]:
            self.buy()
        elif self.position and self.data.close[0] < self.sma[0]:
            self.close()
"""


def _warm_up_run() -> None:
    """One tiny in-process backtest of our own code: backtrader's and pandas' lazy
    initialisation then happens once here instead of in every forked child."""
    import numpy as np
    import pandas as pd

    from backtest.engine import run_code_on_bars

    idx = pd.bdate_range("2020-01-01", periods=60)
    close = 100 + np.cumsum(np.sin(np.arange(60) / 3.0))
    bars = pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1e6},
        index=idx,
    )
    run_code_on_bars(_WARMUP_CODE, bars, timeout_s=0)


def error_outcome(job: BacktestJob, status: JobStatus, message: str) -> SandboxOutcome:
    return SandboxOutcome(
        BacktestResult(
            job_id=job.job_id,
            variant_id=job.variant_id,
            symbol=job.symbol,
            fold=job.fold.index,
            status=status,
            error=" ".join(str(message).split())[:500],
        )
    )


def _rejection(code: str, policy: SandboxPolicy) -> str | None:
    """The static lint's verdict (a convenience before forking, not the boundary)."""
    if not policy.validate:
        return None
    from strategies.validate import validate_code

    report = validate_code(code)
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


# ---------------------------------------------------------------------------- parent side


@dataclass
class _Child:
    """What one child left: an outcome per complete result line, and why it stopped."""

    cpu_s: int
    tmpdir: str = ""
    outcomes: list[SandboxOutcome] = field(default_factory=list)
    status: int | None = None  # wait status
    # "timeout" | "too_large" | "temp_full" | "integrity" (a line not the job's: the job's
    # outcome is already in ``outcomes``) | "" (it exited by itself)
    stopped: str = ""
    output: bytes = b""  # the tail of its stdout/stderr
    temp_bytes: int = 0


def _run_in_children(
    jobs: list[BacktestJob],
    policy: SandboxPolicy,
    trace: bool,
    emit: OnOutcome | None = None,
) -> list[SandboxOutcome]:
    """Every job's outcome, in order: a fresh child for whatever a stopped child left.
    ``emit(index, outcome)`` as soon as each is final."""
    outs: list[SandboxOutcome] = []
    rest = jobs
    while rest:
        offset = len(outs)

        def booked(k: int, out: SandboxOutcome, offset: int = offset) -> None:
            if emit is not None:
                emit(offset + k, out)

        child = _spawn(rest, policy, trace, booked)
        done = len(child.outcomes)
        outs += child.outcomes
        if done >= len(rest):
            break
        if child.stopped != "integrity":
            outs.append(_verdict(rest[done], child, policy))
            booked(done, outs[-1])
            done += 1
        rest = rest[done:]
    return outs


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _timeout_of(job: BacktestJob) -> float:
    return float(job.timeout_s) if job.timeout_s and job.timeout_s > 0 else 3600.0


def _spawn(
    jobs: list[BacktestJob], policy: SandboxPolicy, trace: bool, booked: OnOutcome
) -> _Child:
    """Fork one confined child for ``jobs`` and collect what it writes; ``booked(k, outcome)``
    for each job whose line was checked and booked."""
    timeouts = [_timeout_of(j) for j in jobs]
    as_limit = _vm_bytes() + policy.memory_mb * (1 << 20)
    tmpdir = tempfile.mkdtemp(prefix="bt-job-")
    child = _Child(cpu_s=policy.cpu_s or math.ceil(sum(timeouts)) + 1, tmpdir=tmpdir)
    fds: list[int] = []
    try:
        result_r, result_w = os.pipe()
        fds += [result_r, result_w]
        output_r, output_w = os.pipe()
        fds += [output_r, output_w]
        nonce_r, nonce_w = os.pipe()
        fds += [nonce_r, nonce_w]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never returns
            os.close(result_r)
            os.close(output_r)
            os.close(nonce_w)
            pipes = (result_w, output_w, nonce_r)
            run_child(jobs, policy, trace, tmpdir, pipes, child.cpu_s, as_limit)
        for fd in (result_w, output_w, nonce_r):
            os.close(fd)
            fds.remove(fd)
        _collect(child, pid, result_r, output_r, nonce_w, jobs, timeouts, policy, trace, booked)
        # Without a private tmpfs (not root) the files are in the shared directory: measured
        # at each result line (``_collect``) and here, for a child that stopped part-way.
        if not child.stopped and len(child.outcomes) < len(jobs) and _temp_full(child, policy):
            child.stopped = "temp_full"
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(tmpdir, ignore_errors=True)
    return child


def _collect(
    child: _Child,
    pid: int,
    result_r: int,
    output_r: int,
    nonce_w: int,
    jobs: list[BacktestJob],
    timeouts: list[float],
    policy: SandboxPolicy,
    trace: bool,
    booked: OnOutcome,
) -> None:
    """Send each job's nonce when it is due, read result lines (each checked and booked as
    soon as it is complete, then handed to ``booked``) and output, bounded; reap.

    The parent never holds more than one result line (``policy.result_mb``) and a tail
    of output. Deadlines: each job's limit + grace from the previous line, and the sum
    of all for the child; at either, on a too-long line or on a line that is not the
    running job's, the group is killed.
    """
    nonces = [secrets.token_hex(16) for _ in jobs]  # 32 hex digits: NONCE_BYTES with "\n"
    _send(nonce_w, nonces[0])
    cap = policy.result_mb << 20
    start = time.monotonic()
    end_all = start + sum(timeouts) + policy.grace_s
    end_job = start + timeouts[0] + policy.grace_s
    buf, tail = bytearray(), bytearray()
    poller = select.poll()
    open_fds = {result_r, output_r}
    for fd in open_fds:
        poller.register(fd, select.POLLIN)
    while result_r in open_fds and len(child.outcomes) < len(jobs) and not child.stopped:
        remaining = min(end_job, end_all) - time.monotonic()
        if remaining <= 0:
            child.stopped = "timeout"
            break
        for fd, _ in poller.poll(math.ceil(remaining * 1000)):
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
            elif fd == output_r:
                tail += chunk
                del tail[:-OUTPUT_TAIL_BYTES]
            else:
                buf += chunk
                while (nl := buf.find(b"\n")) >= 0 and len(child.outcomes) < len(jobs):
                    line = bytes(buf[:nl])
                    del buf[: nl + 1]
                    k = len(child.outcomes)
                    if _temp_full(child, policy):  # before its result is believed
                        child.stopped = "temp_full"
                        break
                    outcome, foreign = _parse(jobs[k], line, trace, nonces[k])
                    child.outcomes.append(outcome)
                    if foreign:
                        booked(k, outcome)
                        child.stopped = "integrity"
                        break
                    if k + 1 < len(jobs):
                        _send(nonce_w, nonces[k + 1])
                        end_job = time.monotonic() + timeouts[k + 1] + policy.grace_s
                    booked(k, outcome)  # after the next nonce: the child runs meanwhile
                if child.stopped:
                    break
                if len(buf) > cap:
                    child.stopped = "too_large"
                    break
    del buf
    deadline = min(end_job, end_all)
    while not child.stopped and len(child.outcomes) < len(jobs):  # EOF: it is exiting
        # WNOWAIT: the exited child stays a zombie, so its pid (and uid) cannot be reused
        # before its group and uid are cleared below.
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            break
        if time.monotonic() >= deadline:
            child.stopped = "timeout"
            break
        time.sleep(0.0005)
    _kill_group(pid)  # stragglers, or the child itself when stopped or done
    if not policy.kernel:  # fork was possible: a grandchild may have left the group
        with contextlib.suppress(OSError):
            _kill_uid(sandbox_uid(pid))
    with contextlib.suppress(ChildProcessError):
        child.status = os.waitpid(pid, 0)[1]
    if output_r in open_fds:  # what it said just before it ended (bounded)
        os.set_blocking(output_r, False)
        with contextlib.suppress(OSError):
            for _ in range(16):
                chunk = os.read(output_r, 1 << 16)
                if not chunk:
                    break
                tail += chunk
                del tail[:-OUTPUT_TAIL_BYTES]
    child.output = bytes(tail)


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of a child's own uid (as root): ``kill(-1)`` from that uid."""
    if os.geteuid() != 0:
        return
    pid = os.fork()
    if pid == 0:  # only syscalls here: safe in a fork of a threaded process
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # every process of this uid but this one
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _temp_full(child: _Child, policy: SandboxPolicy) -> bool:
    """Whether the child's temporary files exceed ``policy.temp_mb`` as the parent sees them
    (with a private tmpfs, as root, the parent sees an empty directory: the cap is the
    tmpfs's own)."""
    child.temp_bytes = _dir_bytes(child.tmpdir, limit=policy.temp_mb << 20)
    return child.temp_bytes > policy.temp_mb << 20


def _dir_bytes(path: str, *, limit: int) -> int:
    """Bytes of the files under ``path`` (stops counting past ``limit``); no links followed."""
    total, stack = 0, [path]
    while stack and total <= limit:
        with contextlib.suppress(OSError), os.scandir(stack.pop()) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


def _send(fd: int, nonce: str) -> None:
    """A job's nonce to the child (33 bytes: never blocks on an empty pipe)."""
    with contextlib.suppress(OSError):  # a child that is gone reads nothing
        os.write(fd, nonce.encode("ascii") + b"\n")


def _parse(job: BacktestJob, line: bytes, trace: bool, nonce: str) -> tuple[SandboxOutcome, bool]:
    """One result line of ``job``, booked: (its outcome, whether the line was foreign).

    A foreign line (malformed, another job's, a wrong nonce) is an integrity error and stops
    the child. A well-formed line of this job is a claim: an error or timeout is taken as
    it is (it can only hurt the job), a fill log goes to the books.
    """
    try:
        payload = json.loads(line)
        if not isinstance(payload, dict):
            raise IntegrityError("a result line that is not a JSON object")
        if set(payload) == {"error"}:  # the child's confinement failed before any job ran
            return error_outcome(job, JobStatus.ERROR, str(payload["error"])), False
        if payload.get("job_id") != job.job_id or payload.get("nonce") != nonce:
            raise IntegrityError(
                "a result line that is not this job's (its job id or nonce differs from the "
                "one sent for this job)"
            )
        status = payload.get("status")
        if status in (JobStatus.ERROR, JobStatus.TIMEOUT):
            return error_outcome(job, JobStatus(status), str(payload.get("error"))), False
        if status != JobStatus.OK:
            raise IntegrityError(f"a result line with status {str(status)[:40]!r}")
        log = FillLog.from_json(payload.get("log"))
        claimed_trace = payload.get("trace") if trace else None
    except (ValueError, IntegrityError) as exc:
        why = exc if isinstance(exc, IntegrityError) else f"a malformed result line ({exc})"
        return error_outcome(job, JobStatus.INTEGRITY_ERROR, f"IntegrityError: {why}"), True
    duration = payload.get("duration_s")
    books = account(job, log, duration_s=duration if isinstance(duration, float) else 0.0)
    out = SandboxOutcome(books.result)
    if trace and books.result.status == JobStatus.OK and isinstance(claimed_trace, dict):
        orders, lines = claimed_trace.get("orders"), claimed_trace.get("lines")
        if isinstance(orders, list) and isinstance(lines, dict):
            rows = fill_rows(books.fills, symbols=len(job.feeds()) > 1)
            out.trace = {"orders": orders, "lines": lines, "fills": rows,
                         "n_bars": len(books.values)}  # fmt: skip
    return out, False


def _verdict(job: BacktestJob, child: _Child, policy: SandboxPolicy) -> SandboxOutcome:
    """The outcome of the job a child was running when it stopped without its result."""
    if child.stopped == "timeout":
        return error_outcome(
            job,
            JobStatus.TIMEOUT,
            f"Timeout: wall-clock limit of {_timeout_of(job):g} s exceeded; "
            "the job's process group was killed",
        )
    if child.stopped == "too_large":
        return error_outcome(
            job,
            JobStatus.ERROR,
            f"SandboxError: the job's result exceeded {policy.result_mb} MB; "
            "its process group was killed",
        )
    if child.stopped == "temp_full":
        return error_outcome(
            job,
            JobStatus.ERROR,
            f"SandboxError: the job's temporary files exceeded {policy.temp_mb} MB",
        )
    status = child.status
    said = " ".join(child.output.decode("utf-8", "replace").split())[-200:]
    said = f"; last output: {said}" if said else ""
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            return error_outcome(
                job, JobStatus.TIMEOUT, f"Timeout: CPU-time limit of {child.cpu_s} s exceeded"
            )
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return error_outcome(
            job,
            JobStatus.ERROR,
            f"SandboxCrash: the job's process died with signal {name} "
            f"(segfault, out-of-memory kill or an external kill){said}",
        )
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else "?"
    return error_outcome(
        job,
        JobStatus.ERROR,
        f"SandboxCrash: the job's process exited with code {code} without a result "
        f"(os._exit or a closed result pipe){said}",
    )
