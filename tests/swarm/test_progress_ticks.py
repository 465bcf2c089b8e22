"""The backtest counter: a line at every fifth of the batch, and at least every interval."""

from __future__ import annotations

import io
import time

import pytest

from swarm.progress import Progress

pytestmark = pytest.mark.unit


def _lines(out: io.StringIO) -> list[str]:
    return [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]


def test_a_line_at_every_fifth_of_the_batch() -> None:
    out = io.StringIO()
    progress = Progress(out, interval_s=3600)
    progress.start_batch(10)
    for _ in range(10):
        progress.tick()
    assert progress.done == 10
    assert _lines(out) == [f"backtests done {n}/10" for n in (2, 4, 6, 8, 10)]


def test_a_line_per_job_when_the_interval_has_passed() -> None:
    """A long batch still shows each streamed result once the interval is over."""
    out = io.StringIO()
    progress = Progress(out, interval_s=0.0)
    progress.start_batch(100)
    for _ in range(3):
        progress.tick()
    assert _lines(out) == [f"backtests done {n}/100" for n in (1, 2, 3)]


def test_a_heartbeat_during_a_silent_stage() -> None:
    """A stage that prints nothing for the heartbeat's interval says it is still running."""
    out = io.StringIO()
    progress = Progress(out)
    progress.stage("research", "round 1")
    with progress.heartbeat(every_s=0.05):
        time.sleep(0.3)
    beats = [line for line in _lines(out) if "still in research" in line]
    assert beats and "nothing new for" in beats[0]
    n = len(out.getvalue().splitlines())
    time.sleep(0.15)
    assert len(out.getvalue().splitlines()) == n  # stopped with the block


def test_warnings_show_even_when_quiet() -> None:
    out = io.StringIO()
    progress = Progress(out, quiet=True)
    progress.stage("data", "not shown")
    progress.warn("TEST: data starts 2018-01-02")
    with progress.heartbeat(every_s=0.01):
        time.sleep(0.05)
    assert _lines(out) == ["TEST: data starts 2018-01-02"]
