"""A batch child lets job k+1 go as soon as job k's process says its line is written, and
kills and reaps job k (and removes its folder) while job k+1 runs: job k's teardown is off
job k+1's critical path, yet job k reaches nothing of job k+1 (each job's Landlock domain
holds only its own folder), a job that says done early is killed, and nothing of a batch
outlives it (its processes are killed, its folders removed)."""

from __future__ import annotations

import os
import re
import time
from datetime import date

import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.sandbox import SandboxPolicy, landlock_abi, run_sandboxed_batch, warm_worker
from backtest.sandbox import child as sandbox_child
from backtest.sandbox import process as sandbox_process

pytestmark = pytest.mark.integration

FOLDS = [
    Fold(
        index=i,
        warmup_start=date(2014 + i, 1, 2),
        start=date(2014 + i, 6, 2),
        end=date(2015 + i, 5, 29),
    )
    for i in range(3)
]
POLICY = SandboxPolicy(validate=False)

# Each job says where and when it started, and which process it is.
REPORTS = """
import os, time

import backtrader as bt


class Reports(bt.Strategy):
    def next(self):
        raise RuntimeError("job pid %d cwd %s at %.6f" % (os.getpid(), os.getcwd(), time.monotonic()))
"""

# Each job tries, past the Python guards, to list the batch's temp dir, plant a file there and
# in every other job's folder (the next job's exists while this one runs), to leave the batch
# child's process group (the parent kills that group whole), and to find the previous job's
# folder by its name (it is renamed before this job goes, removed while it runs).
REACHES = """
import ctypes, os

import backtrader as bt


class Reaches(bt.Strategy):
    def next(self):
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            os.listdir("..")
            listed = "yes"
        except OSError:
            listed = "no"
        mine = os.path.basename(os.getcwd())
        previous = os.path.exists("../job-%d" % (int(mine[4:]) - 1))
        planted = libc.open(b"../planted", 0o101, 0o644) >= 0
        for k in range(4):
            if "job-%d" % k != mine:
                planted += libc.open(b"../job-%d/planted" % k, 0o101, 0o644) >= 0
        pgid = libc.setpgid(0, 0)
        raise RuntimeError("pid %d listed %s planted %d setpgid %d previous %d"
                           % (os.getpid(), listed, planted, pgid, previous))
"""

# A job finds its done pipe and says done before writing its line, then goes on running.
SAYS_DONE_EARLY = """
import os, sys, time

import backtrader as bt


class SaysDoneEarly(bt.Strategy):
    def next(self):
        f = sys._getframe()
        while f is not None and "done_w" not in f.f_locals:
            f = f.f_back
        if f is None:
            raise RuntimeError("no done pipe: a job alone in its child")
        os.write(1, b"\\nPID %d\\n" % os.getpid())
        os.write(f.f_locals["done_w"], b"d")
        time.sleep(0.2)
        os.write(1, b"\\nALIVE %d\\n" % os.getpid())
        time.sleep(30)
"""


@pytest.fixture(scope="module", autouse=True)
def _kernel() -> None:
    if landlock_abi() < 1:
        pytest.skip("no Landlock: a batch's jobs run strictly one after the other")
    warm_worker()


@pytest.fixture()
def outputs(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The stdout/stderr tail of every batch child the test's batches fork."""
    got: list[bytes] = []
    spawn = sandbox_process._spawn

    def keep(*args, **kwargs):
        child = spawn(*args, **kwargs)
        got.append(child.output)
        return child

    monkeypatch.setattr(sandbox_process, "_spawn", keep)
    monkeypatch.setattr(sandbox_process, "OUTPUT_TAIL_BYTES", 1 << 16)
    return got


def _jobs(code: str, n: int = 3, timeout_s: float = 300) -> list[BacktestJob]:
    bars = read_real_bars("AAPL", "2014-01-01", "2017-12-31")
    return [
        BacktestJob(
            job_id=f"j{f.index}",
            variant_id="v",
            code=code,
            symbol="AAPL",
            bars=bars,
            fold=f,
            timeout_s=timeout_s,
        )
        for f in FOLDS[:n]
    ]


def _gone(pid: int) -> bool:
    """No such process, or a zombie (dead; its parent, the batch child, is gone too)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except FileNotFoundError:
        return True


def _killed(pids: list[int]) -> bool:
    """Every process in ``pids`` is gone, or exiting and gone within seconds. The parent
    SIGKILLs the batch child's whole group when the batch ends and waits for the batch child
    only: a job's process killed with it may still be tearing down its memory."""
    deadline = time.monotonic() + 5
    while not all(_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_the_next_job_runs_while_the_previous_one_is_reaped(
    monkeypatch: pytest.MonkeyPatch, outputs: list[bytes]
) -> None:
    """Reaping job k (made slow here) happens while job k+1 runs; every folder is removed
    when the batch returns, and every job's process killed."""

    # A default, not a closure: the batch child clears its callers' frames (their cells too).
    def slow_reap(pid: int, folder: str, reap=sandbox_child._reap) -> None:  # in the child
        time.sleep(0.5)
        reap(pid, folder)
        os.write(1, b"\nREAPED %d %.6f %d\n" % (pid, time.monotonic(), os.path.exists(folder)))

    monkeypatch.setattr(sandbox_child, "_reap", slow_reap)
    outs = run_sandboxed_batch(_jobs(REPORTS), POLICY)
    said = [re.search(r"job pid (\d+) cwd (\S+) at ([\d.]+)", o.result.error or "") for o in outs]
    assert all(said), [o.result.error for o in outs]
    pids = [int(m.group(1)) for m in said]
    folders = [m.group(2) for m in said]
    started = [float(m.group(3)) for m in said]
    reaped = {
        int(pid): (float(at), int(left))
        for pid, at, left in re.findall(rb"REAPED (\d+) ([\d.]+) (\d)", outputs[0])
    }
    # Job 1 is reaped while job 2 runs, unless the parent, which has job 2's line (the last),
    # kills the group first; the last job's process ends with its child.
    assert pids[0] in reaped and set(reaped) <= set(pids[:2])
    for k in (1, 2):
        if pids[k - 1] in reaped:
            assert started[k] < reaped[pids[k - 1]][0], "job k+1 waited for job k's teardown"
            assert reaped[pids[k - 1]][1] == 0, "job k's folder outlived its reaping"
    assert len(set(folders)) == 3 and len({os.path.dirname(f) for f in folders}) == 1
    assert [os.path.basename(f) for f in folders] == ["job-0", "job-1", "job-2"]
    assert _killed(pids)
    assert not os.path.exists(os.path.dirname(folders[0]))


def test_a_job_reaches_no_other_jobs_folder_nor_leaves_its_group() -> None:
    outs = run_sandboxed_batch(_jobs(REACHES), POLICY)
    for out in outs:
        assert out.result.status == JobStatus.ERROR, out.result
        assert "listed no planted 0 setpgid -1 previous 0" in (out.result.error or ""), (
            out.result.error
        )
    pids = [int(re.search(r"pid (\d+)", o.result.error or "").group(1)) for o in outs]
    assert _killed(pids)


def test_a_job_saying_done_early_is_killed(outputs: list[bytes]) -> None:
    """Saying done before its line only gets a job killed: its line never comes, the parent
    gives it the timeout verdict (the rest run in a fresh child, where it does the same; the
    last job runs alone in its child, which has no done pipe)."""
    started = time.monotonic()
    outs = run_sandboxed_batch(
        _jobs(SAYS_DONE_EARLY, timeout_s=1), SandboxPolicy(validate=False, grace_s=0.5)
    )
    statuses = [o.result.status for o in outs]
    assert statuses == [JobStatus.TIMEOUT, JobStatus.TIMEOUT, JobStatus.ERROR], outs
    assert "no done pipe" in (outs[2].result.error or "")
    assert time.monotonic() - started < 20
    said = b"".join(outputs)
    pids = [int(p) for p in re.findall(rb"PID (\d+)", said)]
    assert len(pids) == 2 and b"ALIVE" not in said  # killed at once, not after the sleep
    assert _killed(pids)
