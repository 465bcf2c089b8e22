"""Sealed holdout and walk-forward folds."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from backtest.contracts import Fold
from backtest.errors import DataError
from backtest.splits import (
    HOLDOUT_FOLD_INDEX,
    TimeSplit,
    common_calendar,
    holdout_fold,
    split_holdout,
    walk_forward_folds,
)

pytestmark = pytest.mark.unit

INDEX = pd.bdate_range("2010-01-01", periods=2000, name="date")


def _positions(fold: Fold) -> tuple[int, int, int]:
    loc = INDEX.get_loc
    return (
        loc(pd.Timestamp(fold.warmup_start)),
        loc(pd.Timestamp(fold.start)),
        loc(pd.Timestamp(fold.end)),
    )


def test_holdout_is_the_last_20_percent() -> None:
    split = split_holdout(INDEX)
    assert split.holdout_end == INDEX[-1].date() and split.insample_start == INDEX[0].date()
    assert split.holdout_start == INDEX[1600].date() and split.insample_end == INDEX[1599].date()
    with pytest.raises(ValueError):
        TimeSplit(
            insample_start=date(2020, 1, 1),
            insample_end=date(2020, 6, 1),
            holdout_start=date(2020, 5, 1),
            holdout_end=date(2020, 12, 1),
        )


def test_folds_are_in_sample_contiguous_equal_and_disjoint() -> None:
    split = split_holdout(INDEX)
    folds = walk_forward_folds(INDEX, split, n_folds=3, warmup_bars=200)
    assert [f.index for f in folds] == [0, 1, 2]
    spans = [_positions(f) for f in folds]
    sizes = {end - start + 1 for _, start, end in spans}
    assert sizes == {(1600 - 200) // 3}  # equal bar counts
    assert spans[0][1] >= 200  # first fold after the warm-up
    assert spans[-1][2] == 1599  # last fold ends at the in-sample end
    for (_, _, end), (_, nxt, _) in zip(spans, spans[1:], strict=False):
        assert nxt == end + 1  # contiguous, no overlap
    for fold, (warm, start, _) in zip(folds, spans, strict=True):
        assert fold.end <= split.insample_end < split.holdout_start  # never touches the holdout
        assert warm == max(0, start - 200) and fold.warmup_start >= split.insample_start


def test_holdout_fold_takes_warmup_from_the_in_sample_tail() -> None:
    split = split_holdout(INDEX)
    fold = holdout_fold(INDEX, split, warmup_bars=200)
    assert fold.index == HOLDOUT_FOLD_INDEX == 99
    assert (fold.start, fold.end) == (split.holdout_start, split.holdout_end)
    assert _positions(fold)[0] == 1400


def test_too_short_range_says_how_many_bars_are_needed() -> None:
    short = INDEX[:300]
    with pytest.raises(DataError, match=r"need 260 in-sample days, the range has 240"):
        walk_forward_folds(short, split_holdout(short), n_folds=3, warmup_bars=200)
    with pytest.raises(DataError, match="at least 10"):
        split_holdout(INDEX[:5])


def test_intraday_splits_on_whole_days() -> None:
    hours = pd.DatetimeIndex(
        [
            d + pd.Timedelta(hours=h)
            for d in pd.bdate_range("2020-01-01", periods=300)
            for h in range(7)
        ]
    )
    split = split_holdout(hours)
    assert split.insample_end < split.holdout_start
    folds = walk_forward_folds(hours, split, n_folds=2, warmup_bars=70)  # 10 days
    assert folds[0].start > folds[0].warmup_start and folds[1].start > folds[0].end


def test_common_calendar() -> None:
    a = pd.DataFrame(index=pd.bdate_range("2020-01-01", periods=10))
    b = pd.DataFrame(index=pd.bdate_range("2020-01-06", periods=10))
    assert len(common_calendar([a, b])) == 7
    assert len(common_calendar([a, b], how="union")) == 13


def test_one_in_sample_cut_keeps_an_hourly_day_whole() -> None:
    """Research, regime and decision frames all cut through ``TimeSplit.insample_bars``: for
    hourly bars the last in-sample day is in whole, as the last fold (which ends on that day)
    backtests it. Slicing at ``Timestamp(insample_end)`` (midnight) dropped its 7 bars."""
    from types import SimpleNamespace

    from swarm.context import RunContext

    days = pd.bdate_range("2021-01-04", periods=120)
    hours = pd.DatetimeIndex([d + pd.Timedelta(hours=h) for d in days for h in range(9, 16)])
    frame = pd.DataFrame({"close": range(len(hours))}, index=hours, dtype=float)
    split = split_holdout(hours)
    last_fold = walk_forward_folds(hours, split, n_folds=2, warmup_bars=70)[-1]
    assert last_fold.end == split.insample_end
    cut = split.insample_bars(frame)
    last_day = cut.index[cut.index.normalize() == pd.Timestamp(split.insample_end)]
    assert len(last_day) == 7 and cut.index[-1] < pd.Timestamp(split.holdout_start)
    ctx = SimpleNamespace(data={"X": SimpleNamespace(bars=frame)}, split=split)
    assert RunContext.insample_bars(ctx, "X").equals(cut)
    daily = frame.groupby(frame.index.normalize()).last()  # a daily frame: the same cut as before
    assert split.insample_bars(daily).equals(daily.loc[: pd.Timestamp(split.insample_end)])
