"""A set-by-set sweep split over processes (``backtest.screen.split``) is the one-process sweep.

The portfolio screen's sets are split into contiguous chunks, the first computed here and the
others in forked children: the sweep must be the same bit for bit with 1, 2 or 3 processes; a
child that raises, crashes or is killed must cost nothing but time (its chunk computed again
here, or its error raised here); and no child may outlive the call.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from conftest import read_real_bars

from backtest.contracts import CostModel, Fold
from backtest.screen import Unsupported, portfolio_windows_for, screen_sets, split
from strategies.mutate import neighbourhood
from strategies.portfolio import PortfolioFamily, portfolio_spec

pytestmark = pytest.mark.unit

SYMBOLS = ("AAPL", "MSFT", "NVDA", "AMD", "INTC", "CSCO", "ORCL", "IBM")
FOLDS = [
    Fold(index=0, warmup_start=date(2013, 1, 2), start=date(2014, 1, 2), end=date(2015, 6, 30)),
    Fold(index=1, warmup_start=date(2014, 7, 1), start=date(2015, 7, 1), end=date(2016, 12, 30)),
]
KW = {
    "costs": CostModel(commission_pct=0.1, slippage_pct=0.05, borrow_pct=3.0),
    "bars_per_year": 252,
    "periods_per_year": 252,
    "min_trades": 3,
}


@pytest.fixture(scope="module")
def universe():
    frames = {s: read_real_bars(s, "2013-01-01", "2016-12-31") for s in SYMBOLS}
    return portfolio_windows_for(frames, FOLDS)


def test_chunks_are_contiguous_near_equal_and_never_too_small():
    assert split.chunks(100, 2) == [range(0, 50), range(50, 100)]
    assert split.chunks(101, 3) == [range(0, 33), range(33, 67), range(67, 101)]
    assert split.chunks(20, 4, min_sets=8) == [range(0, 10), range(10, 20)]  # 2, not 4
    assert split.chunks(7, 8, min_sets=8) == [range(0, 7)]  # too few for a second process
    assert split.chunks(0, 2) == [range(0, 0)]
    for n, w in [(1000, 2), (999, 7), (16, 16), (33, 2)]:
        parts = split.chunks(n, w, min_sets=1)
        assert [i for p in parts for i in p] == list(range(n))
        assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1


@pytest.mark.parametrize("long_short", [False, True])
def test_a_portfolio_sweep_over_two_or_three_processes_is_the_one_process_sweep(
    universe, long_short
):
    parent = portfolio_spec(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 2}, long_short=long_short
    )
    specs = neighbourhood(parent, 40, seed=(5, 5, int(long_short)), seen=set())
    one = screen_sets(specs, universe, **KW)
    assert len({s.sharpe for s in one.sets}) > 10 and any(s.n_trades for s in one.sets)
    for workers in (2, 3):
        many = screen_sets(specs, universe, workers=workers, **KW)
        assert many.sets == one.sets  # every figure, to the bit
        assert many.ranked == one.ranked and many.dates == one.dates
        assert np.array_equal(many.returns, one.returns)


def _parent_only(pid: int, fn):
    """A compute that runs ``fn`` only in a forked child (``pid``: this process)."""

    def compute(rows: range) -> list[int]:
        if os.getpid() != pid:
            fn()
        return [r * r for r in rows]

    return compute


@pytest.mark.parametrize(
    "fail",
    [
        lambda: os._exit(3),  # a crash
        lambda: os.kill(os.getpid(), signal.SIGKILL),  # killed (the OOM killer, say)
        lambda: 1 / 0,  # an exception
    ],
    ids=["exit", "killed", "raises"],
)
def test_a_child_that_fails_costs_only_time(fail):
    parts = split.chunks(40, 3, min_sets=1)
    got = split.map_chunks(_parent_only(os.getpid(), fail), parts)
    assert got == [[r * r for r in p] for p in parts]


def test_an_error_in_a_childs_chunk_is_raised_here_as_itself(universe):
    good = neighbourhood(
        portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM), 40, seed=(1, 2, 3), seen=set()
    )
    bad = good[-1].model_copy(update={"source_sha": "0" * 64})  # custom code: not screened
    assert len(split.chunks(len(good) + 1, 2)) == 2  # the bad set is in the child's chunk
    with pytest.raises(Unsupported, match="custom code"):
        screen_sets([*good, bad], universe, workers=2, **KW)


def test_no_child_outlives_the_call_when_this_process_stops_waiting(tmp_path: Path):
    pid = os.getpid()
    pids = tmp_path / "pids"

    def compute(rows: range) -> int:
        if os.getpid() == pid:
            time.sleep(0.3)  # the children have started
            raise KeyboardInterrupt  # Ctrl-C while the others still run
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(60)
        return 0

    with pytest.raises(KeyboardInterrupt):
        split.map_chunks(compute, split.chunks(3, 3, min_sets=1))
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2
    for child in children:  # killed and reaped: no process, not even a zombie
        assert not Path(f"/proc/{child}").exists()


def test_a_child_still_running_long_after_this_process_is_killed_and_its_part_done_here():
    parts = split.chunks(30, 3, min_sets=1)
    pid = os.getpid()
    started = time.monotonic()
    got = split.map_chunks(_parent_only(pid, lambda: time.sleep(600)), parts, grace_s=0.5)
    assert got == [[r * r for r in p] for p in parts]
    assert time.monotonic() - started < 30  # its grace, not its sleep


def test_no_finalizer_of_this_processs_garbage_runs_in_a_child(tmp_path: Path):
    import gc

    said = tmp_path / "finalized"

    class Client:  # a connection, say: closing it from a fork would close the parent's
        def __del__(self) -> None:
            with said.open("a") as f:
                f.write(f"{os.getpid()}\n")

    def compute(rows: range) -> int:
        gc.set_threshold(1)  # a child's collections as they would come, sooner
        junk = [[{}] for _ in range(20_000)]  # enough allocations to trigger collections
        return len(rows) + len(junk) * 0

    threshold = gc.get_threshold()
    gc.set_threshold(10**9)  # the cycle stays uncollected garbage here until after the fork
    try:
        a = Client()
        a.me = a  # a reference cycle: only the collector frees it
        del a
        assert split.map_chunks(compute, split.chunks(3, 3, min_sets=1)) == [1, 1, 1]
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert said.read_text().split() == [str(os.getpid())]  # here, once; in no child
