"""Hostile payloads (issue 13): a table, each payload run with and without the static lint.

Every run asserts: no effect on the host (a host file's content and metadata, the terminal's
input queue, a path outside the sandbox), no hang beyond the job's limit, the parent's memory
bounded (``tracemalloc`` peak while it runs the job), and the payload's own expected outcome
(``want``: fragments of the job's error, where the payload reports what its calls returned).
Runs without the lint also repeat without Landlock and seccomp (``kernel=False``): the uid and
capability drop, the session and the rlimits must hold on their own.

Payloads that fake figures (``fakes``) meet the trusted books (``backtest.books``): the child
only claims fills, the parent checks and replays them. Each must give an integrity error
naming the discrepancy (``want``), or the honest strategy's own numbers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import subprocess
import sys
import tempfile
import termios
import textwrap
import time
import tracemalloc
import tty
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import bt_strategy_sources as src
import pandas as pd
import pytest
from conftest import REPO_ROOT, read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.executors import ProcessPoolBackend
from backtest.lookahead import check_lookahead
from backtest.sandbox import SandboxPolicy, run_sandboxed, run_sandboxed_batch, warm_worker

pytestmark = pytest.mark.integration

FOLD = Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31))
TIMEOUT_S = 4.0
GRACE_S = 1.0
PARENT_PEAK_MB = 24  # the result cap is 8 MB: the parent holds at most ~one line

# Shared by payloads: libc through ctypes (past every Python-level guard) and a reporter.
PRELUDE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def rc(value):
    return "%d/%d" % (value, ctypes.get_errno()) if value < 0 else str(value)
"""


def lib(body: str) -> str:
    """A payload that starts with ``PRELUDE``."""
    return textwrap.dedent(PRELUDE).lstrip() + textwrap.dedent(body).strip()


def forge(fills: str) -> str:
    """A payload that writes its job's line itself: the nonce and job from the child's stack,
    ``fills`` (a Python expression over the bars' OPEN/HIGH/LOW lists and BUY(i), the honest
    market buy price of bar i; each with an order forged to match it) and values that claim
    100,000 growing 0.1% a bar, then exits before the real line."""
    return """
        import base64, json, os, struct, sys
        f = sys._getframe()
        while f is not None and "nonce" not in f.f_locals:
            f = f.f_back
        nonce, job = f.f_locals["nonce"], f.f_locals["job"]
        d = self.data
        n = d.buflen()
        OPEN, HIGH, LOW = list(d.open.array), list(d.high.array), list(d.low.array)
        BUY = lambda i: min(OPEN[i] * (1 + 0.0005), HIGH[i])  # the broker's market buy price
        values = struct.pack("<%dd" % n, *[100000.0 * 1.001 ** i for i in range(n)])
        fills = [r + [k] for k, r in enumerate(FILLS)]  # each answers an order it forges
        orders = [[r[0], r[1], r[3], r[4], r[7], None if r[7] == "Market" else r[5], None,
                   False] for r in fills]
        log = {"fills": fills, "values": base64.b64encode(values).decode(), "orders_rejected": 0,
               "orders": orders}
        line = {"job_id": job.job_id, "nonce": nonce, "status": "ok", "error": None,
                "duration_s": 0.1, "log": log}
        os.write(3, json.dumps(line).encode() + b"\\n")
        os._exit(0)
        """.replace("FILLS", fills)


@dataclass(frozen=True)
class Payload:
    body: str  # next()'s body; HOST is the host file's path, OUTSIDE a path outside
    want: tuple[str, ...] = ()  # fragments of the error the payload raises, without the lint
    lint_passes: bool = False  # the static lint lets it through (it then runs)
    methods: str = ""  # extra methods of the strategy class (stop(), ...)
    statuses: tuple[JobStatus, ...] = (JobStatus.ERROR,)
    fakes: bool = False  # tries to fake figures: an integrity error or honest numbers
    kernel_off: bool = True  # also run with kernel=False
    all_fail: bool = False  # every call the payload reports returned -1 (errno after the /)
    root_only: bool = False  # its bound (uid of its own, tmpfs, process cap) needs root


PAYLOADS: dict[str, Payload] = {
    # --- the terminal (fd 0 and 2 of the parent are a pty during every run)
    "tiocsti_inherited_fds": Payload(
        lib("""
        out = []
        for fd in (0, 1, 2, 3):
            out.append(rc(libc.ioctl(fd, 0x5412, ctypes.c_char_p(b"X"))))
        tty = libc.open(b"/dev/tty", 2)
        out.append(rc(tty))
        if tty >= 0:
            out.append(rc(libc.ioctl(tty, 0x5412, ctypes.c_char_p(b"X"))))
        raise RuntimeError("tiocsti " + " ".join(out))
        """),
        want=("tiocsti -1/",),
        all_fail=True,
    ),
    "tioclinux": Payload(
        lib("""
        arg = ctypes.c_char(b"\\x0b")
        raise RuntimeError("tioclinux " + " ".join(rc(libc.ioctl(fd, 0x541C, ctypes.byref(arg))) for fd in range(4)))
        """),
        want=("tioclinux -1/",),
        all_fail=True,
    ),
    # --- host file metadata
    "chmod_setuid": Payload(
        lib('raise RuntimeError("chmod " + rc(libc.chmod(HOST.encode(), 0o4777)))'),
        want=("chmod -1/",),
    ),
    "chown": Payload(
        lib('raise RuntimeError("chown " + rc(libc.chown(HOST.encode(), 65534, 65534)))'),
        want=("chown -1/",),
    ),
    "utime": Payload(
        lib("""
        out = [rc(libc.utimes(HOST.encode(), None))]
        try:
            os.utime(HOST, (1, 1))
            out.append("set")
        except OSError as exc:
            out.append(type(exc).__name__)
        raise RuntimeError("utime " + " ".join(out))
        """),
        want=("utime -1/", "Error"),
    ),
    "setxattr": Payload(
        lib("""
        out = [rc(libc.setxattr(HOST.encode(), name, b"1", 1, 0)) for name in (b"user.pwn", b"trusted.pwn", b"security.capability")]
        raise RuntimeError("setxattr " + " ".join(out))
        """),
        want=("setxattr -1/",),
    ),
    "write_outside_raw": Payload(
        lib('raise RuntimeError("open " + rc(libc.open(OUTSIDE.encode(), 0o101, 0o644)))'),
        want=("open -1/",),
    ),
    # --- priority
    "nice_minus_15": Payload(
        lib("""
        got = libc.setpriority(0, 0, -15)
        raise RuntimeError("nice %s now %d" % (rc(got), os.getpriority(os.PRIO_PROCESS, 0)))
        """),
        want=("nice -1/",),
    ),
    "sched_fifo": Payload(
        lib("""
        param = ctypes.c_int(50)
        got = libc.sched_setscheduler(0, 1, ctypes.byref(param))
        raise RuntimeError("fifo %s policy %d" % (rc(got), os.sched_getscheduler(0)))
        """),
        want=("fifo -1/", "policy 0"),
    ),
    # --- the machine
    "mount_reboot_modules_clock": Payload(
        lib("""
        out = [
            rc(libc.mount(b"none", os.getcwd().encode(), b"tmpfs", 0, None)),
            rc(libc.syscall(169, 0, 0, 0, 0)),  # reboot with bad magic: EINVAL if allowed
            rc(libc.syscall(313, -1, b"", 0)),  # finit_module
            rc(libc.syscall(176, b"nope", 0)),  # delete_module
            rc(libc.syscall(164, None, None)),  # settimeofday(NULL, NULL)
            rc(libc.syscall(167, b"/nonexistent", 0)),  # swapon
        ]
        name = os.uname().nodename.encode()
        out.append(rc(libc.sethostname(name, len(name))))
        raise RuntimeError("machine " + " ".join(out))
        """),
        want=("machine -1/1 -1/1 -1/",),  # modules: ENOSYS where the kernel has none
        all_fail=True,
    ),
    "regain_privileges": Payload(
        lib("""
        out = [rc(libc.setuid(0)), rc(libc.setgid(0)), rc(libc.kill(1, 0)),
               rc(libc.kill(os.getppid(), 0)), rc(libc.setsid())]
        try:
            open("/etc/shadow", "rb").read()
            out.append("read")
        except OSError as exc:
            out.append(type(exc).__name__)
        raise RuntimeError("privs uid=%d " % os.getuid() + " ".join(out))
        """),
        want=("privs uid=", "-1/1 -1/1 -1/1 -1/1 -1/1 PermissionError"),
    ),
    "sysv_ipc_and_ptrace": Payload(
        lib("""
        shm = libc.shmget(0, 1 << 20, 0o1600)
        if shm >= 0:
            libc.shmctl(shm, 0, None)  # IPC_RMID: never leave it behind
        raise RuntimeError("shmget %s traceme %s" % (rc(shm), rc(libc.syscall(101, 0, 0, 0, 0))))
        """),
        want=("shmget -1/1 traceme -1/1",),
        kernel_off=False,  # only seccomp refuses these (neither leaves the job's uid)
    ),
    # --- bounded everything
    "result_flood_32mb": Payload(
        """
        import os
        chunk = b"9" * (1 << 20)
        for _ in range(32):
            os.write(3, chunk)
        raise RuntimeError("flooded")
        """,
        want=("exceeded 8 MB",),
    ),
    "output_flood_32mb": Payload(
        """
        import os
        chunk = b"x" * (1 << 20)
        for _ in range(32):
            os.write(2, chunk)
            os.write(1, chunk)
        raise RuntimeError("output flooded")
        """,
        want=("output flooded",),
    ),
    "fork_bomb": Payload(
        lib("""
        n, last = 0, 0
        for _ in range(200):
            pid = libc.fork()
            if pid == 0:  # leaves the job's process group, then waits
                libc.setsid()
                libc.pause()
                libc._exit(0)
            if pid < 0:
                last = ctypes.get_errno()
                break
            n += 1
        raise RuntimeError("forked %d errno %d uid %d" % (n, last, os.getuid()))
        """),
        want=("forked",),
    ),
    "thread_bomb": Payload(
        """
        import threading, time
        n = 0
        try:
            for _ in range(500):
                threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
                n += 1
        except RuntimeError:
            pass
        raise RuntimeError("threads %d" % n)
        """,
        want=("threads",),
        root_only=True,
    ),
    "temp_file_flood": Payload(
        """
        import os
        mb, files, why = 0, 0, []
        try:
            for i in range(200):  # 200 MB asked for
                with open("big%d" % i, "wb") as fh:
                    fh.write(b"0" * (1 << 20))
                mb += 1
        except OSError as exc:
            why.append(type(exc).__name__)
        try:
            for i in range(100000):  # empty files: inodes only
                open("empty%d" % i, "wb").close()
                files += 1
        except OSError as exc:
            why.append(type(exc).__name__)
        raise RuntimeError("temp %d MB %d files %s" % (mb, files, why))
        """,
        want=("temp ",),
        root_only=True,
    ),
    "hang_ignoring_alarm": Payload(
        """
        import signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
        while True:
            pass
        """,
        statuses=(JobStatus.TIMEOUT,),
    ),
    # --- faked figures (issue 13 item 1): honest numbers or an integrity error, eventually
    "add_cash_every_bar": Payload(
        "self.broker.add_cash(1000.0)",
        want=("cash change no fill explains",),
        lint_passes=True,
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    "edit_recorder_in_stop": Payload(
        "pass",
        methods="""
        def stop(self):
            rec = self.analyzers.recorder
            for i in range(len(rec.values)):
                rec.values[i] = 100000.0 * (1.001 ** i)
        """,
        want=("cash change no fill explains",),
        lint_passes=True,
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    "forged_line_then_exit": Payload(
        """
        import json, os
        line = {"result": {"job_id": "hostile", "variant_id": "hostile", "symbol": "AAPL",
                "fold": 0, "status": "ok", "metrics": {"sharpe": 9.9, "sharpe_per_period": 0.6,
                "sortino": 9.9, "cagr_pct": 99.0, "total_return_pct": 99.0,
                "max_drawdown_pct": 0.1, "win_rate_pct": 99.0, "profit_factor": 9.9,
                "n_trades": 9, "exposure_pct": 50.0, "final_value": 199000.0, "n_obs": 200,
                "skew": 0.0, "kurtosis": 3.0}}}
        os.write(3, json.dumps(line).encode() + b"\\n")
        os._exit(0)
        """,
        want=("not this job's",),
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    # --- forged fill logs carrying the job's own nonce (found on the stack): the books check
    # every fill against the bars and the costs
    "forged_log_buys_at_the_low": Payload(
        forge(
            "[[0, 45, 46, 'buy', 100.0, LOW[46], 100.0 * LOW[46] * 0.001, 'Market'],"
            " [0, 47, 48, 'sell', -100.0, HIGH[48], 100.0 * HIGH[48] * 0.001, 'Market']]"
        ),
        want=("is not the bar's open",),
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    "forged_log_without_commission": Payload(
        forge("[[0, 45, 46, 'buy', 100.0, BUY(46), 0.0, 'Market']]"),
        want=("commission 0.0, the cost model's is",),
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    "forged_log_unaffordable": Payload(
        forge("[[0, 45, 46, 'buy', 1e7, BUY(46), 1e7 * BUY(46) * 0.001, 'Market']]"),
        want=("not affordable",),
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    "forged_log_in_the_warmup": Payload(
        forge("[[0, 5, 6, 'buy', 10.0, BUY(6), 10.0 * BUY(6) * 0.001, 'Market']]"),
        want=("not between the fold's first bar",),
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
    "forged_log_limit_outside_the_range": Payload(
        forge("[[0, 45, 50, 'buy', 10.0, LOW[50] * 0.9, 10.0 * LOW[50] * 0.9 * 0.001, 'Limit']]"),
        want=("outside the bar's range",),
        fakes=True,
        statuses=(JobStatus.INTEGRITY_ERROR,),
    ),
}


def _strategy(payload: Payload, host: Path, outside: Path) -> str:
    body = textwrap.dedent(payload.body).strip()
    body = body.replace("HOST", repr(str(host))).replace("OUTSIDE", repr(str(outside)))
    code = (
        "import backtrader as bt\n\n\nclass Hostile(bt.Strategy):\n    params = dict(n=1)\n\n"
        "    def next(self):\n" + textwrap.indent(body, " " * 8) + "\n"
    )
    if payload.methods:
        code += "\n" + textwrap.indent(textwrap.dedent(payload.methods).strip(), " " * 4) + "\n"
    return code


def _job(code: str, bars: pd.DataFrame, job_id: str = "hostile", fold: Fold = FOLD) -> BacktestJob:
    return BacktestJob(
        job_id=job_id,
        variant_id="hostile",
        code=code,
        symbol="AAPL",
        bars=bars,
        fold=fold,
        timeout_s=TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    warm_worker()  # imports happen once, outside the measured runs
    return read_real_bars("AAPL", "2015-01-01", "2015-12-31")


@pytest.fixture(scope="module")
def honest(bars: pd.DataFrame) -> dict:
    """What the fake-figure payloads must give: the honest strategy without the payload."""
    quiet = _strategy(Payload("pass"), Path("/"), Path("/"))
    metrics = run_sandboxed(_job(quiet, bars)).result.metrics
    return {name: metrics for name, payload in PAYLOADS.items() if payload.fakes}


@pytest.fixture()
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A root-owned host file in a world-traversable folder, and a path that must not appear."""
    folder = Path(tempfile.mkdtemp(prefix="bt-host-"))
    try:
        folder.chmod(0o755)
        target = folder / "host.txt"
        target.write_text("host")
        target.chmod(0o644)
        yield target, folder / "pwned"
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def _fingerprint(path: Path) -> tuple:
    st = path.stat()
    return (
        stat.S_IMODE(st.st_mode),
        st.st_uid,
        st.st_gid,
        st.st_mtime_ns,
        path.read_text(),
        sorted(os.listxattr(path)),
    )


@contextlib.contextmanager
def _terminal_on_stdin_and_stderr() -> Iterator[int]:
    """fd 0 and 2 of this process are a pty's slave while the job runs; yields the slave,
    in raw mode and non-blocking, so anything pushed into its input queue can be read."""
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(slave, False)
    saved = [os.dup(0), os.dup(2)]
    try:
        os.dup2(slave, 0)
        os.dup2(slave, 2)
        yield slave
    finally:
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 2)
        for fd in (*saved, master):
            os.close(fd)
        os.close(slave)


def _processes_of(uid: int, wait_s: float = 2.0) -> list[int]:
    """Live (not zombie) processes of ``uid``, after up to ``wait_s`` for SIGKILLs to land."""
    deadline = time.monotonic() + wait_s
    while True:
        found = []
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError, IndexError):
                if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                    state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(int(entry))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _typed_input(slave: int) -> bytes:
    try:
        return os.read(slave, 4096)
    except BlockingIOError:
        return b""


def _run(code: str, bars: pd.DataFrame, policy: SandboxPolicy, host: tuple[Path, Path]):
    target, outside = host
    before = _fingerprint(target)
    tracemalloc.start()
    try:
        with _terminal_on_stdin_and_stderr() as slave:
            tracemalloc.reset_peak()
            res = run_sandboxed(_job(code, bars), policy).result
            peak = tracemalloc.get_traced_memory()[1]
            typed = _typed_input(slave)
    finally:
        tracemalloc.stop()
    assert typed == b"", f"typed into the terminal: {typed!r}"
    assert _fingerprint(target) == before, "the host file changed"
    assert not outside.exists(), "wrote outside the sandbox"
    assert res.duration_s <= TIMEOUT_S + GRACE_S + 3, f"took {res.duration_s} s"
    assert peak < PARENT_PEAK_MB << 20, f"parent peak {peak >> 20} MB"
    return res


MODES = {
    "lint": SandboxPolicy(grace_s=GRACE_S),
    "nolint": SandboxPolicy(validate=False, grace_s=GRACE_S),
    "nolint-nokernel": SandboxPolicy(validate=False, kernel=False, grace_s=GRACE_S),
}


ROOT = os.geteuid() == 0


def _cases() -> Iterator:
    for name, payload in PAYLOADS.items():
        for mode in MODES:
            if mode == "nolint-nokernel" and not payload.kernel_off:
                continue
            marks = []
            if (payload.root_only or mode == "nolint-nokernel") and not ROOT:
                marks.append(pytest.mark.skip(reason="the uid drop and its bounds need root"))
            yield pytest.param(name, mode, id=f"{name}-{mode}", marks=marks)


@pytest.mark.parametrize(("name", "mode"), list(_cases()))
def test_hostile_payload(name: str, mode: str, bars, honest, host) -> None:
    payload = PAYLOADS[name]
    res = _run(_strategy(payload, *host), bars, MODES[mode], host)
    if mode == "lint" and not payload.lint_passes:
        assert res.status == JobStatus.REJECTED, res
        return
    if payload.fakes:  # an integrity error naming the discrepancy, or honest numbers
        assert res.status != JobStatus.OK or res.metrics == honest[name], res.metrics
    assert res.status in payload.statuses, res
    for fragment in payload.want:
        assert fragment in (res.error or ""), res.error
    if name == "fork_bomb":
        forked = int(res.error.split("forked ")[1].split()[0])
        assert forked == 0 if mode != "nolint-nokernel" else forked < 32, res.error
        uid = int(res.error.split(" uid ")[1].split()[0])
        assert uid == 0 or not _processes_of(uid), "the fork bomb outlived its job"
    if name == "thread_bomb":
        assert int(res.error.split("threads ")[1].split()[0]) < 32, res.error
    if name == "temp_file_flood":
        mb, files = (int(x) for x in res.error.split("temp ")[1].split()[0:3:2])
        assert mb <= 64 and files <= 1024, res.error
    if name == "regain_privileges":
        assert "uid=0 " not in res.error
    if payload.all_fail:
        tokens = res.error.split(" [line")[0].split(": ", 1)[1].split()[1:]
        assert tokens and all(t.startswith("-1/") for t in tokens), res.error


def test_terminal_detector_sees_an_injection() -> None:
    """The check above can fail: this process (root, legacy TIOCSTI) types into the pty."""
    with _terminal_on_stdin_and_stderr() as slave:
        try:
            fcntl.ioctl(slave, termios.TIOCSTI, b"X")
        except OSError:
            pytest.skip("TIOCSTI is refused here for this process too")
        assert _typed_input(slave) == b"X"


def test_terminal_as_controlling_tty_of_a_cli(tmp_path: Path) -> None:
    """The issue's attack: a CLI whose controlling terminal is a tty, a payload that types into
    it (through its inherited stderr and /dev/tty). Nothing may reach the tty's input."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(REPO_ROOT / "tests")!r}, {str(REPO_ROOT / "tests" / "backtest")!r}]
        from test_bt_hostile import PAYLOADS, _job, _strategy, read_real_bars
        from backtest.sandbox import SandboxPolicy, run_sandboxed
        from pathlib import Path
        bars = read_real_bars("AAPL", "2015-01-01", "2015-12-31")
        code = _strategy(PAYLOADS["tiocsti_inherited_fds"], Path("/nonexistent"), Path("/nonexistent"))
        for kernel in (True, False):
            res = run_sandboxed(_job(code, bars), SandboxPolicy(validate=False, kernel=kernel))
            print(res.result.error, file=sys.stdout)
        """
    )
    master, slave = os.openpty()
    tty.setraw(slave)

    def controlling_tty() -> None:  # new session; the pty becomes its controlling terminal
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        proc = subprocess.run(
            [sys.executable, "-c", script],
            stdin=slave,
            stdout=stdout,
            stderr=slave,
            preexec_fn=controlling_tty,
            timeout=120,
            cwd=REPO_ROOT,
        )
    os.set_blocking(slave, False)
    typed = _typed_input(slave)
    os.close(slave)
    os.close(master)
    assert proc.returncode == 0, out.read_text()[-2000:]
    errors = out.read_text().splitlines()
    assert len(errors) == 2 and all("tiocsti -1/" in e for e in errors), errors
    assert typed == b"", f"typed into the controlling terminal: {typed!r}"


def test_jammed_pool_recovers(bars: pd.DataFrame) -> None:
    """Taking the pool's queue locks from the stack jammed the whole CLI: now they are the
    child's private copies, and the next job on the same worker still finishes."""
    body = """
    import sys
    f, seen, took = sys._getframe(), 0, 0
    while f is not None:
        for v in list(f.f_locals.values()):
            for attr in ("_wlock", "_rlock"):
                lock = getattr(v, attr, None)
                if lock is not None and hasattr(lock, "acquire"):
                    seen += 1
                    took += bool(lock.acquire(False))
        f = f.f_back
    raise RuntimeError("locks seen %d taken %d" % (seen, took))
    """
    code = _strategy(Payload(body), Path("/"), Path("/"))
    with ProcessPoolBackend(1, policy=SandboxPolicy(validate=False), batch_window_s=0) as pool:
        first = pool.submit(_job(code, bars)).result(timeout=60)
        after = pool.submit(_job(src.SMA_CROSS, bars, job_id="honest")).result(timeout=60)
    assert first.status == JobStatus.ERROR and "locks seen" in first.error, first.error
    assert after.status == JobStatus.OK, after.error


def test_a_hung_batch_child_is_killed_and_the_rest_rerun(bars: pd.DataFrame) -> None:
    """Per-job deadline inside a batch child: the hung job times out at its own limit, the
    jobs before it keep their results and the rest run in a fresh child."""
    code = src.SMA_CROSS.replace(
        "    def next(self):\n",
        "    def next(self):\n"
        "        if self.data.datetime.date(0).month == 6 and self.p.fast == 10:\n"
        "            import signal\n"
        "            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
        "            while True:\n"
        "                pass\n",
    )
    folds = [
        Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 2, 2), end=date(2015, 4, 30)),
        Fold(index=1, warmup_start=date(2015, 1, 2), start=date(2015, 5, 1), end=date(2015, 7, 31)),
        Fold(index=2, warmup_start=date(2015, 7, 1), start=date(2015, 8, 3), end=date(2015, 8, 31)),
    ]
    jobs = [_job(code, bars, job_id=f"j{f.index}", fold=f) for f in folds]
    outs = run_sandboxed_batch(jobs, SandboxPolicy(validate=False, grace_s=0.5))
    statuses = [o.result.status for o in outs]
    assert statuses == [JobStatus.OK, JobStatus.TIMEOUT, JobStatus.OK], outs


def test_a_job_replacing_the_metrics_in_its_child_fakes_nothing(bars: pd.DataFrame) -> None:
    """The child computes no figure: patching every metrics function there changes nothing,
    for this job or the later jobs of its batch."""
    code = src.SMA_CROSS.replace(
        "    def next(self):\n",
        "    def next(self):\n"
        "        import backtest.books as books, backtest.metrics as metrics\n"
        "        real = metrics.compute_metrics\n"
        "        fake = lambda *a, **k: real(*a, **k).model_copy(update={'sharpe': 9.9})\n"
        "        metrics.compute_metrics = books.compute_metrics = fake\n",
    )
    jobs = [_job(code, bars, job_id=f"j{i}") for i in range(2)]
    honest = [run_sandboxed(_job(src.SMA_CROSS, bars, job_id=f"j{i}")).result for i in range(2)]
    outs = run_sandboxed_batch(jobs, SandboxPolicy(validate=False))
    for out, ref in zip(outs, honest, strict=True):
        assert out.result.status == JobStatus.OK, out.result.error
        assert out.result.metrics == ref.metrics
        assert out.result.metrics.n_trades > 0


def test_a_job_writing_other_jobs_results(bars: pd.DataFrame) -> None:
    """Lines without the nonce sent for the running job are integrity errors; the child is
    killed and the next job runs in a fresh child (where the same code fails alike)."""
    code = src.SMA_CROSS.replace(
        "    def next(self):\n",
        "    def next(self):\n"
        "        import json, os\n"
        "        for jid in ('j0', 'j1'):\n"
        "            r = {'job_id': jid, 'variant_id': 'hostile', 'symbol': 'AAPL', 'fold': 0,"
        " 'status': 'error', 'error': 'sabotaged'}\n"
        "            os.write(3, json.dumps({'result': r}).encode() + b'\\n')\n"
        "        os._exit(0)\n",
    )
    outs = run_sandboxed_batch(
        [_job(code, bars, job_id=f"j{i}") for i in range(2)], SandboxPolicy(validate=False)
    )
    for out in outs:
        assert out.result.status == JobStatus.INTEGRITY_ERROR, out.result
        assert "sabotaged" not in (out.result.error or "")
        assert "not this job's" in (out.result.error or "")


def test_a_job_writing_the_next_jobs_line_early(bars: pd.DataFrame) -> None:
    """A line for a later job of the batch, written before that job's nonce was sent, cannot
    carry it: the writer's own job is an integrity error. The later job runs in a fresh child
    and is judged by its own line (this code then claims an error for itself: harmless)."""
    code = src.SMA_CROSS.replace(
        "    def next(self):\n",
        "    def next(self):\n"
        "        import json, os, sys\n"
        "        f = sys._getframe()\n"
        "        while f is not None and 'nonce' not in f.f_locals:\n"
        "            f = f.f_back\n"
        "        line = {'job_id': 'j1', 'nonce': f.f_locals['nonce'], 'status': 'error',"
        " 'error': 'sabotaged'}\n"
        "        os.write(3, json.dumps(line).encode() + b'\\n')\n"
        "        os._exit(0)\n",
    )
    outs = run_sandboxed_batch(
        [_job(code, bars, job_id=f"j{i}") for i in range(2)], SandboxPolicy(validate=False)
    )
    assert outs[0].result.status == JobStatus.INTEGRITY_ERROR, outs
    assert "sabotaged" not in (outs[0].result.error or "")
    assert outs[1].result.status == JobStatus.ERROR, outs


PEEK = """
import backtrader as bt


class Peek(bt.Strategy):
    params = dict(n=1)

    def next(self):
        i = len(self.data) - 1
        arr = self.data.open.array
        if i + 2 < len(arr) and not self.position and arr[i + 2] > arr[i]:
            self.buy(size=10)
        elif self.position:
            self.close()
"""
HIDE = """
    def stop(self):
        try:
            self._lab_orders.clear()
        except AttributeError:
            pass
        self.analyzers.recorder.fills.clear()
"""


def test_lookahead_through_the_array_is_caught(bars: pd.DataFrame) -> None:
    """Control for the next test: the same peek, nothing hidden, is found biased."""
    report = check_lookahead(PEEK, bars, fold=FOLD, symbol="AAPL")
    assert report.biased, report


def test_lookahead_hidden_by_clearing_fills(bars: pd.DataFrame) -> None:
    """Clearing the claimed fills leaves a cash change no fill explains: fail closed."""
    code = PEEK + HIDE
    for policy in (SandboxPolicy(), SandboxPolicy(validate=False)):  # it passes the lint too
        report = check_lookahead(code, bars, fold=FOLD, symbol="AAPL", policy=policy)
        assert report.biased, report
        assert "cash change no fill explains" in (report.integrity or ""), report


HIDE_ALL = (
    HIDE
    + """
        rec = self.analyzers.recorder
        rec.values[:] = [100000.0] * len(rec.values)
"""
)


def test_lookahead_hidden_by_rewriting_the_whole_claim(bars: pd.DataFrame) -> None:
    """A claim rewritten to be consistent (no fills, a flat value) is booked as what it says:
    a strategy that never traded. No figure of the peeking strategy survives, and the orders
    the recorder copied at placement (not cleared) still show the peek to the check."""
    code = PEEK + HIDE_ALL
    report = check_lookahead(code, bars, fold=FOLD, symbol="AAPL")
    assert report.biased and report.checked and not report.integrity, report
    assert "orders up to the cut" in report.mismatches[0], report
    res = run_sandboxed(_job(code, bars)).result
    assert res.status == JobStatus.OK, res.error
    assert res.metrics.n_trades == 0 and res.metrics.total_return_pct == 0.0
    assert res.traded_notional == 0.0
