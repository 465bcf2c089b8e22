"""Sealed holdout and walk-forward folds on a bar calendar.

The last ``holdout_frac`` of the calendar is sealed: the development loop only
ever gets in-sample folds; ``holdout_fold`` is opened once, for the winner.
Splits are made on whole days so intraday bars of one day never straddle two
windows (for daily bars a day is a bar).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date
from typing import Literal

import pandas as pd
from pydantic import BaseModel, model_validator

from backtest.contracts import Fold
from backtest.errors import DataError

HOLDOUT_FOLD_INDEX = 99  # Fold.index of the sealed holdout (walk-forward folds are 0..n-1)
MIN_FOLD_BARS = 20


class TimeSplit(BaseModel):
    insample_start: date
    insample_end: date
    holdout_start: date
    holdout_end: date

    @model_validator(mode="after")
    def _ordered(self) -> TimeSplit:
        if not (self.insample_start <= self.insample_end < self.holdout_start <= self.holdout_end):
            raise ValueError(
                "TimeSplit must satisfy insample_start <= insample_end < holdout_start"
            )
        return self

    @property
    def insample_cutoff(self) -> pd.Timestamp:
        """The last instant of ``insample_end``: a split is made on whole days, so an
        intraday day's last bar is in-sample, as the last fold's is."""
        return pd.Timestamp(self.insample_end) + pd.Timedelta(days=1) - pd.Timedelta(1)

    def insample_bars(self, bars: pd.DataFrame) -> pd.DataFrame:
        """The bars research and every in-sample decision may read: the holdout stays
        sealed. The one in-sample cut every consumer uses."""
        return bars.loc[: self.insample_cutoff]


def _days(index: pd.DatetimeIndex) -> pd.DatetimeIndex:
    """Sorted unique trading days of ``index``."""
    return pd.DatetimeIndex(index).normalize().unique().sort_values()


def _bars_per_day(index: pd.DatetimeIndex) -> float:
    days = pd.DatetimeIndex(index).normalize()
    return float(pd.Series(1, index=days).groupby(level=0).size().median()) if len(days) else 1.0


def common_calendar(
    frames: Iterable[pd.DataFrame], how: Literal["intersection", "union"] = "intersection"
) -> pd.DatetimeIndex:
    """The bar calendar shared by several symbols' frames.

    ``intersection`` (default) keeps only timestamps every symbol has, so every
    fold holds bars for every symbol.
    """
    result: pd.DatetimeIndex | None = None
    for frame in frames:
        idx = pd.DatetimeIndex(frame.index)
        if result is None:
            result = idx
        else:
            result = result.intersection(idx) if how == "intersection" else result.union(idx)
    if result is None:
        raise ValueError("common_calendar needs at least one frame")
    return result.sort_values().unique()


def split_holdout(index: pd.DatetimeIndex, holdout_frac: float = 0.2) -> TimeSplit:
    """Seal the last ``holdout_frac`` of the calendar (by days) as the holdout."""
    if not 0 < holdout_frac < 0.9:
        raise ValueError(f"holdout_frac must be in (0, 0.9), got {holdout_frac}")
    days = _days(index)
    if len(days) < 10:
        raise DataError(
            f"--start/--end: only {len(days)} trading days in the range; "
            "a holdout split needs at least 10, widen the date range"
        )
    n_hold = max(1, round(len(days) * holdout_frac))
    insample, holdout = days[:-n_hold], days[-n_hold:]
    return TimeSplit(
        insample_start=insample[0].date(),
        insample_end=insample[-1].date(),
        holdout_start=holdout[0].date(),
        holdout_end=holdout[-1].date(),
    )


def walk_forward_folds(
    index: pd.DatetimeIndex,
    split: TimeSplit,
    n_folds: int = 3,
    warmup_bars: int = 200,
    min_fold_bars: int = MIN_FOLD_BARS,
) -> list[Fold]:
    """Contiguous, equal, non-overlapping folds inside the in-sample window.

    The first ``warmup_bars`` in-sample bars only warm indicators up; any
    remainder of the equal division is added to that lead-in, so the last fold
    ends on ``insample_end``. Each fold's warm-up starts ``warmup_bars`` before
    it (overlapping the previous fold is fine: warm-up is never scored) but never
    before ``insample_start``.
    """
    if n_folds < 1:
        raise ValueError(f"n_folds must be >= 1, got {n_folds}")
    if warmup_bars < 0:
        raise ValueError(f"warmup_bars must be >= 0, got {warmup_bars}")
    days = _days(index)
    insample = days[
        (days >= pd.Timestamp(split.insample_start)) & (days <= pd.Timestamp(split.insample_end))
    ]
    per_day = _bars_per_day(index)
    warm_days = math.ceil(warmup_bars / per_day)
    fold_days_min = math.ceil(min_fold_bars / per_day)
    need = warm_days + n_folds * fold_days_min
    if len(insample) < need:
        raise DataError(
            f"--start/--end: {n_folds} walk-forward folds of >= {min_fold_bars} bars after "
            f"{warmup_bars} warm-up bars need {need} in-sample days, the range has "
            f"{len(insample)} (~{math.ceil(need / (1 - _holdout_share(days, split)))} in total "
            "with the holdout); widen the date range, or lower --folds / the warm-up"
        )
    size = (len(insample) - warm_days) // n_folds
    first = len(insample) - n_folds * size
    folds = []
    for i in range(n_folds):
        s = first + i * size
        folds.append(
            Fold(
                index=i,
                warmup_start=insample[max(0, s - warm_days)].date(),
                start=insample[s].date(),
                end=insample[s + size - 1].date(),
            )
        )
    return folds


def _holdout_share(days: pd.DatetimeIndex, split: TimeSplit) -> float:
    hold = (
        (days >= pd.Timestamp(split.holdout_start)) & (days <= pd.Timestamp(split.holdout_end))
    ).sum()
    return min(float(hold) / max(len(days), 1), 0.9)


def holdout_fold(index: pd.DatetimeIndex, split: TimeSplit, warmup_bars: int = 200) -> Fold:
    """The sealed holdout as a Fold (index ``HOLDOUT_FOLD_INDEX`` = 99).

    Its warm-up comes from the in-sample tail, which is legitimate: those bars
    precede the holdout, and nothing is scored on them.
    """
    days = _days(index)
    hold_start = pd.Timestamp(split.holdout_start)
    if not ((days >= hold_start) & (days <= pd.Timestamp(split.holdout_end))).any():
        raise DataError(
            f"--start/--end: no bars in the holdout {split.holdout_start}..{split.holdout_end}"
        )
    pos = int(days.searchsorted(hold_start))
    warm_days = math.ceil(warmup_bars / _bars_per_day(index))
    return Fold(
        index=HOLDOUT_FOLD_INDEX,
        warmup_start=days[max(0, pos - warm_days)].date(),
        start=split.holdout_start,
        end=split.holdout_end,
    )
