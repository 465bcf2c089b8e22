"""The borrow fee on shorts (``backtest.borrow``): the rule by hand, and the broker and the
books charging it alike."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from backtest.borrow import borrow_by_bar, borrow_due, cash_by_bar, per_bar_rate
from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.engine import execute

pytestmark = pytest.mark.unit


def test_a_year_short_at_five_percent_pays_five_percent_of_its_value() -> None:
    # short 100 shares at a flat $50 for 252 daily bars at 5 %/yr: 252 x 100 x 50 x 0.05/252
    rate = per_bar_rate(5.0, 252)
    assert rate == pytest.approx(0.05 / 252)
    assert borrow_due([-100.0], [50.0], rate) == pytest.approx(100 * 50 * 0.05 / 252)
    sizes = np.array([[0.0]] + [[-100.0]] * 252 + [[0.0]])  # short at bars 1..252's closes
    due = borrow_by_bar(sizes, [np.full(254, 50.0)], rate)
    assert due[:2].tolist() == [0.0, 0.0]  # bar 1 opens it; its close is paid at bar 2
    assert due.sum() == pytest.approx(250.0, rel=1e-12)


def test_longs_pay_nothing_and_feeds_add_in_order() -> None:
    rate = per_bar_rate(10.0, 100)  # 0.1 % a bar
    assert borrow_due([100.0, 0.0], [20.0, 30.0], rate) == 0.0
    assert borrow_due([100.0, -10.0, -5.0], [20.0, 30.0, 40.0], rate) == pytest.approx(
        (10 * 30 + 5 * 40) * 0.001
    )
    assert per_bar_rate(0.0, 252) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 5.0, -3.0, -7.5, 12.0]), min_size=2, max_size=30),
    st.floats(0.5, 40.0),
)
def test_vectorised_fees_are_the_scalar_rule_bit_for_bit(sizes: list[float], pct: float) -> None:
    n = len(sizes)
    closes = [np.linspace(10.0, 20.0, n), np.linspace(30.0, 5.0, n)]
    grid = np.column_stack([sizes, sizes[::-1]])
    rate = per_bar_rate(pct, 252)
    due = borrow_by_bar(grid, closes, rate)
    want = [0.0] + [
        borrow_due(list(grid[i - 1]), [float(c[i - 1]) for c in closes], rate) for i in range(1, n)
    ]
    assert due.tolist() == want
    # the cash, fee by fee from the start, a mark resetting it
    cash = cash_by_bar([], due, 1000.0)
    c, expect = 1000.0, []
    for d in want:
        c -= d
        expect.append(c)
    assert cash.tolist() == expect


@pytest.mark.parametrize("bad", [-1.0, 100.5])
def test_cost_model_bounds_the_rate(bad: float) -> None:
    with pytest.raises(ValidationError):
        CostModel(borrow_pct=bad)


# A flat price: the fee is the only thing the equity sees.
FLAT = pd.DataFrame(
    {"open": 50.0, "high": 50.0, "low": 50.0, "close": 50.0, "volume": 1e6},
    index=pd.bdate_range("2020-01-01", periods=260),
)
SHORT_A_YEAR = textwrap.dedent(
    """
    import backtrader as bt

    class ShortAYear(bt.Strategy):
        params = (("side", -1),)

        def next(self):
            i = len(self) - 1
            if i == 2:
                self.buy(size=100) if self.p.side > 0 else self.sell(size=100)
            elif i == 254:
                self.close()
    """
)


def _run(pct: float, side: int = -1):
    fold = Fold(
        index=0,
        warmup_start=FLAT.index[0].date(),
        start=FLAT.index[0].date(),
        end=FLAT.index[-1].date(),
    )
    job = BacktestJob(
        job_id="b",
        variant_id="v",
        code=SHORT_A_YEAR,
        symbol="X",
        bars=FLAT,
        fold=fold,
        costs=CostModel(commission_pct=0.0, slippage_pct=0.0, cash=10_000.0, borrow_pct=pct),
        params={"side": side},
    )
    return execute(job)


def test_the_broker_and_the_books_charge_a_year_short_250_dollars() -> None:
    # sold at bar 3's open, covered at bar 255's: short at closes 3..254, 252 fees
    run = _run(5.0)
    res = run.result
    assert res.status == JobStatus.OK, res.error  # the books replayed the broker's cash
    assert res.metrics.borrow_paid == pytest.approx(250.0, rel=1e-12)
    assert res.metrics.final_value == pytest.approx(10_000.0 - 250.0, rel=1e-12)
    assert res.trade_pnls == [0.0]  # the fee is in the equity, not in the trade's pnl
    assert run.values[3] == 10_000.0 and run.values[4] == pytest.approx(10_000.0 - 250.0 / 252)


def test_no_fee_and_long_only_are_untouched() -> None:
    free, short_free, long_paying = _run(0.0, -1), _run(0.0, 1), _run(5.0, 1)
    for run in (free, short_free, long_paying):
        assert run.result.status == JobStatus.OK
        assert run.result.metrics.borrow_paid == 0.0
        assert run.result.metrics.final_value == 10_000.0
    assert long_paying.values == short_free.values


def test_a_run_that_skips_the_fee_fails_the_books() -> None:
    from dataclasses import replace

    from backtest.books import account

    free, paying = _run(0.0), _run(5.0)
    assert paying.log is not None and free.log is not None
    fold = Fold(
        index=0,
        warmup_start=FLAT.index[0].date(),
        start=FLAT.index[0].date(),
        end=FLAT.index[-1].date(),
    )
    job = BacktestJob(
        job_id="b",
        variant_id="v",
        code=SHORT_A_YEAR,
        symbol="X",
        bars=FLAT,
        fold=fold,
        costs=CostModel(commission_pct=0.0, slippage_pct=0.0, cash=10_000.0, borrow_pct=5.0),
    )
    books = account(job, free.log)
    assert books.result.status == JobStatus.INTEGRITY_ERROR
    assert "cash change no fill explains" in (books.result.error or "")
    assert account(replace(job, job_id="c"), paying.log).result.status == JobStatus.OK
