"""The engine on real AAPL bars: fills, costs, warm-up gate, and failures as statuses."""

from __future__ import annotations

from datetime import date

import bt_strategy_sources as src
import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.engine import execute, run_code_on_bars, run_job
from backtest.metrics import compute_metrics, equity_from_returns

pytestmark = pytest.mark.integration

FOLD = Fold(index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30))


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    return read_real_bars("AAPL", "2014-01-01", "2016-12-31")


def _job(code: str, bars: pd.DataFrame, **kw) -> BacktestJob:
    base = dict(job_id="j1", variant_id="v1", code=code, symbol="AAPL", bars=bars, fold=FOLD)
    return BacktestJob(**(base | kw))


def test_fills_at_next_open_plus_slippage(bars: pd.DataFrame) -> None:
    costs = CostModel(commission_pct=0.1, slippage_pct=0.05)
    run = execute(_job(src.SMA_CROSS, bars, costs=costs))
    assert run.result.status == JobStatus.OK, run.result.error
    assert len(run.fills) >= 6
    slip = costs.slippage_pct / 100
    days = list(bars.index.date)
    checked = 0
    for fill in run.fills:
        assert days.index(fill.executed) == days.index(fill.created) + 1  # next bar
        bar = bars.loc[pd.Timestamp(fill.executed)]
        if fill.side == "buy":
            expected = min(bar["open"] * (1 + slip), bar["high"])  # slippage capped at the bar
        else:
            expected = max(bar["open"] * (1 - slip), bar["low"])
        assert fill.price == pytest.approx(expected, rel=1e-12)
        checked += bar["open"] * (1 + slip) <= bar["high"]
        assert fill.commission == pytest.approx(abs(fill.size) * fill.price * 0.001, rel=1e-9)
    assert checked >= 3  # most fills are not at the cap


def test_costs_lower_the_final_value(bars: pd.DataFrame) -> None:
    with_costs = run_job(_job(src.SMA_CROSS, bars, costs=CostModel()))
    free = run_job(_job(src.SMA_CROSS, bars, costs=CostModel(commission_pct=0, slippage_pct=0)))
    assert with_costs.status == free.status == JobStatus.OK
    assert with_costs.metrics.n_trades == free.metrics.n_trades > 0
    assert with_costs.metrics.final_value < free.metrics.final_value


def test_no_order_before_fold_start(bars: pd.DataFrame) -> None:
    run = execute(_job(src.BUY_EVERY_BAR, bars))
    assert run.result.status == JobStatus.OK
    assert run.dates[0] == date(2014, 1, 2)  # warm-up bars were fed
    first = run.fills[0]
    assert first.created == date(2015, 1, 2) and first.executed == date(2015, 1, 5)
    assert all(f.created >= FOLD.start for f in run.fills)
    # untouched cash until the first fill: the equity base is the starting cash
    res = run.result
    assert res.return_dates[0] == "2015-01-02" and res.return_dates[-1] == "2016-12-30"
    assert res.returns[0] == 0.0 and len(res.returns) == res.metrics.n_obs == 504


def test_result_series_are_consistent(bars: pd.DataFrame) -> None:
    res = run_job(_job(src.SMA_CROSS, bars, params={"fast": 5, "slow": 20}))
    assert res.status == JobStatus.OK
    equity = equity_from_returns(res.returns, base=CostModel().cash)
    assert equity[-1] == pytest.approx(res.metrics.final_value, rel=1e-9)
    again = compute_metrics(equity, trade_pnls=res.trade_pnls, bars_in_market=res.bars_in_market)
    assert again.sharpe == pytest.approx(res.metrics.sharpe, rel=1e-9)
    assert res.metrics.n_trades == len(res.trade_pnls) > 0
    assert 0 < res.metrics.exposure_pct < 100
    assert res.duration_s > 0


def test_exception_in_next_is_a_status(bars: pd.DataFrame) -> None:
    res = run_job(_job(src.RAISES_IN_NEXT, bars))
    assert res.status == JobStatus.ERROR and res.metrics is None
    assert res.error.startswith("ZeroDivisionError: division by zero")
    assert "line 7 in next: ratio = 1 / 0" in res.error and "\n" not in res.error


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (src.TWO_STRATEGIES, "exactly one bt.Strategy subclass, found 2 (A, B)"),
        (src.NO_STRATEGY, "found 0"),
        (src.SYNTAX_ERROR, "SyntaxError"),
        (src.SYS_EXIT, "SystemExit: 3"),
    ],
)
def test_bad_code_is_an_error(bars: pd.DataFrame, code: str, fragment: str) -> None:
    res = run_job(_job(code, bars))
    assert res.status == JobStatus.ERROR
    assert fragment in res.error


def test_unknown_param_is_an_error(bars: pd.DataFrame) -> None:
    res = run_job(_job(src.SMA_CROSS, bars, params={"fastt": 3}))
    assert res.status == JobStatus.ERROR
    assert "unknown param(s) fastt for SmaCross (known: fast, slow, target)" in res.error


def test_endless_loop_times_out(bars: pd.DataFrame) -> None:
    res = run_job(_job(src.ENDLESS, bars, timeout_s=2))
    assert res.status == JobStatus.TIMEOUT
    # Not before the limit (a hang is pytest's to catch; speed is not asserted in tests).
    assert "2 s" in res.error and res.duration_s > 1.9


def test_fold_without_bars_is_an_error(bars: pd.DataFrame) -> None:
    late = Fold(
        index=1, warmup_start=date(2019, 1, 1), start=date(2019, 6, 1), end=date(2019, 12, 31)
    )
    res = run_job(_job(src.SMA_CROSS, bars, fold=late))
    assert res.status == JobStatus.ERROR and "no bars" in res.error and res.fold == 1


def test_run_code_on_bars(bars: pd.DataFrame) -> None:
    res = run_code_on_bars(src.SMA_CROSS, bars, params={"fast": 5}, start=date(2015, 1, 2))
    assert res.status == JobStatus.OK
    assert res.return_dates[0] == "2015-01-02" and res.metrics.n_obs == 504
    whole = run_code_on_bars(src.SMA_CROSS, bars, costs=CostModel(slippage_pct=0))
    assert whole.metrics.n_obs == len(bars)  # base = starting cash, then every bar
    assert np.isfinite(whole.metrics.total_return_pct)


def test_turnover_and_holding_period_come_from_the_fills(bars: pd.DataFrame) -> None:
    run = execute(_job(src.SMA_CROSS, bars, params={"fast": 5, "slow": 20}))
    res = run.result
    assert res.status == JobStatus.OK
    inside = [f for f in run.fills if f.executed >= FOLD.start]
    notional = sum(abs(f.size) * f.price for f in inside)
    assert res.traded_notional == pytest.approx(notional, rel=1e-12) and notional > 0
    equity = equity_from_returns(res.returns, base=CostModel().cash)
    years = len(res.returns) / 252
    assert res.metrics.turnover_annual == pytest.approx(notional / equity.mean() / years)
    # Each closed trade is a buy and a sell of roughly the position: about 2 x trades x
    # position size over the years, so turnover is positive and bounded by the fills.
    assert res.metrics.turnover_annual > res.metrics.n_trades / years * 0.5
    assert res.metrics.avg_holding_bars == pytest.approx(res.bars_in_market / res.metrics.n_trades)
