"""compute_metrics pinned to hand-computed values and cross-checked independently."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars
from scipy import stats as sps

from backtest.metrics import PROFIT_FACTOR_CAP, compute_metrics, equity_from_returns


@pytest.mark.unit
def test_hand_computed_values() -> None:
    # returns: +10%, -10%, +10%, +10%  -> mean 0.05, sample std 0.1 (deviations
    # .05,-.15,.05,.05: sum of squares .03 / 3 = .01)
    equity = [100.0, 110.0, 99.0, 108.9, 119.79]
    m = compute_metrics(
        equity, trade_pnls=[10.0, -5.0, 20.0, -5.0, 0.0], bars_in_market=3, periods_per_year=4
    )
    assert m.n_obs == 4
    assert m.total_return_pct == pytest.approx(19.79)
    assert m.cagr_pct == pytest.approx(19.79)  # exactly one year of 4 periods
    assert m.max_drawdown_pct == pytest.approx(10.0)  # 110 -> 99
    assert m.sharpe_per_period == pytest.approx(0.5)
    assert m.sharpe == pytest.approx(0.5 * 2.0)  # sqrt(4) = 2
    # downside deviation sqrt(mean(min(r,0)^2)) = sqrt(.01/4) = .05 -> .05/.05*2
    assert m.sortino == pytest.approx(2.0)
    assert m.win_rate_pct == pytest.approx(40.0)  # 2 winners of 5 (a zero is not a win)
    assert m.profit_factor == pytest.approx(3.0)  # 30 / 10
    assert m.n_trades == 5
    assert m.exposure_pct == pytest.approx(75.0)
    assert m.final_value == pytest.approx(119.79)


@pytest.mark.unit
def test_degenerate_cases() -> None:
    flat = compute_metrics([100.0, 100.0, 100.0])
    assert flat.sharpe is None and flat.sortino is None and flat.max_drawdown_pct == 0.0
    assert flat.win_rate_pct is None and flat.profit_factor is None
    only_wins = compute_metrics([100.0, 101.0], trade_pnls=[5.0])
    assert only_wins.profit_factor == PROFIT_FACTOR_CAP
    with pytest.raises(ValueError):
        compute_metrics([100.0])
    assert equity_from_returns([0.1, -0.1], base=100.0).tolist() == pytest.approx([100, 110, 99])


@pytest.mark.integration
def test_matches_pandas_on_real_aapl() -> None:
    close = read_real_bars("AAPL", "2010-01-01", "2020-12-11")["close"]
    equity = 100_000.0 * close / close.iloc[0]
    m = compute_metrics(equity, periods_per_year=252)

    rets = equity.pct_change().dropna()
    assert m.n_obs == len(rets)
    assert m.total_return_pct == pytest.approx((equity.iloc[-1] / equity.iloc[0] - 1) * 100)
    assert m.sharpe == pytest.approx(rets.mean() / rets.std() * math.sqrt(252), rel=1e-9)
    drawdown = 1 - equity / equity.cummax()
    assert m.max_drawdown_pct == pytest.approx(drawdown.max() * 100, rel=1e-9)
    years = len(rets) / 252
    cagr = (equity.iloc[-1] / equity.iloc[0]) ** (1 / years) - 1
    assert m.cagr_pct == pytest.approx(cagr * 100, rel=1e-9)
    # scipy's bias-corrected sample moments are the reference (the metrics use pandas')
    assert m.skew == pytest.approx(sps.skew(rets, bias=False), rel=1e-9)
    assert m.kurtosis == pytest.approx(sps.kurtosis(rets, fisher=False, bias=False), rel=1e-9)
    downside = np.sqrt((np.minimum(rets, 0) ** 2).mean())
    assert m.sortino == pytest.approx(rets.mean() / downside * math.sqrt(252), rel=1e-9)
    assert isinstance(pd.Series(equity).iloc[0], float)
