"""The sandbox: hostile code fails safely, through the static validator AND at runtime.

Each attack runs twice: as-is (the validator rejects most of it before any
execution) and with validation bypassed (``SandboxPolicy(validate=False)``), which
proves the runtime layer alone: rlimits, scrubbed environment, temp cwd, Python
guards and, where the kernel offers them, Landlock + seccomp.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import bt_strategy_sources as src
import pandas as pd
import pytest
from conftest import REPO_ROOT, read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.engine import run_job
from backtest.sandbox import SandboxPolicy, landlock_abi, run_sandboxed, seccomp_program
from backtest.sandbox.kernel_guards import BLOCKED_SYSCALLS, job_seccomp_program

FOLD = Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31))
SECRET = "sk-test-DO-NOT-LEAK-1234567890"
RUNTIME_ONLY = SandboxPolicy(validate=False)


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    return read_real_bars("AAPL", "2015-01-01", "2015-12-31")


def attack(body: str) -> str:
    return (
        "import backtrader as bt\n\n\nclass Attack(bt.Strategy):\n    params = dict(n=1)\n\n"
        "    def next(self):\n" + textwrap.indent(textwrap.dedent(body).strip(), " " * 8) + "\n"
    )


def job(code: str, bars: pd.DataFrame, timeout_s: float = 60.0) -> BacktestJob:
    return BacktestJob(
        job_id="attack",
        variant_id="attack",
        code=code,
        symbol="AAPL",
        bars=bars,
        fold=FOLD,
        timeout_s=timeout_s,
    )


# name -> (body with OUTSIDE as the path it must not write, rejected by the validator?)
ATTACKS = {
    "open_outside": ('open(OUTSIDE, "w").write("pwned")', True),
    "os_system": ('__import__("os").system("touch " + OUTSIDE)', True),
    "subclasses_walk": (
        """
        for c in ().__class__.__base__.__subclasses__():
            if c.__name__ == "_wrap_close":
                c.__init__.__globals__["system"]("touch " + OUTSIDE)
        raise RuntimeError("walked every subclass without escaping")
        """,
        True,
    ),
    "getattr_dunder": (
        """
        base = getattr(getattr((), "__cla" + "ss__"), "__ba" + "se__")
        for c in base.__subclasses__():
            if c.__name__ == "Popen":
                c(["touch", OUTSIDE]).wait()
            if c.__name__ == "_wrap_close":
                c.__init__.__globals__["popen"]("touch " + OUTSIDE).read()
        raise RuntimeError("no escape")
        """,
        True,
    ),
    "generator_frame_globals": (
        """
        g = (x for x in []).gi_frame.f_globals["__builtins__"]
        opener = g["open"] if isinstance(g, dict) else g.open
        opener(OUTSIDE, "w").write("pwned")
        """,
        True,
    ),
    "allocate_8gib": ("self.blob = bytearray(8 << 30)", False),
    "write_2gib_file": (
        """
        chunk = b"0" * (1 << 24)
        with open("big.bin", "wb") as fh:
            for _ in range(128):
                fh.write(chunk)
        """,
        True,
    ),
    "read_secrets": (
        """
        import os
        seen = [os.environ.get("OPENAI_API_KEY"), sorted(os.environ)]
        for path in ("/proc/self/environ", "/proc/%d/environ" % os.getppid()):
            try:
                seen.append(open(path, "rb").read())
            except OSError as exc:
                seen.append(type(exc).__name__)
        raise RuntimeError("seen: %r" % (seen,))
        """,
        True,
    ),
    "open_socket": ('__import__("socket").create_connection(("127.0.0.1", 9), timeout=1)', True),
}


def _code(name: str, outside: Path) -> str:
    body = ATTACKS[name][0].replace("OUTSIDE", repr(str(outside)))
    return attack(body)


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_fails_safely_at_both_layers(
    name: str, bars: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    outside = tmp_path / "pwned"
    code = _code(name, outside)
    rejected_statically = ATTACKS[name][1]

    static = run_sandboxed(job(code, bars)).result
    if rejected_statically:
        assert static.status == JobStatus.REJECTED, static.error
        assert static.error.startswith("Rejected by validation")
    else:
        assert static.status in (JobStatus.ERROR, JobStatus.TIMEOUT), static

    runtime = run_sandboxed(job(code, bars), RUNTIME_ONLY).result
    assert runtime.status in (JobStatus.ERROR, JobStatus.TIMEOUT), runtime
    assert not outside.exists(), f"{name} wrote outside the sandbox"
    assert SECRET not in (runtime.error or "") and SECRET not in (static.error or "")
    if name == "read_secrets":
        assert "OPENAI_API_KEY" not in runtime.error
    if name == "allocate_8gib":
        assert "MemoryError" in runtime.error
    if name == "write_2gib_file":
        assert "File too large" in runtime.error or "Errno 27" in runtime.error
    if name == "open_socket":
        assert "PermissionError" in runtime.error
    # The parent survives and still runs honest code.
    ok = run_sandboxed(job(src.SMA_CROSS, bars)).result
    assert ok.status == JobStatus.OK


@pytest.mark.integration
def test_endless_loop_and_ignored_alarm_time_out(bars: pd.DataFrame) -> None:
    spin = run_sandboxed(job(attack("while True:\n    pass"), bars, timeout_s=1.0)).result
    assert spin.status == JobStatus.TIMEOUT and spin.duration_s < 5
    # Code that disables the engine's SIGALRM still dies: the parent kills its group.
    stubborn = attack(
        """
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        while True:
            pass
        """
    )
    res = run_sandboxed(
        job(stubborn, bars, timeout_s=1.0), SandboxPolicy(validate=False, grace_s=0.5)
    ).result
    assert res.status == JobStatus.TIMEOUT and res.duration_s < 5, res


@pytest.mark.integration
def test_kernel_layer_blocks_raw_syscalls(bars: pd.DataFrame, tmp_path: Path) -> None:
    """Past the Python guards (ctypes straight to libc): Landlock and seccomp hold."""
    if landlock_abi() < 4:
        pytest.skip("Landlock with network rules is not available on this kernel")
    outside = tmp_path / "raw"
    code = attack(
        f"""
        import ctypes
        libc = ctypes.CDLL(None)
        fd = libc.open({str(outside).encode()!r}, 0o101, 0o644)  # O_WRONLY | O_CREAT
        sock = libc.socket(2, 1, 0)
        pid = libc.fork()
        if pid == 0:
            libc._exit(0)
        raise RuntimeError("raw: open=%d socket=%d fork=%d" % (fd, sock, pid))
        """
    )
    res = run_sandboxed(job(code, bars), RUNTIME_ONLY).result
    assert res.status == JobStatus.ERROR
    assert "raw: open=-1 socket=-1 fork=-1" in res.error, res.error
    assert not outside.exists()


@pytest.mark.integration
def test_exit_and_crash_are_errors_not_deaths(bars: pd.DataFrame) -> None:
    for code, fragment in ((src.EXITS_PROCESS, "exited with code 1"), (src.SYS_EXIT, "SystemExit")):
        res = run_sandboxed(job(code, bars), RUNTIME_ONLY).result
        assert res.status == JobStatus.ERROR and fragment in res.error, res.error
    segv = attack("import ctypes\nctypes.string_at(0)")
    res = run_sandboxed(job(segv, bars), RUNTIME_ONLY).result
    assert res.status == JobStatus.ERROR and "SIGSEGV" in res.error


@pytest.mark.integration
def test_sandboxed_result_equals_in_process(bars: pd.DataFrame) -> None:
    direct = run_job(job(src.SMA_CROSS, bars))
    boxed = run_sandboxed(job(src.SMA_CROSS, bars)).result
    assert boxed.model_dump(exclude={"duration_s"}) == direct.model_dump(exclude={"duration_s"})


@pytest.mark.integration
def test_temp_dir_is_cwd_and_removed(bars: pd.DataFrame) -> None:
    code = attack(
        """
        import os
        open("scratch.txt", "w").write("ok")
        raise RuntimeError("cwd=" + os.getcwd())
        """
    )
    res = run_sandboxed(job(code, bars), RUNTIME_ONLY).result
    cwd = res.error.split("cwd=")[1].split()[0]
    assert cwd.startswith(("/tmp", os.environ.get("TMPDIR", "/tmp"))) and not Path(cwd).exists()


@pytest.mark.integration
def test_launch_environment_block_is_not_readable() -> None:
    """A secret in the worker's *launch* environment (what /proc/PID/environ shows)."""
    script = textwrap.dedent(
        f"""
        import json, sys
        sys.path[:0] = [{str(REPO_ROOT / "tests")!r}, {str(REPO_ROOT / "tests" / "backtest")!r}]
        from test_bt_sandbox import attack, job, read_real_bars
        from backtest.sandbox import SandboxPolicy, run_sandboxed
        body = '''
        import os
        seen = [os.environ.get("OPENAI_API_KEY")]
        for path in PATHS:
            try:  # _io.FileIO: past the Python-level open() guard
                data = __import__("_io").FileIO(path).read()
                seen.append("LEAK" if b"OPENAI_API_KEY" in data else "clean")
            except OSError as exc:
                seen.append(type(exc).__name__)
        raise RuntimeError(repr(seen))
        '''
        bars = read_real_bars("AAPL", "2015-01-01", "2015-12-31")
        # Without kernel guards only the own (zeroed) block is safe to read; with
        # them (Landlock) the parent's is unreadable too.
        for kernel, paths in ((False, ["/proc/self/environ"]),
                              (True, ["/proc/self/environ", "/proc/%d/environ" % __import__("os").getpid()])):
            code = attack(body.replace("PATHS", repr(paths)))
            res = run_sandboxed(job(code, bars), SandboxPolicy(validate=False, kernel=kernel))
            print(json.dumps(res.result.error))
        """
    )
    env = {**os.environ, "OPENAI_API_KEY": SECRET}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    errors = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert len(errors) == 2 and all("RuntimeError" in e and SECRET not in e for e in errors)
    # Own block: zeroed ("clean"), or unreadable once the child dropped root.
    assert "LEAK" not in errors[0] and ("clean" in errors[0] or "PermissionError" in errors[0])
    assert "LEAK" not in errors[1] and errors[1].count("PermissionError") == 2, errors[1]


@pytest.mark.unit
def test_seccomp_program_shape() -> None:
    prog = seccomp_program()
    assert len(prog) < 255 and prog[-1] == (0x06, 0, 0, 0x7FFF0000)
    assert all(0 <= jt < 256 and 0 <= jf < 256 for _, jt, jf, _ in prog)


def _run_bpf(prog: list[tuple[int, int, int, int]], nr: int, args=(), arch=0xC000003E) -> int:
    """A tiny classic-BPF interpreter for the opcodes the filter uses, over seccomp_data."""
    words = {0: nr, 4: arch}
    for i, arg in enumerate([*args, 0, 0, 0, 0, 0, 0][:6]):
        words[16 + 8 * i], words[20 + 8 * i] = arg & 0xFFFFFFFF, arg >> 32
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # ld [k]
            acc, pc = words[k], pc + 1
        elif code == 0x06:  # ret k
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)


ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050001, 0x00050026


@pytest.mark.unit
@pytest.mark.parametrize(
    ("nr", "args", "arch", "want"),
    [
        (0, (), 0xC000003E, ALLOW),  # read
        (16, (0, 0x5401), 0xC000003E, ALLOW),  # ioctl TCGETS
        (16, (2, 0x5412), 0xC000003E, EPERM),  # ioctl TIOCSTI
        (16, (2, 0x1_0000_5412), 0xC000003E, EPERM),  # high bits ignored, as by the kernel
        (16, (2, 0x541C), 0xC000003E, EPERM),  # TIOCLINUX
        (141, (0, 0, 10), 0xC000003E, ALLOW),  # setpriority: nicer is fine
        (141, (0, 0, (-15) & 0xFFFFFFFF), 0xC000003E, EPERM),  # setpriority -15
        (144, (0, 1, 0), 0xC000003E, EPERM),  # sched_setscheduler
        (56, (0x00010000 | 0x00000100,), 0xC000003E, ALLOW),  # clone of a thread
        (56, (17,), 0xC000003E, EPERM),  # clone of a process (SIGCHLD)
        (435, (), 0xC000003E, ENOSYS),  # clone3: glibc falls back to clone
        (56, (0x10000000 | 17,), 0xC000003E, EPERM),  # clone into a new user namespace
        (72, (3, 1), 0xC000003E, ALLOW),  # fcntl F_GETFD
        (72, (3, 4), 0xC000003E, ALLOW),  # fcntl F_SETFL
        *[(72, (3, cmd), 0xC000003E, EPERM) for cmd in (5, 6, 7, 36, 37, 38, 1024, 1026)],
        (0x40000000 | 59, (), 0xC000003E, EPERM),  # x32 ABI
        (1, (), 0x40000003, EPERM),  # i386 ABI
        *[(nr, (), 0xC000003E, EPERM) for nr in sorted(BLOCKED_SYSCALLS.values())],
    ],
)
def test_seccomp_program_decides(nr: int, args: tuple, arch: int, want: int) -> None:
    assert _run_bpf(seccomp_program(), nr, args, arch) == want


@pytest.mark.unit
@pytest.mark.parametrize(
    ("nr", "args", "want"),
    [
        (56, (17,), ALLOW),  # a batch child forks one process per job
        (57, (), ALLOW),  # fork
        (56, (0x00010000 | 0x00000100,), ALLOW),  # a thread
        (56, (0x00020000 | 17,), EPERM),  # but no namespace
        (59, (), EPERM),  # nor exec
        (319, (), EPERM),  # memfd_create
        (72, (3, 6), EPERM),  # F_SETLK
    ],
)
def test_the_batch_childs_filter_allows_processes_only(nr: int, args: tuple, want: int) -> None:
    assert _run_bpf(seccomp_program(processes=True), nr, args) == want


def _stacked(nr: int, args: tuple = (), arch: int = 0xC000003E) -> int:
    """What the kernel answers a job process of a batch child: every stacked filter runs and
    the most restrictive action wins (an errno is more restrictive than allow)."""
    answers = [
        _run_bpf(p, nr, args, arch)
        for p in (seccomp_program(processes=True), job_seccomp_program())
    ]
    refused = [a for a in answers if a != ALLOW]
    return refused[0] if refused else ALLOW


@pytest.mark.unit
@pytest.mark.parametrize(
    ("nr", "args", "arch"),
    [
        (0, (), 0xC000003E),
        (56, (17,), 0xC000003E),  # clone of a process
        (56, (0x00010000 | 0x00000100,), 0xC000003E),  # a thread
        (56, (0x00010000 | 0x00020000,), 0xC000003E),  # a thread in a new namespace
        (56, (0x1_0000_0000 | 17,), 0xC000003E),  # high bits of the flags ignored
        (435, (), 0xC000003E),  # clone3
        (16, (2, 0x5412), 0xC000003E),
        (141, (0, 0, (-15) & 0xFFFFFFFF), 0xC000003E),
        (72, (3, 6), 0xC000003E),
        (0x40000000 | 57, (), 0xC000003E),  # x32 fork
        (57, (), 0x40000003),  # i386
        *[(nr, (), 0xC000003E) for nr in sorted(BLOCKED_SYSCALLS.values())],
    ],
)
def test_a_job_process_filter_stacked_on_the_batch_childs_is_the_full_filter(
    nr: int, args: tuple, arch: int
) -> None:
    assert _stacked(nr, args, arch) == _run_bpf(seccomp_program(), nr, args, arch)


@pytest.mark.unit
def test_a_job_process_cannot_leave_the_batch_childs_process_group() -> None:
    """``setpgid`` is refused to a job process (the parent kills the batch child's group
    whole: a group of its own outlived the batch); its other answers stay the full filter's."""
    assert _stacked(109, (0, 0)) == EPERM
    assert _run_bpf(job_seccomp_program(), 57) == EPERM  # fork
    assert _run_bpf(job_seccomp_program(), 0) == ALLOW  # read: the batch filter decides


@pytest.mark.integration
def test_a_crash_message_carries_the_tail_of_the_output(bars: pd.DataFrame) -> None:
    code = attack('import os\nos.write(2, b"x" * 100000 + b" last words")\nos._exit(7)')
    res = run_sandboxed(job(code, bars), RUNTIME_ONLY).result
    assert "exited with code 7" in res.error and res.error.endswith("last words"), res.error
