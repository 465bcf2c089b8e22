"""The parent side of a sandboxed run: fork confined children, feed them jobs, collect.

``run_in_children`` forks one confined child (``backtest.sandbox.child``) for a list of
same-code jobs, sends it each job (a nonce and a fresh copy of the job's window) only when the
previous job's line is booked, reads its result pipe and its stdout/stderr through ``poll`` with bounded
buffers, enforces the per-job and whole-child wall clocks and the temporary-file quota, kills
the child's process group (and, as root, its uid) when it stops, and gives the job that was
running when it stopped its verdict; whatever it left runs in a fresh child.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import pickle
import resource
import secrets
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field

from backtest.contracts import BacktestJob, JobStatus
from backtest.engine import window_job
from backtest.sandbox.child import NONCE_CHARS, run_child
from backtest.sandbox.kernel_guards import sandbox_uid
from backtest.sandbox.policy import SandboxPolicy
from backtest.sandbox.prefault import written_pages
from backtest.sandbox.result import (
    Claim,
    OnOutcome,
    SandboxOutcome,
    book,
    check_line,
    error_outcome,
)

__all__ = [
    "JOB_PIPE_BYTES",
    "OUTPUT_TAIL_BYTES",
    "run_in_children",
]

OUTPUT_TAIL_BYTES = 4096  # of the child's stdout/stderr, kept for crash messages
JOB_PIPE_BYTES = 1 << 20  # the unprivileged maximum (/proc/sys/fs/pipe-max-size)


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


def run_in_children(
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
    # Probed once per worker, before this fork: the job processes' pages to copy ahead.
    pages = written_pages() if policy.prefault and policy.forks_each_job(len(jobs)) else ()
    as_limit = _vm_bytes() + policy.memory_mb * (1 << 20)
    tmpdir = tempfile.mkdtemp(prefix="bt-job-")
    child = _Child(cpu_s=policy.cpu_s or math.ceil(sum(timeouts)) + 1, tmpdir=tmpdir)
    fds: list[int] = []
    try:
        result_r, result_w = os.pipe()
        fds += [result_r, result_w]
        output_r, output_w = os.pipe()
        fds += [output_r, output_w]
        job_r, job_w = os.pipe()
        fds += [job_r, job_w]
        with contextlib.suppress(OSError):  # a job's window in one write, where allowed
            fcntl.fcntl(job_w, fcntl.F_SETPIPE_SZ, JOB_PIPE_BYTES)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never returns
            os.close(result_r)
            os.close(output_r)
            os.close(job_w)
            pipes = (result_w, output_w, job_r)
            code = (jobs[0].code, jobs[0].variant_id)  # the batch's one code, no job's data
            run_child(len(jobs), policy, trace, tmpdir, pipes, child.cpu_s, as_limit, code, pages)
        for fd in (result_w, output_w, job_r):
            os.close(fd)
            fds.remove(fd)
        _collect(child, pid, result_r, output_r, job_w, jobs, timeouts, policy, trace, booked)
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
    job_w: int,
    jobs: list[BacktestJob],
    timeouts: list[float],
    policy: SandboxPolicy,
    trace: bool,
    booked: OnOutcome,
) -> None:
    """Send each job (its nonce and window) when it is due, read result lines (each checked
    and booked as soon as it is complete, then handed to ``booked``) and output, bounded; reap.
    A job is sent through a non-blocking outbox: a child that stops reading stalls nothing.

    The parent never holds more than one result line (``policy.result_mb``) and a tail
    of output. Deadlines: each job's limit + grace from the previous line, and the sum
    of all for the child; at either, on a too-long line or on a line that is not the
    running job's, the group is killed.
    """
    nonces = [secrets.token_hex(NONCE_CHARS // 2) for _ in jobs]
    feed = _Feed(
        jobs=jobs,
        nonces=nonces,
        timeouts=timeouts,
        job_w=job_w,
        outbox=bytearray(_message(nonces[0], jobs[0])),
        # The next job's message, pickled while the running job runs (held here, sent only
        # once the running job's line is read): its pickling is off the next job's critical
        # path.
        ready=_message(nonces[1], jobs[1]) if len(jobs) > 1 else b"",
    )
    os.set_blocking(job_w, False)
    cap = policy.result_mb << 20
    start = time.monotonic()
    end_all = start + sum(timeouts) + policy.grace_s
    feed.end_job = start + timeouts[0] + policy.grace_s
    tail = bytearray()
    open_fds = {result_r, output_r}
    _exchange(child, feed, result_r, output_r, open_fds, tail, end_all, cap, policy, trace, booked)
    deadline = min(feed.end_job, end_all)
    del feed  # the unread result bytes with it
    _await_exit(child, pid, deadline, len(jobs))
    _reap(child, pid, policy)
    if output_r in open_fds:  # what it said just before it ended (bounded)
        _read_rest(output_r, tail)
    child.output = bytes(tail)


@dataclass
class _Feed:
    """The parent's side of one batch's traffic: the jobs' nonces, what the job pipe still
    has to take (``outbox``), the next job's message (``ready``), the running job's
    deadline, and the result bytes not yet read as a line (``buf``)."""

    jobs: list[BacktestJob]
    nonces: list[str]
    timeouts: list[float]
    job_w: int
    outbox: bytearray
    ready: bytes
    end_job: float = 0.0
    buf: bytearray = field(default_factory=bytearray)


def _exchange(
    child: _Child,
    feed: _Feed,
    result_r: int,
    output_r: int,
    open_fds: set[int],
    tail: bytearray,
    end_all: float,
    cap: int,
    policy: SandboxPolicy,
    trace: bool,
    booked: OnOutcome,
) -> None:
    """Poll the pipes until every job is booked, the result pipe closes or the child is
    stopped: send the outbox, keep the output's tail, read result lines (``_take_lines``)."""
    jobs, job_w = feed.jobs, feed.job_w
    poller = select.poll()
    for fd in open_fds:
        poller.register(fd, select.POLLIN)
    sending = False
    while result_r in open_fds and len(child.outcomes) < len(jobs) and not child.stopped:
        remaining = min(feed.end_job, end_all) - time.monotonic()
        if remaining <= 0:
            child.stopped = "timeout"
            break
        if bool(feed.outbox) != sending:  # watch the job pipe only while a job is on its way
            sending = bool(feed.outbox)
            if sending:
                poller.register(job_w, select.POLLOUT)
            else:
                poller.unregister(job_w)
        for fd, _ in poller.poll(math.ceil(remaining * 1000)):
            if fd == job_w:
                _send_some(job_w, feed.outbox)
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
            elif fd == output_r:
                tail += chunk
                del tail[:-OUTPUT_TAIL_BYTES]
            else:
                feed.buf += chunk
                _take_lines(child, feed, policy, trace, booked)
                if child.stopped:
                    break
                if len(feed.buf) > cap:
                    child.stopped = "too_large"
                    break


def _take_lines(
    child: _Child, feed: _Feed, policy: SandboxPolicy, trace: bool, booked: OnOutcome
) -> None:
    """Book each complete result line in ``feed.buf`` (checked against the running job's
    nonce) and send the next job as soon as a line is read; stops the child at a line that
    is not the running job's, or when its temporary files are over their cap."""
    jobs, nonces = feed.jobs, feed.nonces
    while (nl := feed.buf.find(b"\n")) >= 0 and len(child.outcomes) < len(jobs):
        with memoryview(feed.buf) as view:  # no intermediate copy of the line
            line = bytes(view[:nl])
        del feed.buf[: nl + 1]
        k = len(child.outcomes)
        if _temp_full(child, policy):  # before its result is believed
            child.stopped = "temp_full"
            return
        claim, foreign = check_line(jobs[k], line, trace, nonces[k])
        if foreign:
            child.outcomes.append(_booked(jobs[k], claim, trace))
            booked(k, child.outcomes[-1])
            child.stopped = "integrity"
            return
        if k + 1 < len(jobs):  # the next job runs while this one is booked
            feed.outbox += feed.ready
            feed.end_job = time.monotonic() + feed.timeouts[k + 1] + policy.grace_s
            _send_some(feed.job_w, feed.outbox)
        child.outcomes.append(_booked(jobs[k], claim, trace))
        booked(k, child.outcomes[-1])
        feed.ready = _message(nonces[k + 2], jobs[k + 2]) if k + 2 < len(jobs) else b""


def _await_exit(child: _Child, pid: int, deadline: float, n_jobs: int) -> None:
    """After EOF, wait (until ``deadline``) for a child that has not booked every job to exit."""
    while not child.stopped and len(child.outcomes) < n_jobs:  # EOF: it is exiting
        # WNOWAIT: the exited child stays a zombie, so its pid (and uid) cannot be reused
        # before its group and uid are cleared below.
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            break
        if time.monotonic() >= deadline:
            child.stopped = "timeout"
            break
        time.sleep(0.0005)


def _reap(child: _Child, pid: int, policy: SandboxPolicy) -> None:
    """Kill the child's group (and, when it could fork, its uid's processes), then reap it."""
    _kill_group(pid)  # stragglers, or the child itself when stopped or done
    if not policy.kernel:  # fork was possible: a grandchild may have left the group
        with contextlib.suppress(OSError):
            _kill_uid(sandbox_uid(pid))
    with contextlib.suppress(ChildProcessError):
        child.status = os.waitpid(pid, 0)[1]


def _read_rest(output_r: int, tail: bytearray) -> None:
    """Add what is left in the output pipe to ``tail`` (bounded: 16 reads, the tail's size)."""
    os.set_blocking(output_r, False)
    with contextlib.suppress(OSError):
        for _ in range(16):
            chunk = os.read(output_r, 1 << 16)
            if not chunk:
                break
            tail += chunk
            del tail[:-OUTPUT_TAIL_BYTES]


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


def _booked(job: BacktestJob, claim: SandboxOutcome | Claim, trace: bool) -> SandboxOutcome:
    return book(job, claim, trace) if isinstance(claim, Claim) else claim


def _message(nonce: str, job: BacktestJob) -> bytes:
    """What the child is sent for a job: its nonce, then the job with fresh copies of only
    its window's bars (``window_job``), pickled: nothing it can reach holds another bar."""
    body = pickle.dumps(window_job(job), protocol=4)  # 5 would flatten the blocks' buffers
    return f"{nonce} {len(body):012d}\n".encode("ascii") + body


def _send_some(fd: int, outbox: bytearray) -> None:
    """As much of ``outbox`` as the job pipe takes now (non-blocking)."""
    try:
        del outbox[: os.write(fd, outbox[: 1 << 20])]
    except BlockingIOError:
        pass
    except OSError:  # a child that is gone reads nothing
        outbox.clear()


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
