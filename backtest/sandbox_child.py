"""The child side of a sandboxed job: confine this forked process, run the jobs, ``_exit``.

``run_child`` is called right after ``fork()`` in ``backtest.sandbox_process`` and never returns.
What the child gets, in this order, before any strategy code is compiled:

1. stdin on ``/dev/null``; stdout and stderr on a pipe the parent drains (it keeps a short
   tail for crash messages); the result pipe on fd 3, the nonce pipe on fd 4; every other
   descriptor closed;
2. a new session (``setsid``): its own process group, which the parent kills whole, and no
   controlling terminal;
3. the worker's multiprocessing semaphores (the pool's queue locks) replaced by private
   copies, so nothing the child does with them reaches the worker;
4. a private tmpfs on its temp dir (as root: capped bytes and files, gone with the child);
5. rlimits, soft = hard: core 0, CPU, address space, file size, open files, real-time
   priority 0, nice 0, no locked memory or message queues, and (as root, where the count is
   the child's own) processes and threads;
6. an environment cleared to an allowlist, the launch environment block zeroed, the temp
   dir as cwd, ``HOME`` and ``TMPDIR``;
7. as root, a uid/gid of its own with no groups; in any case no capabilities (every set),
   no_new_privs, non-dumpable, SIGKILL when the worker dies;
8. the Python-level guards (``backtest.python_guards``), then Landlock and seccomp
   (``backtest.kernel_guards``) when ``policy.kernel``.

Any failure of 1-8 fails the jobs closed (one error line each, exit 1): a job never runs
with fewer guards than asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import json
import os
import resource
import signal
import sys
import tempfile
from typing import TYPE_CHECKING, Any

from backtest import kernel_guards as kg
from backtest.python_guards import python_guards, read_roots

if TYPE_CHECKING:
    from backtest.contracts import BacktestJob
    from backtest.sandbox_policy import SandboxPolicy

RESULT_FD = 3
NONCE_FD = 4  # the parent sends each job's nonce here when that job is due
NONCE_BYTES = 33  # 32 hex digits and a newline
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def run_child(
    jobs: list[BacktestJob],
    policy: SandboxPolicy,
    trace: bool,
    tmpdir: str,
    pipes: tuple[int, int, int],
    cpu_s: int,
    as_limit: int,
) -> None:
    """Confine this process, run ``jobs`` one after another, write one JSON line per job to
    the result pipe, ``_exit``. Several jobs share a child only when they share their code.
    ``pipes``: the write ends of (result pipe, output pipe) and the read end of the nonce
    pipe.

    A job's line is its claim, not its result: its status and, when it ran, its fill log
    (``backtest.books.FillLog``) with the nonce the parent sent for it. The parent checks
    and replays the log and computes every figure itself.
    """
    code = 0
    payloads: list[bytes] = []
    try:
        parent = os.getppid()
        _isolate_fds(*pipes)  # first: a failure below is reported on fd 3
        os.setsid()  # before seccomp, which refuses it
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-big writes raise instead
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        kg.shared_to_private()
        root = os.geteuid() == 0
        uid = kg.sandbox_uid(os.getpid()) if root else os.geteuid()
        tmpfs = kg.private_tmpfs(tmpdir, size_mb=policy.temp_mb, inodes=policy.temp_files, uid=uid)
        if root and not tmpfs:
            os.chown(tmpdir, uid, uid)
        _set_limits(policy, cpu_s, as_limit)
        _scrub_environment(tmpdir)
        os.chdir(tmpdir)
        kg.drop_privileges(uid)
        kg.die_with_parent(parent)
        python_guards(tmpdir)
        if policy.kernel:
            kg.landlock(read_roots(), tmpdir)
            kg.seccomp()
    except BaseException as exc:
        error = json.dumps({"error": f"SandboxError: {type(exc).__name__}: {exc}"}).encode()
        payloads, jobs, code = [error] * len(jobs), [], 1
    # Fewer young-generation collections: a short-lived child's cycles are reclaimed at exit,
    # and each collection would also copy-on-write pages shared with the worker.
    gc.set_threshold(50_000, 50, 50)
    try:
        for payload in payloads:
            _write_line(payload)
        for job in jobs:  # each result leaves as soon as it exists: a later crash keeps it
            _write_line(_run_job(job, trace, _read_nonce()))
    except BaseException:
        code = 2
    os._exit(code)


def _write_line(payload: bytes) -> None:
    view = memoryview(payload + b"\n")  # JSON has no raw newline: one line per job
    while view:
        n = os.write(RESULT_FD, view)
        view = view[n:]


def _read_nonce() -> str:
    """The next job's nonce (blocks until the parent has the previous job's line)."""
    got = b""
    while len(got) < NONCE_BYTES:
        chunk = os.read(NONCE_FD, NONCE_BYTES - len(got))
        if not chunk:
            raise EOFError("the nonce pipe closed")
        got += chunk
    return got.decode("ascii").strip()


def _run_job(job: BacktestJob, trace: bool, nonce: str) -> bytes:
    from backtest.engine import execute
    from backtest.trace import collect_trace

    run = execute(job, books=False)  # never raises; SIGALRM gives a clean timeout result
    res = run.result
    out: dict[str, Any] = {
        "job_id": job.job_id,
        "nonce": nonce,
        "status": res.status.value,
        "error": res.error,
        "duration_s": res.duration_s,
        "bars": run.bars,  # bars completed, also by a run that failed part-way
        "log": run.log.to_json() if run.log is not None else None,
    }
    if trace:
        out["trace"] = collect_trace(run) if run.strategy is not None else None
    return json.dumps(out).encode()


def _isolate_fds(result_w: int, output_w: int, nonce_r: int) -> None:
    """stdin on /dev/null, stdout+stderr on the output pipe, the result pipe on fd 3, the
    nonce pipe on fd 4, every other descriptor closed (the terminal, the pool's pipes, the
    worker's files)."""
    import fcntl

    result = fcntl.fcntl(result_w, fcntl.F_DUPFD, 10)  # out of the way of 0..4
    output = fcntl.fcntl(output_w, fcntl.F_DUPFD, 10)
    nonce = fcntl.fcntl(nonce_r, fcntl.F_DUPFD, 10)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.dup2(result, RESULT_FD)
    os.dup2(nonce, NONCE_FD)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = soft if soft != resource.RLIM_INFINITY else 1 << 20
    os.closerange(NONCE_FD + 1, max(high, 1 << 16))  # close_range(2): cost ~ open fds
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)


def _set_limits(policy: SandboxPolicy, cpu_s: int, as_limit: int) -> None:
    file_bytes = policy.file_mb << 20
    limits = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
        (resource.RLIMIT_NOFILE, policy.nofile, policy.nofile),
        (resource.RLIMIT_RTPRIO, 0, 0),
        (resource.RLIMIT_NICE, 0, 0),  # "20 - 0": no nice below the current one
        (resource.RLIMIT_MSGQUEUE, 0, 0),
        (resource.RLIMIT_MEMLOCK, 0, 0),
    ]
    if policy.memory_mb > 0:
        limits.append((resource.RLIMIT_AS, as_limit, as_limit))
    if os.geteuid() == 0:  # the child's own uid comes next: the count is this child's threads
        limits.append((resource.RLIMIT_NPROC, policy.nproc, policy.nproc))
    for which, soft, hard in limits:
        _, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))


def _scrub_environment(tmpdir: str) -> None:
    keep = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    keep.setdefault("PATH", "/usr/bin:/bin")
    os.environ.clear()  # unsetenv() for every inherited variable
    os.environ.update(keep)
    os.environ.update({"HOME": tmpdir, "TMPDIR": tmpdir, "MPLBACKEND": "Agg"})
    tempfile.tempdir = tmpdir
    _zero_initial_environ()


def _zero_initial_environ() -> None:
    """Overwrite the environment block the process started with (``/proc/self/environ``).

    ``unsetenv`` only drops pointers; the strings stay in the stack region the
    kernel reports as env_start..env_end, which a forked child shares
    copy-on-write. Zeroing it (in the child only) leaves nothing to read.
    """
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start/env_end: fields 50/51
    except (OSError, ValueError, IndexError):
        return
    if 0 < start < end and end - start < (1 << 22):
        with contextlib.suppress(OSError):
            ctypes.memset(start, 0, end - start)
