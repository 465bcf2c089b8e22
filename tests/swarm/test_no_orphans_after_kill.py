"""A SIGKILLed develop leaves no process behind: its forkserver and pool workers die with it
(kill tests and crashed runs used to leave idle ~200 MB workers running)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descendants(root: int) -> set[int]:
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    found, frontier = set(), {root}
    while frontier:
        children = {p for p in pids if _ppid(p) in frontier} - found
        found |= children
        frontier = children
    return found


def _kill_and_expect_gone(proc: subprocess.Popen, helpers: set[int]) -> None:
    """SIGKILL ``proc``; every one of ``helpers`` must be gone within 15 s."""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in helpers):
        time.sleep(0.2)
    alive = [p for p in helpers if Path(f"/proc/{p}").exists() and _ppid(p) is not None]
    assert not alive, f"left behind: {alive}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_killed_develop_leaves_no_workers(daily_dir, tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "momentum",
            "--tickers",
            "AAPL,MSFT",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2012-01-01",
            "--end",
            "2020-12-01",
            "--workers",
            "2",
            "--offline",
            "--memory-dir",
            "off",
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # wait until backtests run, i.e. the pool exists
        if "[backtest]" in line or time.monotonic() > deadline:
            break
    helpers = _descendants(proc.pid)
    assert helpers, "no worker processes found while backtests ran"
    _kill_and_expect_gone(proc, helpers)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_killed_calibration_leaves_no_runs(tmp_path):
    """Its runs are spawned processes (orphaned, they went on to the end of their run)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm.calibrate",
            "--runs",
            "1",
            "--workers",
            "2",
            "--kinds",
            "null-zero,null-bull",
            "--symbols",
            "2",
            "--years",
            "3",
            "--quiet",
            "--out",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    helpers: set[int] = set()
    while time.monotonic() < deadline and len(helpers) < 2:
        time.sleep(0.5)
        helpers = _descendants(proc.pid)
    assert len(helpers) >= 2, "the calibration's run processes never started"
    _kill_and_expect_gone(proc, helpers)
