"""FramePandasData loads exactly what bt.feeds.PandasData loads; trimmed jobs run the same."""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import backtest.engine as engine
from backtest.compat import import_backtrader
from backtest.contracts import BacktestJob, Fold
from backtest.engine import execute, trim_bars
from backtest.feed import FramePandasData
from strategies.codegen import render
from strategies.families import default_spec
from strategies.spec import Family

bt = import_backtrader()

FIELDS = ("datetime", "open", "high", "low", "close", "volume", "openinterest")


class _Idle(bt.Strategy):
    pass


def _loaded_lines(feed_cls: type, frame: pd.DataFrame, **kwargs: object) -> dict[str, list]:
    cerebro = bt.Cerebro(stdstats=False, preload=True, runonce=True)
    cerebro.adddata(feed_cls(dataname=frame, **kwargs))
    cerebro.addstrategy(_Idle)
    data = cerebro.run()[0].datas[0]
    return {name: list(getattr(data.lines, name).array) for name in FIELDS}


def _same(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b, strict=True)
    )


finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)
cells = st.one_of(finite, st.just(float("nan")))


@pytest.mark.unit
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=1, max_value=40),
    step_minutes=st.sampled_from([1, 37, 60, 390, 1440]),
    tz=st.sampled_from([None, "UTC", "America/New_York"]),
    values=st.lists(cells, min_size=240, max_size=240),
    with_oi=st.booleans(),
)
def test_same_lines_as_pandasdata(
    n: int, step_minutes: int, tz: str | None, values: list[float], with_oi: bool
) -> None:
    index = pd.date_range("2021-03-10 09:30", periods=n, freq=f"{step_minutes}min", tz=tz)
    cols = ["open", "high", "low", "close", "volume"] + (["openinterest"] if with_oi else [])
    grid = np.array(values[: n * len(cols)]).reshape(n, len(cols))
    frame = pd.DataFrame(grid, index=index, columns=cols)
    kwargs = {} if with_oi else {"openinterest": None}
    ours = _loaded_lines(FramePandasData, frame, **kwargs)
    plain = _loaded_lines(bt.feeds.PandasData, frame, **kwargs)
    for name in FIELDS:
        assert _same(ours[name], plain[name]), name


@pytest.mark.unit
def test_datetime_column_instead_of_index() -> None:
    frame = pd.DataFrame(
        {
            "when": pd.date_range("2020-01-01 10:00", periods=5, freq="h"),
            "open": [1.0, 2, 3, 4, 5],
            "high": [2.0, 3, 4, 5, 6],
            "low": [0.5, 1, 2, 3, 4],
            "close": [1.5, 2.5, 3.5, 4.5, 5.5],
            "volume": [10.0, 20, 30, 40, 50],
        }
    )
    kwargs = {"datetime": "when", "openinterest": None}
    ours = _loaded_lines(FramePandasData, frame, **kwargs)
    plain = _loaded_lines(bt.feeds.PandasData, frame, **kwargs)
    assert all(_same(ours[name], plain[name]) for name in FIELDS)
    assert ours["close"] == [1.5, 2.5, 3.5, 4.5, 5.5]


def _family_jobs(bars: pd.DataFrame) -> list[BacktestJob]:
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2017, 12, 29)
    )
    return [
        BacktestJob(
            job_id=f"{fam.value}|AAPL|f0",
            variant_id=fam.value,
            code=render(default_spec(fam)),
            symbol="AAPL",
            bars=bars,
            fold=fold,
        )
        for fam in Family
    ]


@pytest.mark.integration
def test_engine_runs_are_bit_identical_to_pandasdata(monkeypatch: pytest.MonkeyPatch) -> None:
    bars = read_real_bars("AAPL", "2010-01-01", "2020-12-31")
    jobs = _family_jobs(bars)
    ours = [execute(job) for job in jobs]
    monkeypatch.setattr(engine, "FramePandasData", bt.feeds.PandasData)
    plain = [execute(job) for job in jobs]
    assert sum(r.result.metrics.n_trades for r in ours) > 0  # the runs traded
    for a, b in zip(ours, plain, strict=True):
        assert a.result.status == b.result.status == "ok"
        assert a.values == b.values  # exact: every bar's broker value
        assert a.fills == b.fills
        assert a.dates == b.dates


@pytest.mark.integration
def test_trimmed_job_gives_the_same_result() -> None:
    bars = read_real_bars("AAPL", "2010-01-01", "2020-12-31")
    job = _family_jobs(bars)[0]
    trimmed = trim_bars(job)
    assert len(trimmed.bars) < len(job.bars) / 2
    assert trimmed.bars.index[0] >= pd.Timestamp(job.fold.warmup_start)
    assert trimmed.bars.index[-1] <= pd.Timestamp(job.fold.end)
    full, cut = execute(job).result, execute(trimmed).result
    assert full.model_dump(exclude={"duration_s"}) == cut.model_dump(exclude={"duration_s"})


@pytest.mark.unit
def test_trim_leaves_malformed_bars_to_the_run() -> None:
    bad = pd.DataFrame({"close": [1.0, 2.0]}, index=pd.date_range("2020-01-01", periods=2))
    job = _family_jobs(bad)[0]
    assert trim_bars(job) is job  # no OHLCV columns: the run reports it, not the trim
    assert execute(job).result.status == "error"
