"""Run one backtest job isolated: a forked, resource-limited child of a warm worker.

Why a fork: a fresh interpreter per job costs ~1-2 s of imports, more than most
backtests. A worker (a pool process, a Ray worker, or the CLI itself) imports
backtrader/pandas once (``warm_worker``); every job then runs in a ``fork()`` of
it, which costs a few milliseconds and inherits the job's bars copy-on-write.

What the child gets, in this order, before the strategy source is compiled:

* its own process group (the parent kills the whole group on timeout);
* stdin/stdout on ``/dev/null`` (stray output can't corrupt a CLI's JSON), every
  inherited descriptor closed except the result pipe;
* ``RLIMIT_CORE`` 0, ``RLIMIT_CPU`` (timeout + 1 s), ``RLIMIT_AS`` (what the warm
  worker already maps + ``memory_mb``), ``RLIMIT_FSIZE`` (``file_mb``),
  ``RLIMIT_NOFILE`` (``nofile``); soft = hard, so the code cannot raise them;
* an environment cleared to a small allowlist (``PATH``, ``LANG``, ``HOME``/``TMPDIR``
  = the job's temp dir...), the process's original environment block in memory
  zeroed (``/proc/self/environ``) and the process marked non-dumpable;
* a fresh temporary working directory, removed by the parent afterwards;
* Python-level guards (defence in depth, NOT a security boundary - code that
  reaches ``ctypes`` gets past them): ``socket`` creation/DNS, process creation
  (``os.system``, ``fork``, ``exec*``, ``subprocess``) and ``open`` outside the temp
  dir (reads of the interpreter's own library folders excepted) raise
  ``PermissionError``;
* kernel guards when the kernel offers them without root (Linux x86-64):
  ``no_new_privs``; a **Landlock** ruleset (read-only: the Python installation and
  import path; read-write: the temp dir; everything else, ``/proc`` and ``$HOME``
  included, denied; TCP bind/connect denied; signals and abstract unix sockets
  scoped to the sandbox) and a **seccomp** filter (``socket``/``socketpair``,
  ``execve``, ``fork``/``vfork``/non-thread ``clone``, ``ptrace``,
  ``process_vm_*``, ``io_uring``, ``unshare``/``setns``/``setsid``, ``bpf``,
  ``userfaultfd``, ``perf_event_open``, keyrings, 32-bit and x32 syscalls fail with
  ``EPERM``). ``kernel_capabilities()`` says which are active here.

The parent side never raises: every outcome is a ``BacktestResult`` with status
ok / error / timeout / rejected (static validation runs first, in the parent,
and rejected code never reaches a child). The wall clock is enforced twice: the
engine's SIGALRM inside the child (a clean "timeout" result) and, ``grace_s``
later, ``SIGKILL`` to the child's process group from the parent.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import ctypes
import gc
import io
import json
import math
import os
import platform
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backtest.contracts import BacktestJob, BacktestResult, JobStatus

MAX_PAYLOAD_BYTES = 256 << 20
_RESULT_FD = 3
_ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


@dataclass(frozen=True)
class SandboxPolicy:
    """Limits of one sandboxed job. Picklable (it travels to pool and Ray workers).

    ``validate=False`` skips the static lint: for tests that prove the runtime
    layer alone, never for generated code. ``kernel=False`` skips Landlock and
    seccomp (Python-level guards and rlimits stay).
    """

    validate: bool = True
    memory_mb: int = 2048  # address-space growth allowed over the warm worker's mappings
    file_mb: int = 64  # largest file the job may write
    nofile: int = 64  # open descriptors
    cpu_s: int | None = None  # CPU seconds; None: ceil(job.timeout_s) + 1
    grace_s: float = 2.0  # wall slack after job.timeout_s before SIGKILL of the group
    kernel: bool = True  # Landlock + seccomp when available


DEFAULT_POLICY = SandboxPolicy()


@dataclass
class SandboxOutcome:
    """What a sandboxed call returns: the result and, when asked for, the run's trace."""

    result: BacktestResult
    trace: dict[str, Any] | None = None


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
    import strategies.validate  # noqa: F401

    _libc()
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


def run_sandboxed(
    job: BacktestJob, policy: SandboxPolicy = DEFAULT_POLICY, *, trace: bool = False
) -> SandboxOutcome:
    """Validate, then run ``job`` in a limited child of this process. Never raises.

    With ``trace`` the outcome also carries the run's orders, fills and every
    indicator line (see ``backtest.lookahead``).
    """
    started = time.perf_counter()
    try:
        if policy.validate:
            from strategies.validate import validate_code

            report = validate_code(job.code)
            if not report.ok:
                out = error_outcome(
                    job, JobStatus.REJECTED, "Rejected by validation: " + "; ".join(report.errors)
                )
                out.result.duration_s = round(time.perf_counter() - started, 4)
                return out
        out = _fork_and_run(job, policy, trace)
    except BaseException as exc:  # the parent side must never raise
        out = error_outcome(job, JobStatus.ERROR, f"SandboxError: {type(exc).__name__}: {exc}")
    out.result.duration_s = round(time.perf_counter() - started, 4)
    return out


def sandbox_task(job: BacktestJob, policy: SandboxPolicy, trace: bool) -> SandboxOutcome:
    """Entry point of pool and Ray workers."""
    warm_worker()
    return run_sandboxed(job, policy, trace=trace)


def run_sandboxed_batch(
    jobs: list[BacktestJob], policy: SandboxPolicy = DEFAULT_POLICY
) -> list[SandboxOutcome]:
    """Run jobs that share one code in ONE limited child, one after another. Never raises.

    Why: the fork, the guards and the copy-on-write faults cost ~35 ms per child, as much
    as a short backtest; a variant's folds and symbols can share a child because they run
    the same (already validated) code, so nothing crosses between different codes. If the
    child dies or runs out of time part-way, the jobs that finished keep their results,
    the one that was running gets the timeout/crash verdict, and the rest run alone.
    """
    if len(jobs) <= 1:
        return [run_sandboxed(j, policy) for j in jobs]
    if len({j.code for j in jobs}) != 1:
        raise ValueError("run_sandboxed_batch: every job in a batch must have the same code")
    started = time.perf_counter()
    try:
        if policy.validate:
            from strategies.validate import validate_code

            report = validate_code(jobs[0].code)
            if not report.ok:
                message = "Rejected by validation: " + "; ".join(report.errors)
                return [error_outcome(j, JobStatus.REJECTED, message) for j in jobs]
        outs = _fork_and_run_batch(jobs, policy)
    except BaseException as exc:  # the parent side must never raise
        message = f"SandboxError: {type(exc).__name__}: {exc}"
        outs = [error_outcome(j, JobStatus.ERROR, message) for j in jobs]
    share = round((time.perf_counter() - started) / len(jobs), 4)
    for out in outs:
        out.result.duration_s = out.result.duration_s or share
    return outs


def sandbox_batch_task(jobs: list[BacktestJob], policy: SandboxPolicy) -> list[SandboxOutcome]:
    """Entry point of pool workers for a batch of same-code jobs."""
    warm_worker()
    return run_sandboxed_batch(jobs, policy)


def _fork_and_run_batch(jobs: list[BacktestJob], policy: SandboxPolicy) -> list[SandboxOutcome]:
    timeouts = [_timeout_of(j) for j in jobs]
    cpu_s = policy.cpu_s or math.ceil(sum(timeouts)) + 1
    data, status, timed_out = _spawn(list(jobs), policy, False, cpu_s, sum(timeouts))
    lines = data.split(b"\n")
    complete = lines[:-1]  # the last piece is empty, or a line cut off by a crash
    outs: list[SandboxOutcome] = []
    for job, line in zip(jobs, complete, strict=False):
        outs.append(_interpret(job, line, 0, False, 0.0, cpu_s))
    if len(outs) < len(jobs):  # the child stopped part-way: verdict for the running job
        running = jobs[len(outs)]
        outs.append(_interpret(running, b"", status, timed_out, timeouts[len(outs)], cpu_s))
        outs += [run_sandboxed(j, policy) for j in jobs[len(outs) :]]  # the rest, alone
    return outs


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _timeout_of(job: BacktestJob) -> float:
    return float(job.timeout_s) if job.timeout_s and job.timeout_s > 0 else 3600.0


def _fork_and_run(job: BacktestJob, policy: SandboxPolicy, trace: bool) -> SandboxOutcome:
    timeout = _timeout_of(job)
    cpu_s = policy.cpu_s or math.ceil(timeout) + 1
    data, status, timed_out = _spawn([job], policy, trace, cpu_s, timeout)
    return _interpret(job, data, status, timed_out, timeout, cpu_s)


def _spawn(
    jobs: list[BacktestJob], policy: SandboxPolicy, trace: bool, cpu_s: int, wall_s: float
) -> tuple[bytes, int | None, bool]:
    """Fork one limited child for ``jobs``; (its output, exit status, timed out)."""
    as_limit = _vm_bytes() + policy.memory_mb * (1 << 20)
    tmpdir = tempfile.mkdtemp(prefix="bt-job-")
    try:
        rfd, wfd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never returns
            os.close(rfd)
            _child(jobs, policy, trace, tmpdir, wfd, cpu_s, as_limit)
        os.close(wfd)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child: whoever runs first wins
        return _collect(pid, rfd, wall_s + policy.grace_s)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _collect(pid: int, rfd: int, wall_s: float) -> tuple[bytes, int | None, bool]:
    """Read the child's JSON until EOF, reap it; kill its group at the deadline."""
    deadline = time.monotonic() + wall_s
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([rfd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(rfd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_PAYLOAD_BYTES:
                break
            chunks.append(chunk)
    finally:
        os.close(rfd)
    status: int | None = None
    while not timed_out:  # EOF: the child is exiting (or closed the pipe itself)
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
            break
        if time.monotonic() >= deadline:
            timed_out = True
            break
        time.sleep(0.0005)
    _kill_group(pid)  # stragglers (the child's own children), or the child on timeout
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = None
    return b"".join(chunks), status, timed_out


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _interpret(
    job: BacktestJob,
    data: bytes,
    status: int | None,
    timed_out: bool,
    timeout: float,
    cpu_s: int,
) -> SandboxOutcome:
    if timed_out:
        return error_outcome(
            job,
            JobStatus.TIMEOUT,
            f"Timeout: wall-clock limit of {timeout:g} s exceeded; the job's process group was killed",
        )
    if data:
        try:
            payload = json.loads(data)
            if "result" in payload:
                return SandboxOutcome(
                    BacktestResult.model_validate(payload["result"]), payload.get("trace")
                )
            return error_outcome(job, JobStatus.ERROR, payload.get("error", "no result"))
        except (ValueError, TypeError, KeyError) as exc:
            if status is None or (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                return error_outcome(job, JobStatus.ERROR, f"SandboxError: bad result: {exc}")
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            return error_outcome(
                job, JobStatus.TIMEOUT, f"Timeout: CPU-time limit of {cpu_s} s exceeded"
            )
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return error_outcome(
            job,
            JobStatus.ERROR,
            f"SandboxCrash: the job's process died with signal {name} "
            "(segfault, out-of-memory kill or an external kill)",
        )
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else "?"
    return error_outcome(
        job,
        JobStatus.ERROR,
        f"SandboxCrash: the job's process exited with code {code} without a result "
        "(os._exit or a closed result pipe)",
    )


# ---------------------------------------------------------------------------- child side


def _child(
    jobs: list[BacktestJob],
    policy: SandboxPolicy,
    trace: bool,
    tmpdir: str,
    wfd: int,
    cpu_s: int,
    as_limit: int,
) -> None:
    """Limit this (forked) process, run the jobs one after another, write one JSON line per
    job to the pipe, ``_exit``. Several jobs share a child only when they share their code."""
    code = 0
    payloads: list[bytes] = []
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-big writes raise instead
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _isolate_fds(wfd)
        _set_limits(policy, cpu_s, as_limit)
        _scrub_environment(tmpdir)
        os.chdir(tmpdir)
        _python_guards(tmpdir)
        if policy.kernel:
            _kernel_guards(tmpdir)
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
            _write_line(_run_job(job, trace))
    except BaseException:
        code = 2
    os._exit(code)


def _write_line(payload: bytes) -> None:
    view = memoryview(payload + b"\n")  # JSON has no raw newline: one line per job
    while view:
        n = os.write(_RESULT_FD, view)
        view = view[n:]


def _run_job(job: BacktestJob, trace: bool) -> bytes:
    from backtest.engine import execute

    run = execute(job)  # never raises; SIGALRM gives a clean timeout result
    out: dict[str, Any] = {"result": run.result.model_dump(mode="json")}
    if trace:
        out["trace"] = collect_trace(run) if run.strategy is not None else None
    return json.dumps(out).encode()


def _isolate_fds(wfd: int) -> None:
    """stdin/stdout on /dev/null, the result pipe on fd 3, every other descriptor closed."""
    import fcntl

    high = fcntl.fcntl(wfd, fcntl.F_DUPFD, 10)  # out of the way of 0..3
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(high, _RESULT_FD)
    os.closerange(_RESULT_FD + 1, 1 << 16)  # devnull, high, wfd and every inherited fd
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)


def _set_limits(policy: SandboxPolicy, cpu_s: int, as_limit: int) -> None:
    limits = [
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),
        (resource.RLIMIT_FSIZE, policy.file_mb << 20, policy.file_mb << 20),
        (resource.RLIMIT_NOFILE, policy.nofile, policy.nofile),
    ]
    if policy.memory_mb > 0:
        limits.append((resource.RLIMIT_AS, as_limit, as_limit))
    for which, soft, hard in limits:
        _, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))


def _scrub_environment(tmpdir: str) -> None:
    keep = {k: os.environ[k] for k in _ENV_ALLOWLIST if k in os.environ}
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
        ctypes.memset(start, 0, end - start)


# ---------------------------------------------------------------------------- python guards


def _denied(what: str):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(f"{what} is disabled in the backtest sandbox")

    return refuse


def _read_roots() -> list[str]:
    """Folders the job may read: the interpreter, its libraries and the import path."""
    here = Path(__file__).resolve().parent.parent  # the project (backtest/, strategies/)
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(here)}
    roots.update(p for p in sys.path if p)
    roots.update(("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/share/zoneinfo"))
    out = []
    for root in roots:
        try:
            real = os.path.realpath(root)
        except (OSError, ValueError):
            continue
        if real != "/" and os.path.isdir(real):
            out.append(real)
    return sorted(set(out))


def _python_guards(tmpdir: str) -> None:
    """Refuse network, process creation and file access outside ``tmpdir`` at Python level."""
    import _socket

    net = _denied("network access")
    for mod in (socket, _socket):
        for name in ("socket", "socketpair", "fromfd", "create_connection", "create_server"):
            if hasattr(mod, name):
                setattr(mod, name, net)
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
        setattr(socket, name, net)
        if hasattr(_socket, name):
            setattr(_socket, name, net)

    proc = _denied("process creation")
    for name in dir(os):
        if name in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp") or (
            name.startswith(("exec", "spawn")) and callable(getattr(os, name))
        ):
            setattr(os, name, proc)
    if "subprocess" in sys.modules:
        sub = sys.modules["subprocess"]
        for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput"):
            setattr(sub, name, proc)
    if "_posixsubprocess" in sys.modules:
        sys.modules["_posixsubprocess"].fork_exec = proc

    real_open, real_os_open = builtins.open, os.open
    sandbox = os.path.realpath(tmpdir) + os.sep
    readable = tuple(r.rstrip(os.sep) + os.sep for r in _read_roots())

    def allowed(file: Any, writing: bool) -> bool:
        if isinstance(file, int):
            return True  # an already-open descriptor
        path = os.path.realpath(os.fspath(file))
        if (path + os.sep).startswith(sandbox):
            return True
        return not writing and (path + os.sep).startswith(readable)

    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if not allowed(file, any(c in mode for c in "wax+")):
            raise PermissionError(f"open({file!r}) outside the sandbox's temporary directory")
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        writing = bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
        if not allowed(path, writing):
            raise PermissionError(f"os.open({path!r}) outside the sandbox's temporary directory")
        return real_os_open(path, flags, *args, **kwargs)

    builtins.open = guarded_open
    io.open = guarded_open
    os.open = guarded_os_open


# ---------------------------------------------------------------------------- kernel guards

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_O_PATH = getattr(os, "O_PATH", 0o10000000)

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_CLONE_THREAD = 0x00010000
_EPERM, _ENOSYS = 1, 38
# x86-64 syscall numbers refused in the child.
_BLOCKED_SYSCALLS = {
    "socket": 41, "socketpair": 53, "fork": 57, "vfork": 58, "execve": 59, "ptrace": 101,
    "setsid": 112, "keyctl": 250, "add_key": 248, "request_key": 249, "unshare": 272,
    "perf_event_open": 298, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "bpf": 321, "execveat": 322, "userfaultfd": 323, "io_uring_setup": 425,
}  # fmt: skip
_SYS_CLONE, _SYS_CLONE3 = 56, 435

_libc_handle: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL | None:
    global _libc_handle
    if _libc_handle is None and sys.platform.startswith("linux"):
        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.syscall.restype = ctypes.c_long
            lib.prctl.restype = ctypes.c_int
            _libc_handle = lib
        except OSError:
            return None
    return _libc_handle


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when unavailable."""
    lib = _libc()
    if lib is None or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    abi = lib.syscall(
        _SYS_LANDLOCK_CREATE_RULESET,
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(0, int(abi))


def kernel_capabilities() -> dict[str, Any]:
    """Which kernel guards the sandbox can apply on this machine."""
    return {
        "landlock_abi": landlock_abi(),
        "seccomp": _libc() is not None and platform.machine() == "x86_64",
    }


def _kernel_guards(tmpdir: str) -> None:
    lib = _libc()
    if lib is None:
        return
    lib.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    lib.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # /proc/self/* becomes root-owned
    _landlock(lib, tmpdir)
    if platform.machine() == "x86_64":
        _seccomp(lib)


def _landlock(lib: ctypes.CDLL, tmpdir: str) -> None:
    abi = landlock_abi()
    if abi < 1:
        return
    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= 1 << 13  # REFER
    if abi >= 3:
        fs_all |= 1 << 14  # TRUNCATE
    if abi >= 5:
        fs_all |= 1 << 15  # IOCTL_DEV
    attr = _RulesetAttr(handled_access_fs=fs_all)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        size = 24
    ruleset = lib.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        return
    try:
        read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
        rules = [(root, read) for root in _read_roots()] + [(tmpdir, fs_all)]
        for path, access in rules:
            try:
                fd = os.open(path, _O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(allowed_access=access, parent_fd=fd)
                lib.syscall(
                    _SYS_LANDLOCK_ADD_RULE,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                    ctypes.byref(rule),
                    ctypes.c_uint32(0),
                )
            finally:
                os.close(fd)
        if lib.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def seccomp_program() -> list[tuple[int, int, int, int]]:
    """The classic-BPF seccomp filter (x86-64) as (code, jt, jf, k) tuples."""
    ld_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | _EPERM
    prog = [
        _bpf(ld_abs, 4),  # seccomp_data.arch
        _bpf(jeq, _AUDIT_ARCH_X86_64, jt=1),
        _bpf(ret, deny),  # i386 (int 0x80) and any other ABI
        _bpf(ld_abs, 0),  # seccomp_data.nr
        _bpf(jge, _X32_SYSCALL_BIT, jf=1),
        _bpf(ret, deny),
    ]
    for nr in sorted(_BLOCKED_SYSCALLS.values()):
        prog += [_bpf(jeq, nr, jf=1), _bpf(ret, deny)]
    prog += [
        _bpf(jeq, _SYS_CLONE3, jf=1),
        _bpf(ret, 0x00050000 | _ENOSYS),  # glibc falls back to clone(), checked below
        _bpf(jeq, _SYS_CLONE, jf=4),
        _bpf(ld_abs, 16),  # low half of args[0]: the clone flags
        _bpf(jset, _CLONE_THREAD, jf=1),
        _bpf(ret, allow),  # a thread
        _bpf(ret, deny),  # a process
        _bpf(ret, allow),
    ]
    return prog


def _seccomp(lib: ctypes.CDLL) -> None:
    prog = seccomp_program()
    filters = (_SockFilter * len(prog))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog])
    fprog = _SockFprog(len(prog), filters)
    if lib.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


# ---------------------------------------------------------------------------- trace


def decode_line(text: str) -> Any:
    """A trace line back to a float64 numpy array."""
    import numpy as np

    return np.frombuffer(base64.b64decode(text), dtype="<f8")


def _walk_indicators(owner: Any, seen: set[int]) -> list[Any]:
    from backtest.engine import bt

    found = []
    iterators = getattr(owner, "_lineiterators", None) or {}
    for ind in iterators.get(bt.LineIterator.IndType, []):
        if id(ind) in seen:
            continue
        seen.add(id(ind))
        found.append(ind)
        found.extend(_walk_indicators(ind, seen))
    return found


def collect_trace(run: Any) -> dict[str, Any]:
    """Orders, fills and every indicator line of a finished run (JSON-able).

    Line values travel as base64 little-endian float64 (``decode_line``).
    Indicators are found through the strategy's ``_lineiterators`` (what
    ``getindicators()`` returns) and, recursively, their own sub-indicators;
    each line is keyed ``"<n>:<Class>.<alias>"`` by construction order, which
    is the same in any two runs of the same code. Values are by bar position
    from the first fed bar (NaN where undefined).
    """
    strat = run.strategy
    import numpy as np

    lines: dict[str, str] = {}
    for n, ind in enumerate(_walk_indicators(strat, set())):
        aliases = ind.getlinealiases() if hasattr(ind, "getlinealiases") else ()
        line_objs = list(getattr(ind, "lines", []) or []) if aliases else [ind]
        if not aliases:
            aliases = ("line",)
        for alias, line in zip(aliases, line_objs, strict=False):
            arr = getattr(line, "array", None)
            if arr is not None:
                raw = np.asarray(arr, dtype="<f8").tobytes()
                lines[f"{n}:{type(ind).__name__}.{alias}"] = base64.b64encode(raw).decode()
    orders = [list(o) for o in strat.__dict__.get("_lab_orders", [])]
    fills = [
        [f.created.isoformat(), f.executed.isoformat(), f.side, f.size, f.price, f.commission]
        for f in run.fills
    ]
    return {"orders": orders, "fills": fills, "lines": lines, "n_bars": len(run.dates)}
