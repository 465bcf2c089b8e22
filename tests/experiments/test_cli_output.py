"""A CLI whose reader closes the pipe early ends quietly (``experiments.cli_output``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.cli_output import BROKEN_PIPE_EXIT, run_cli

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_run_cli_passes_the_exit_code_through():
    assert run_cli(lambda: 2) == 2
    assert run_cli(lambda: None) == 0


def test_a_closed_pipe_is_the_sigpipe_code_not_a_traceback():
    """``python -m swarm.develop --dry-run | head`` with the reader gone before the plan is
    printed: exit 141 and nothing on stderr but the plan's notes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "\n".join(
        [
            "import sys",
            "from experiments.cli_output import run_cli",
            "def main():",
            "    for _ in range(20_000):",  # more than a pipe buffer holds
            "        print('x' * 80)",
            "    return 0",
            "sys.exit(run_cli(main))",
        ]
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    proc.stdout.read(100)  # the reader takes a little, then goes away (`head -c 100`)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == BROKEN_PIPE_EXIT
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_the_develop_cli_ends_quietly_when_its_reader_is_gone(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    corpus = ROOT.parent / "shared" / "data" / "ohlcv" / "crypto"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "hourly breakout on BTC",
            "--data-dir",
            str(corpus),
            "--offline",
            "--dry-run",
            "--quiet",
            "--out",
            str(tmp_path / "runs"),
            "--start",
            "2018-01-01",
            "--end",
            "2020-01-01",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    proc.stdout.close()  # before the plan is printed: the import alone takes longer
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == BROKEN_PIPE_EXIT
    assert "Traceback" not in err, err
