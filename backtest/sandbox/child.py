"""The child side of a sandboxed job: confine this forked process, run the jobs, ``_exit``.

``run_child`` is called right after ``fork()`` in ``backtest.sandbox.process`` and never returns.
What the child gets, in this order, before any strategy code is compiled:

1. stdin on ``/dev/null``; stdout and stderr on a pipe the parent drains (it keeps a short
   tail for crash messages); the result pipe on fd 3, the job pipe on fd 4; every other
   descriptor closed;
2. the parent's frames forgotten: the locals of every frame above ``run_child`` (the
   worker's or the CLI's, holding whole histories and the other jobs) are cleared, since
   they never resume; the jobs themselves arrive one at a time on the job pipe
   (``window_job``: fresh copies of their windows, nothing more);
3. a new session (``setsid``): its own process group, which the parent kills whole, and no
   controlling terminal;
4. the worker's multiprocessing semaphores (the pool's queue locks) replaced by private
   copies, so nothing the child does with them reaches the worker, and the pool's published
   frames (whole histories its worker maps) by zero pages;
5. a private tmpfs on its temp dir (as root: capped bytes and files, gone with the child);
6. rlimits, soft = hard: core 0, CPU, address space, file size, open files, real-time
   priority 0, nice 0, no locked memory or message queues, and (as root, where the count is
   the child's own) processes and threads;
7. an environment cleared to an allowlist, the launch environment block zeroed, the temp
   dir as cwd, ``HOME`` and ``TMPDIR``;
8. as root, a uid/gid of its own with no groups; in any case no capabilities (every set),
   no_new_privs, non-dumpable, SIGKILL when the worker dies;
9. the Python-level guards (``backtest.sandbox.python_guards``), then Landlock and seccomp
   (``backtest.sandbox.kernel_guards``) when ``policy.kernel``; a batch child's seccomp filter still
   lets it fork, because
10. with the kernel guards, more than one job and ``policy.isolate_jobs`` (the default), each
    job runs in a process of its own, forked from this confined child, which never reads a
    job: the strategy's code (the batch's one code, no job's data) is compiled here once,
    confined, before the first fork (compiling runs none of it), and the heap is frozen for
    cheap forks. The job's process works in a folder of its own in the temp dir (its cwd,
    ``HOME``, ``TMPDIR``), stacks its own Landlock domain (only that folder of the temp dir;
    scoped signals: it cannot signal this child; made before the fork, one syscall after it)
    and a seccomp filter refusing processes and ``setpgid`` (stacked on this child's, whose
    other rules it inherits), then reads its own message (nonce and window) from the job
    pipe, closes the pipe before any strategy code runs, writes its line, empties its folder
    and says done on a pipe of its own. The next job's process is forked (from this child)
    while a job runs, and reads its job only once that job's process has said done and been
    sent SIGKILL (or, without Landlock or without a done, has ended and the temp dir been
    emptied): its exit and the removal of its folder happen while the next job runs, which
    it cannot reach. Nothing a job leaves (threads, patched modules, hooks, freed memory,
    files) reaches the next job, whose data was never in this child. While it waits for its
    turn, each job's process but the first copies the pages a backtest writes
    (``backtest.sandbox.prefault``: the worker's own probe, made before any job), so its
    page faults are taken off its clock.

Any failure of 1-9 fails the jobs closed (one error line each, exit 1): a job never runs
with fewer guards than asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import io
import json
import os
import pickle
import resource
import secrets
import shutil
import signal
import sys
import tempfile
import types
from typing import TYPE_CHECKING, Any

from backtest.sandbox import kernel_guards as kg
from backtest.sandbox.prefault import PageRanges, prefault
from backtest.sandbox.python_guards import python_guards, read_roots

if TYPE_CHECKING:
    from backtest.contracts import BacktestJob
    from backtest.sandbox.policy import SandboxPolicy

RESULT_FD = 3
JOB_FD = 4  # the parent sends each job (its nonce and its window) here when it is due
NONCE_CHARS = 32  # hex digits
HEADER_BYTES = NONCE_CHARS + 14  # "<nonce> <12-digit size>\n", then the pickled job
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_fork = os.fork  # before the Python guards replace it: the child forks one process per job


def run_child(
    n_jobs: int,
    policy: SandboxPolicy,
    trace: bool,
    tmpdir: str,
    pipes: tuple[int, int, int],
    cpu_s: int,
    as_limit: int,
    source: tuple[str, str] | None = None,
    pages: PageRanges = (),
) -> None:
    """Confine this process, then run ``n_jobs`` jobs as they arrive on the job pipe, each in
    a forked process of its own that writes one JSON line to the result pipe; ``_exit``.
    Several jobs share a child only when they share their code. ``pipes``: the write ends of
    (result pipe, output pipe) and the read end of the job pipe. ``source``: the batch's
    strategy code and its variant id, compiled once before the first job's process forks.
    ``pages``: what each job's process but the first copies while it waits for its turn
    (``backtest.sandbox.prefault``; the worker's probe, never a job's).

    A job's line is its claim, not its result: its status and, when it ran, its fill log
    (``backtest.books.FillLog``) with the nonce the parent sent with the job. The parent
    checks and replays the log and computes every figure itself.
    """
    code = 0
    payloads: list[bytes] = []
    forks = policy.forks_each_job(n_jobs)
    try:
        parent = os.getppid()
        _isolate_fds(*pipes)  # first: a failure below is reported on fd 3
        _forget_the_callers(sys._getframe(1))
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
            kg.seccomp(processes=forks)  # a batch child forks one process per job
    except BaseException as exc:
        error = json.dumps({"error": f"SandboxError: {type(exc).__name__}: {exc}"}).encode()
        payloads, n_jobs, code = [error] * n_jobs, 0, 1
    # Fewer young-generation collections: a short-lived child's cycles are reclaimed at exit,
    # and each collection would also copy-on-write pages shared with the worker.
    gc.set_threshold(50_000, 50, 50)
    try:
        for payload in payloads:
            _write_line(payload)
        if forks and n_jobs:  # each result leaves as soon as it exists: a crash keeps it
            _run_forked(n_jobs, trace, tmpdir, _prepare_job_guards(source), pages)
        for _ in range(0 if forks else n_jobs):
            # one job (no next job to reach), no kernel guards or isolation not asked
            nonce, job = _read_job()
            _write_line(_run_job(job, trace, nonce))
            del nonce, job
    except BaseException:
        code = 2
    os._exit(code)


def _forget_the_callers(frame: types.FrameType | None) -> None:
    """Make the locals of ``frame`` and every frame above it unreachable from the stack.

    They are the worker's (or the CLI's) frames, copied by ``fork``: a strategy walking
    ``f_back`` would find whole histories and the batch's other jobs there. They never
    resume (``run_child`` ends in ``_exit``). Each value is leaked (one reference more)
    before its name is cleared, so nothing is finalized here: a finalizer could close a
    descriptor the child now uses, or delete a host's temporary folder. Module frames are
    left alone: their locals are the module's globals.
    """
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes = [ctypes.py_object]
    while frame is not None:
        if frame.f_locals is not frame.f_globals:
            for value in frame.f_locals.values():
                incref(value)
            _clear_locals(frame)
        frame = frame.f_back


def _clear_locals(frame: types.FrameType) -> None:
    if sys.version_info >= (3, 13):  # PEP 667: f_locals writes through
        for name in list(frame.f_locals):
            with contextlib.suppress(Exception):
                frame.f_locals[name] = None
        return
    frame.f_locals.clear()
    ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(1))


def _write_line(payload: bytes) -> None:
    view = memoryview(payload + b"\n")  # JSON has no raw newline: one line per job
    while view:
        n = os.write(RESULT_FD, view)
        view = view[n:]


def _read_exactly(size: int) -> bytearray:
    got = bytearray()
    while len(got) < size:
        chunk = os.read(JOB_FD, min(size - len(got), 1 << 20))
        if not chunk:
            raise EOFError("the job pipe closed")
        got += chunk
    return got


def _read_job() -> tuple[str, BacktestJob]:
    """The next job and its nonce (blocks until the parent has the previous job's line)."""
    header = _read_exactly(HEADER_BYTES)
    nonce = header[:NONCE_CHARS].decode("ascii")
    job = pickle.loads(_read_exactly(int(header[NONCE_CHARS + 1 : -1])))
    return nonce, job


def _prepare_job_guards(source: tuple[str, str] | None) -> tuple[kg.PreparedFilter, bool]:
    """Once per batch child, confined, before any job's process exists (no job's data is in
    this child, ever): compile the batch's code (what each job would compile; compiling
    executes nothing), make the job processes' seccomp filter, learn whether Landlock can
    confine each job to a folder of its own, and freeze the heap so a job's collections do
    not touch (and copy) this child's pages."""
    if source is not None:
        from backtest.engine import compile_code

        with contextlib.suppress(Exception):  # a job reports its own SyntaxError
            compile_code(source[0], f"<variant {source[1]}>")
    guards = (kg.PreparedFilter(kg.job_seccomp_program()), kg.landlock_abi() >= 1)
    gc.freeze()  # no collection first: it could finalize the worker's garbage here
    return guards


def _run_forked(
    n_jobs: int,
    trace: bool,
    tmpdir: str,
    guards: tuple[kg.PreparedFilter, bool],
    pages: PageRanges = (),
) -> None:
    """Run the next ``n_jobs`` jobs, each in a forked process of its own, one after the other.
    A process that ended abnormally ends this child the same way (the parent's verdict reads
    its status).

    Job k+1's process is forked while job k's runs (the fork's page-table copy then costs no
    job any wall time), from this child, which no job's code ever reached: nothing of job k
    is in it. It confines itself at once (its own Landlock domain: only its own folder of the
    temp dir; seccomp), then waits on a go pipe of its own, which this child writes only
    after job k's process has said, on a done pipe of its own, that its line is written, and
    has been sent SIGKILL, and its folder renamed to a random name. Job k's exit (the
    teardown of its address space, ~ms) and the removal of its folder then happen while job
    k+1 runs, off its critical path: job k can reach nothing of job k+1 meanwhile, nor job
    k+1 anything job k left. It holds no end of job k+1's pipes (made after its
    fork), has closed the job pipe, cannot signal or trace its sibling (Landlock's scoped
    signals and ptrace rule, seccomp) and reaches no folder but its own. Without Landlock
    (no per-job folders to confine to), or when job k's process ended without saying done,
    job k+1 goes only once job k's process is reaped and the temp dir is emptied, as
    before. Either way job k is reaped, and its folder removed, before job k+2 goes.
    While it waits, job k+1's process copies ``pages`` (``prefault``): job 0's would wait
    for nothing, so it copies none.
    """
    seccomp, confined = guards
    waiting: tuple[int, int, int, str] | None = _fork_job(0, trace, tmpdir, seccomp, ())
    ending: tuple[int, str] | None = None  # a job that said done: killed, not yet reaped
    for k in range(n_jobs):
        assert waiting is not None  # job k was forked: by job k-1's turn, or before the loop
        pid, go, done, folder = waiting
        os.write(go, b"g")
        os.close(go)
        if ending is not None:  # while job k runs: job k-1's teardown and its folder
            _reap(*ending)
            ending = None
        waiting = (
            _fork_job(k + 1, trace, tmpdir, seccomp, (done,), pages) if k + 1 < n_jobs else None
        )
        said = _read_done(done)
        os.close(done)
        if said and confined and waiting is not None:
            with contextlib.suppress(OSError):  # its line is written: it has nothing to add
                os.kill(pid, signal.SIGKILL)
            ending = (pid, _hide(folder))
            continue
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) or os.WEXITSTATUS(status):
            if waiting is not None:  # its go pipe closes with this child: it exits unrun
                with contextlib.suppress(OSError):
                    os.kill(waiting[0], signal.SIGKILL)
            _end_like(status)
        if waiting is not None:  # the files a job left are the last thing it could pass on
            _clear(tmpdir, keep=waiting[3])


def _read_done(done: int) -> bool:
    """Whether a job's process said its line is written (b"d"), rather than ending without
    saying so (end of file: it exited, crashed or closed the pipe)."""
    try:
        return os.read(done, 1) == b"d"
    except OSError:
        return False


def _hide(folder: str) -> str:
    """Rename a killed job's folder to a random name before the next job goes: whatever is
    still in it until it is removed (a file its threads made after it emptied the folder,
    say) cannot be found by a path the next job could guess (``stat`` needs no Landlock
    right, and no job can list the temp dir). Its new path."""
    hidden = os.path.join(os.path.dirname(folder), "gone-" + secrets.token_hex(16))
    os.rename(folder, hidden)
    return hidden


def _reap(pid: int, folder: str) -> None:
    """Wait for a killed job's process to be gone, then remove its folder. A failure raises:
    the job after next never runs beside what it left."""
    os.waitpid(pid, 0)
    shutil.rmtree(folder)


def _clear(tmpdir: str, keep: str) -> None:
    """Remove everything in ``tmpdir`` but the folder ``keep`` (the next job's), and empty
    that one (links unlinked, never followed). A failure raises: the next job never runs
    beside files another job left (its window's bars, say)."""
    for entry in os.scandir(tmpdir):
        if entry.path == keep:
            _empty_dir(keep)
        elif entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _empty_dir(path: str) -> None:
    """Remove everything in ``path`` (links unlinked, never followed)."""
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _end_like(status: int) -> None:
    """End this child as its job's process ended (a signal, or an exit code)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(Exception):
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status))


def _fork_job(
    k: int,
    trace: bool,
    tmpdir: str,
    seccomp: kg.PreparedFilter,
    inherited: tuple[int, ...],
    pages: PageRanges = (),
) -> tuple[int, int, int, str]:
    """Fork job ``k``'s process, confined and waiting for its go: (its pid, the go pipe's
    write end, the done pipe's read end, its folder). ``inherited``: this child's
    descriptors the process must not keep (the running job's done pipe).

    In the process: its own folder of the temp dir (made here, empty) as cwd, ``HOME`` and
    ``TMPDIR``; its own Landlock domain (only that folder writable or readable of the temp
    dir; scoped signals keep it from signalling this child and its siblings) and a seccomp
    filter refusing processes; the go awaited, then its own job read and the job pipe closed
    before any strategy code runs: the next job's nonce is not this process's to read, and
    it arrives only after this process has written its line and the parent has read it.
    While it waits for the go it copies ``pages`` (``prefault``, until the go comes).
    Once its line is written it empties its folder and says done (this child then kills it
    and lets the next job go)."""
    folder = os.path.join(tmpdir, f"job-{k}")
    os.mkdir(folder, 0o700)
    ruleset = kg.job_ruleset(read_roots(), folder)
    fds = [ruleset] if ruleset >= 0 else []
    try:
        go_r, go_w = os.pipe()
        fds += [go_r, go_w]
        done_r, done_w = os.pipe()
        fds += [done_r, done_w]
        pid = _fork()
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if pid == 0:
        code = 0
        try:
            for fd in (go_w, done_r, *inherited):
                os.close(fd)
            os.chdir(folder)
            os.environ.update({"HOME": folder, "TMPDIR": folder})
            tempfile.tempdir = folder
            kg.job_landlock(ruleset)  # closes this process's copy
            seccomp.install()
            with contextlib.suppress(Exception):  # a missing copy costs time, never a job
                prefault(pages, go_r)  # confined, before any job's data: the worker's list
            go = os.read(go_r, 1)
            os.close(go_r)
            if go != b"g":  # this child ended first: no job for this process
                os._exit(0)
            nonce, job = _read_job()
            # The job pipe closed before any strategy code runs, its number kept taken (by
            # the result pipe's write end, already fd 3): a read of fd 4 fails, rather than
            # reading whatever file the run opens next under that number.
            os.dup2(RESULT_FD, JOB_FD)
            _write_line(_run_job(job, trace, nonce))
            with contextlib.suppress(OSError):  # what is left, this child removes
                _empty_dir(folder)
            os.write(done_w, b"d")
        except BaseException:
            code = 2
        os._exit(code)
    for fd in (go_r, done_w, *([ruleset] if ruleset >= 0 else [])):
        os.close(fd)
    return pid, go_w, done_r, folder


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


def _isolate_fds(result_w: int, output_w: int, job_r: int) -> None:
    """stdin on /dev/null, stdout+stderr on the output pipe, the result pipe on fd 3, the
    job pipe on fd 4, every other descriptor closed (the terminal, the pool's pipes, the
    worker's files)."""
    import fcntl

    result = fcntl.fcntl(result_w, fcntl.F_DUPFD, 10)  # out of the way of 0..4
    output = fcntl.fcntl(output_w, fcntl.F_DUPFD, 10)
    job = fcntl.fcntl(job_r, fcntl.F_DUPFD, 10)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.dup2(result, RESULT_FD)
    os.dup2(job, JOB_FD)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = soft if soft != resource.RLIM_INFINITY else 1 << 20
    os.closerange(JOB_FD + 1, max(high, 1 << 16))  # close_range(2): cost ~ open fds
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
