"""Every reader of the in-sample window cuts it through ``TimeSplit.insample_bars``.

Issue 25: the window was once cut four ways, and the cuts at midnight of ``insample_end``
dropped the last in-sample day of hourly bars (7 bars) while the last fold backtests that
day. These pin each consumer to the one cut on hourly bars, and keep a fifth cut from
being written by hand.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from backtest.splits import TimeSplit, split_holdout, walk_forward_folds
from swarm.memo import RunMemo

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("altdata", "backtest", "experiments", "gate", "strategies", "swarm", "benchmarks")
HOURS = range(9, 16)  # seven bars a day


def _hourly() -> tuple[pd.DataFrame, TimeSplit]:
    days = pd.bdate_range("2021-01-04", periods=120)
    index = pd.DatetimeIndex([d + pd.Timedelta(hours=h) for d in days for h in HOURS])
    frame = pd.DataFrame({"close": range(len(index))}, index=index, dtype=float)
    return frame, split_holdout(index)


def _consumers() -> dict[str, object]:
    from swarm.analyze.family import insample_bars as family_bars
    from swarm.context import RunContext
    from swarm.regime_data import index_bars
    from swarm.research.__main__ import ResearchRunContext

    return {
        "RunContext.insample_bars": lambda ctx: RunContext.insample_bars(ctx, "X"),
        "ResearchRunContext.insample_bars": lambda ctx: ResearchRunContext.insample_bars(ctx, "X"),
        "regime_data.index_bars": lambda ctx: index_bars(ctx, "X"),
        "analyze.family.insample_bars": lambda ctx: family_bars(ctx)["X"],
    }


@pytest.mark.parametrize("name", list(_consumers()))
def test_each_consumer_keeps_the_last_hourly_in_sample_day_whole(name: str) -> None:
    frame, split = _hourly()
    assert walk_forward_folds(frame.index, split, n_folds=2, warmup_bars=70)[-1].end == (
        split.insample_end
    )
    ctx = SimpleNamespace(
        data={"X": SimpleNamespace(bars=frame)}, split=split, symbols=["X"], memo=RunMemo()
    )
    cut = _consumers()[name](ctx)
    assert cut.equals(split.insample_bars(frame))
    last_day = cut.index[cut.index.normalize() == pd.Timestamp(split.insample_end)]
    assert len(last_day) == len(HOURS)
    assert cut.index[-1] < pd.Timestamp(split.holdout_start)


# A date cut made from the split's end by hand: ``Timestamp(split.insample_end)`` and the like.
HAND_CUT = re.compile(r"Timestamp\(\s*[\w.]*insample_end")


def test_no_module_cuts_the_in_sample_window_by_hand() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for pkg in PACKAGES
        for path in sorted((ROOT / pkg).rglob("*.py"))
        if path.relative_to(ROOT).as_posix() != "backtest/splits.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HAND_CUT.search(line)
    ]
    assert not found, "cut the in-sample window with TimeSplit.insample_bars: " + ", ".join(found)
