"""The benchmark a run must beat: same windows, one entry at the run's costs."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest
from conftest import read_real_bars

from backtest.benchmark import (
    BUY_AND_HOLD,
    CASH,
    Benchmark,
    buy_and_hold_returns,
    entry_cost,
    normalise_name,
)
from backtest.contracts import CostModel, Fold

pytestmark = pytest.mark.integration

COSTS = CostModel(commission_pct=0.1, slippage_pct=0.05)
FOLDS = [
    Fold(index=0, warmup_start=date(2014, 6, 2), start=date(2015, 1, 2), end=date(2015, 12, 31)),
    Fold(index=1, warmup_start=date(2015, 6, 1), start=date(2016, 1, 4), end=date(2016, 12, 30)),
]


@pytest.fixture(scope="module")
def bars():
    return {s: read_real_bars(s, "2014-06-01", "2017-01-31") for s in ("AAPL", "MSFT")}


def test_buy_and_hold_pays_one_entry_per_window_and_nothing_else(bars) -> None:
    bh = Benchmark(name=BUY_AND_HOLD, held=bars)
    got = bh.fold_returns(FOLDS, costs=COSTS)
    free = pd.concat(
        [buy_and_hold_returns(bars, f.start, f.end) for f in FOLDS]
    )  # the cost-free reference
    free.index = [d.date().isoformat() for d in free.index]
    assert list(got.index) == list(free.index)
    c = entry_cost(COSTS)
    assert c == pytest.approx(0.0015)
    diff = (got - free).abs()
    firsts = ["2015-01-02", "2016-01-04"]
    assert diff.drop(firsts).max() == 0.0  # no cost after the entry
    for d in firsts:
        # Each symbol pays the entry: (1 + r)(1 - c) - 1, then the symbols are averaged.
        want = sum((1 + b["close"].pct_change().loc[d]) * (1 - c) - 1 for b in bars.values()) / len(
            bars
        )
        assert got[d] == pytest.approx(want, abs=1e-15)


def test_symbol_benchmark_is_that_series_held(bars) -> None:
    spy = read_real_bars("SPY", "2014-06-01", "2017-01-31")
    b = Benchmark(name="SPY", held={"SPY": spy})
    rets = b.window_returns(date(2016, 1, 4), date(2016, 12, 30), costs=COSTS)
    growth = float((1 + rets).prod())
    close = spy["close"]
    want = close.loc["2016-12-30"] / close.loc["2015-12-31"] * (1 - entry_cost(COSTS))
    assert growth == pytest.approx(want, rel=1e-12)
    assert b.kind == "symbol" and "SPY" in b.describe()


def test_cash_is_zero_on_the_universe_dates(bars) -> None:
    calendar = bars["AAPL"].index
    cash = Benchmark(name=CASH, calendar=calendar)
    rets = cash.fold_returns(FOLDS, costs=COSTS)
    assert (rets == 0.0).all() and rets.index[0] == "2015-01-02" and rets.index[-1] == "2016-12-30"
    assert cash.is_cash and "absolute" in cash.describe()


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("buy-and-hold", BUY_AND_HOLD),
        ("Buy_And_Hold", BUY_AND_HOLD),
        ("CASH", CASH),
        ("spy", "SPY"),
        (" qqq ", "QQQ"),
        ("btc-usd", "BTC-USD"),
    ],
)
def test_names_normalise(text: str, name: str) -> None:
    assert normalise_name(text) == name
