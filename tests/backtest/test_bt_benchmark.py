"""Buy-and-hold benchmark."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest
from conftest import read_real_bars

from backtest.benchmark import buy_and_hold_metrics


@pytest.mark.integration
def test_single_symbol_matches_the_price_change() -> None:
    bars = read_real_bars("AAPL", "2014-12-01", "2016-12-31")
    m, rets = buy_and_hold_metrics({"AAPL": bars}, date(2015, 1, 2), date(2016, 12, 30))
    close = bars["close"]
    expected = close.loc["2016-12-30"] / close.loc["2014-12-31"] - 1  # from the prior close
    assert m.total_return_pct == pytest.approx(expected * 100, rel=1e-9)
    assert len(rets) == m.n_obs == 504 and rets.index[0] == pd.Timestamp("2015-01-02")
    assert m.exposure_pct == 100.0 and m.n_trades == 0


@pytest.mark.integration
def test_equal_weight_and_empty_window() -> None:
    a = read_real_bars("AAPL", "2015-01-01", "2015-12-31")
    b = read_real_bars("MSFT", "2015-01-01", "2015-12-31")
    _, both = buy_and_hold_metrics({"AAPL": a, "MSFT": b}, date(2015, 3, 2), date(2015, 3, 31))
    _, ra = buy_and_hold_metrics({"AAPL": a}, date(2015, 3, 2), date(2015, 3, 31))
    _, rb = buy_and_hold_metrics({"MSFT": b}, date(2015, 3, 2), date(2015, 3, 31))
    pd.testing.assert_series_equal(both, (ra + rb) / 2, check_names=False)
    none, empty = buy_and_hold_metrics({"AAPL": a}, date(2019, 1, 1), date(2019, 2, 1))
    assert none is None and empty.empty
