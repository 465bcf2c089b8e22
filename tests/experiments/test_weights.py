"""Portfolio weights over time from the books' fills (``experiments.weights``)."""

from __future__ import annotations

from datetime import date
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.engine import execute
from experiments.weights import CASH, WeightsError, weights_from_fills
from strategies.codegen import render
from strategies.portfolio import LABEL, portfolio_spec
from strategies.spec import PortfolioFamily


@pytest.mark.unit
def test_weights_by_hand() -> None:
    idx = pd.bdate_range("2021-01-04", periods=4)
    closes = pd.DataFrame({"A": [10.0, 11.0, 12.0, 13.0], "B": [20.0, 20.0, 10.0, 10.0]}, index=idx)
    values = pd.Series([1000.0, 1000.0, 1010.0, 1030.0], index=idx)
    fills = [
        SimpleNamespace(executed=idx[1].date(), symbol="A", size=50.0),
        SimpleNamespace(executed=idx[2].date(), symbol="B", size=-20.0),
        SimpleNamespace(executed=idx[3].date(), symbol="A", size=-50.0),
    ]
    w = weights_from_fills(fills, closes, values)
    assert list(w.columns) == ["A", "B", CASH]
    assert w.loc[idx[0]].tolist() == [0.0, 0.0, 1.0]
    assert w.loc[idx[1], "A"] == pytest.approx(550 / 1000)
    assert w.loc[idx[2], "A"] == pytest.approx(600 / 1010)
    assert w.loc[idx[2], "B"] == pytest.approx(-200 / 1010)
    assert w.loc[idx[3]].tolist() == pytest.approx([0.0, -200 / 1030, 1 + 200 / 1030])
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    with pytest.raises(WeightsError, match="not among"):
        weights_from_fills(
            [SimpleNamespace(executed=idx[0].date(), symbol="Z", size=1.0)], closes, values
        )
    with pytest.raises(WeightsError, match="without bars"):
        weights_from_fills(
            [SimpleNamespace(executed=date(2021, 1, 9), symbol="A", size=1.0)], closes, values
        )


@pytest.mark.integration
def test_weights_of_a_portfolio_run_match_the_broker() -> None:
    """From an engine run's accepted fills: the last bar's weights are the broker's final
    positions at the last close over the final value; weights and cash sum to one."""
    symbols = ("AAPL", "MSFT", "NVDA")
    bars = {s: read_real_bars(s, "2012-01-01", "2015-12-31") for s in symbols}
    fold = Fold(
        index=0, warmup_start=date(2012, 1, 3), start=date(2013, 1, 2), end=date(2015, 12, 31)
    )
    spec = portfolio_spec(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1}, long_short=True
    )
    run = execute(
        BacktestJob(
            job_id="w", variant_id="v", code=render(spec), symbol=LABEL, bars=bars, fold=fold
        )
    )
    assert run.result.status == JobStatus.OK, run.result.error
    dates = pd.DatetimeIndex(pd.to_datetime([d.isoformat() for d in run.dates]))
    closes = pd.DataFrame({s: bars[s]["close"].reindex(dates) for s in symbols})
    w = weights_from_fills(run.fills, closes, pd.Series(run.values, index=dates))
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
    final = run.result.metrics.final_value
    for d in run.strategy.datas:
        size = run.strategy.getposition(d).size
        assert w.iloc[-1][d._name] == pytest.approx(size * closes.iloc[-1][d._name] / final)
    assert (w[list(symbols)] < 0).any().any() and (w[list(symbols)] > 0).any().any()
    assert (
        (w.loc[: pd.Timestamp(fold.start) - pd.Timedelta(days=1), list(symbols)] == 0).all().all()
    )
