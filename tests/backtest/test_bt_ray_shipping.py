"""Bars reach a Ray cluster once per run (``backtest.executors.ray_shipping``): a chunk carries
slots, each frame is put once and rebuilt in the worker; a bounded number stay shipped."""

from __future__ import annotations

import itertools
from datetime import date

import numpy as np
import pandas as pd
import pytest

import backtest.executors.ray_shipping as shipping
from backtest.contracts import BacktestJob, Fold
from backtest.executors.ray_shipping import Bars, Slot, unpack

pytestmark = pytest.mark.unit

FOLD = Fold(index=0, warmup_start=date(2020, 1, 1), start=date(2020, 2, 1), end=date(2020, 6, 30))


class FakeRay:
    """``ray.put`` as the shipping sees it: a reference per call, the calls counted."""

    def __init__(self) -> None:
        self.puts: list[pd.DataFrame] = []
        self._ids = itertools.count()

    def put(self, frame: pd.DataFrame) -> str:
        self.puts.append(frame)
        return f"ref{next(self._ids)}"


def _frame(seed: int) -> pd.DataFrame:
    idx = pd.bdate_range("2020-01-01", periods=150)
    close = 100 + np.random.default_rng(seed).standard_normal(len(idx)).cumsum()
    return pd.DataFrame(
        {"open": close, "high": close + 1, "low": close - 1, "close": close, "volume": 1e6},
        index=idx,
    )


def _job(k: int, bars) -> BacktestJob:
    return BacktestJob(job_id=f"j{k}", variant_id="v", code="x", symbol="S", bars=bars, fold=FOLD)


def test_each_frame_is_put_once_and_rebuilt_in_the_worker() -> None:
    a, b = _frame(1), _frame(2)
    ray = FakeRay()
    bars = Bars(ray)
    jobs = [_job(0, a), _job(1, b), _job(2, a), _job(3, {"A": a, "B": b})]
    packed, refs = bars.pack(jobs)
    assert refs == ["ref0", "ref1"] and [id(f) for f in ray.puts] == [id(a), id(b)]
    assert packed[0].bars == Slot(0) and packed[2].bars == Slot(0)
    assert packed[3].bars == {"A": Slot(0), "B": Slot(1)}
    # A later chunk (the next iteration) puts nothing new: its slots point at the same refs.
    again, refs2 = bars.pack([_job(4, b), _job(5, a)])
    assert len(ray.puts) == 2 and refs2 == ["ref1", "ref0"]
    assert again[0].bars == Slot(0) and again[1].bars == Slot(1)
    assert bars.stats.frames == 2 and bars.stats.tasks == 2 and bars.stats.jobs == 6
    assert bars.stats.frame_bytes == sum(
        int(f.memory_usage(index=True, deep=True).sum()) for f in (a, b)
    )
    # The worker's side: the resolved frames in the slots' order.
    rebuilt = unpack(packed, (a, b))
    assert rebuilt[0].bars is a and rebuilt[1].bars is b and rebuilt[3].bars == {"A": a, "B": b}
    assert [j.job_id for j in rebuilt] == [j.job_id for j in jobs]


def test_the_shipped_frames_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(shipping, "MAX_FRAMES", 2)
    frames = [_frame(k) for k in range(3)]
    ray = FakeRay()
    bars = Bars(ray)
    for f in frames:
        bars.pack([_job(0, f)])
    assert len(ray.puts) == 3
    bars.pack([_job(0, frames[2])])  # still shipped: nothing put
    assert len(ray.puts) == 3
    bars.pack([_job(0, frames[0])])  # the least recently used was dropped: put again
    assert len(ray.puts) == 4 and ray.puts[-1] is frames[0]
    bars.clear()
    bars.pack([_job(0, frames[2])])
    assert len(ray.puts) == 5
