"""Lookahead check by truncated re-runs: biased fixtures flagged, honest code not."""

from __future__ import annotations

from datetime import date

import bt_strategy_sources as src
import pandas as pd
import pytest
from conftest import read_real_bars

from backtest.contracts import CostModel, Fold
from backtest.executors import ProcessPoolBackend
from backtest.lookahead import check_lookahead, cut_positions, padded
from backtest.sandbox import SandboxPolicy
from strategies.codegen import render
from strategies.families import default_spec
from strategies.spec import Family
from strategies.validate import validate_code

# ~1 year of warm-up and ~2 years of fold: enough for every family's indicators.
FOLD = Fold(index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30))
FAMILY_FOLD = FOLD.model_copy(update={"end": date(2015, 12, 31)})  # cheaper, same warm-up
BYPASS = SandboxPolicy(validate=False)  # the biased fixtures must run to be caught

# Looks one bar ahead in next(): trades on tomorrow's close.
PEEK_IN_NEXT = """
import backtrader as bt


class PeekNext(bt.Strategy):
    params = dict(n=1)

    def next(self):
        if not self.position and self.data.close[1] > self.data.close[0]:
            self.buy()
        elif self.position and self.data.close[1] < self.data.close[0]:
            self.close()
"""

# An indicator over a line delayed into the future: close(1) is tomorrow's close.
PEEK_IN_INDICATOR = """
import backtrader as bt


class PeekIndicator(bt.Strategy):
    params = dict(n=10)

    def __init__(self):
        self.future_sma = bt.ind.SMA(self.data.close(1), period=self.p.n)

    def next(self):
        if not self.position and self.future_sma[0] > self.data.close[0]:
            self.buy()
        elif self.position and self.future_sma[0] < self.data.close[0]:
            self.close()
"""


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    return read_real_bars("MSFT", "2014-01-01", "2016-12-31")


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolBackend(2) as ex:
        yield ex


@pytest.mark.integration
@pytest.mark.parametrize("code", [PEEK_IN_NEXT, PEEK_IN_INDICATOR], ids=["close[1]", "close(1)"])
def test_biased_fixtures_are_flagged(code: str, bars: pd.DataFrame, pool) -> None:
    assert not validate_code(code).ok  # the static lint catches them too
    report = check_lookahead(code, bars, fold=FOLD, costs=CostModel(), executor=pool, policy=BYPASS)
    assert report.checked and report.biased, report
    assert report.n_cuts >= 20 and report.mismatches
    assert all(m.startswith("cut at 20") for m in report.mismatches)


@pytest.mark.integration
def test_honest_sma_cross_is_not_flagged(bars: pd.DataFrame, pool) -> None:
    report = check_lookahead(src.SMA_CROSS, bars, fold=FOLD, costs=CostModel(), executor=pool)
    assert report.checked and not report.biased and report.n_cuts == 20, report


@pytest.mark.integration
@pytest.mark.parametrize("family", list(Family), ids=lambda f: f.value)
def test_family_defaults_are_not_flagged(family: Family, bars: pd.DataFrame, pool) -> None:
    code = render(default_spec(family))
    report = check_lookahead(code, bars, fold=FAMILY_FOLD, costs=CostModel(), executor=pool)
    assert report.checked and not report.biased, report.mismatches[:3]
    assert report.n_cuts == 20


@pytest.mark.integration
def test_serial_default_and_unjudgeable_code(bars: pd.DataFrame) -> None:
    rejected = check_lookahead(PEEK_IN_NEXT, bars, fold=FOLD, n_cuts=3)
    assert not rejected.checked and not rejected.biased
    assert "rejected" in rejected.error
    broken = check_lookahead(src.RAISES_IN_NEXT, bars, fold=FOLD, n_cuts=3, policy=BYPASS)
    assert not broken.checked and "ZeroDivisionError" in broken.error
    honest = check_lookahead(src.SMA_CROSS, bars, fold=FOLD, n_cuts=3)  # SerialBackend
    assert honest.checked and not honest.biased and honest.n_cuts == 3


@pytest.mark.unit
def test_cut_positions_and_padding(bars: pd.DataFrame) -> None:
    frame = bars.loc["2014-01-02":"2016-12-30"]
    cuts = cut_positions(pd.DatetimeIndex(frame.index), FOLD, 20)
    assert len(cuts) == 20 and cuts == sorted(set(cuts))
    assert frame.index[cuts[0]].date() == date(2015, 1, 2)
    assert cuts[-1] == len(frame) - 2  # never the last bar (that is the full run)
    p = padded(frame, cuts[3], 5)
    assert len(p) == cuts[3] + 1 + 5 and p.index.is_monotonic_increasing
    assert (p.iloc[-5:].to_numpy() == frame.iloc[cuts[3]].to_numpy()).all()
    # intraday: only the last bar of a day is a cut
    idx = pd.date_range("2015-01-02 10:00", periods=60, freq="h")
    hourly = cut_positions(
        idx,
        Fold(index=0, warmup_start=date(2015, 1, 2), start=date(2015, 1, 2), end=date(2015, 1, 5)),
        20,
    )
    assert all(idx[i].normalize() != idx[i + 1].normalize() for i in hourly)


# A portfolio that swaps its whole book between two symbols: orders on both feeds.
SWAP = """
import backtrader as bt


class Swap(bt.Strategy):
    params = dict(every=10)

    def next(self):
        if len(self) % self.p.every:
            return
        first = (len(self) // self.p.every) % 2 == 0
        a, b = self.datas[0], self.datas[1]
        self.order_target_percent(data=b if first else a, target=0.0)
        self.order_target_percent(data=a if first else b, target=0.45)
"""


@pytest.mark.integration
def test_order_rows_name_their_symbol_in_a_portfolio_job() -> None:
    """A portfolio job's orders (like its fills) carry the feed's name, so the check can tell
    an order for AAPL from the same order for MSFT; a one-symbol job's rows stay as they were."""
    from backtest.contracts import BacktestJob
    from backtest.engine import execute
    from backtest.lookahead import compare_traces
    from backtest.trace import collect_trace

    bars = {s: read_real_bars(s, "2015-01-01", "2015-12-31") for s in ("AAPL", "MSFT")}
    fold = Fold(
        index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31)
    )
    run = execute(
        BacktestJob(job_id="p", variant_id="v", code=SWAP, symbol="AAPL+MSFT", bars=bars, fold=fold)
    )
    orders = collect_trace(run)["orders"]
    assert orders and all(len(row) == 5 for row in orders)
    assert {row[4] for row in orders} == {"AAPL", "MSFT"}
    # The same order for the other symbol is a mismatch.
    swapped = [row[:4] + [{"AAPL": "MSFT", "MSFT": "AAPL"}[row[4]]] for row in orders]
    dates = [ts.date() for ts in bars["AAPL"].index]
    full = {"orders": orders, "fills": [], "lines": {}}
    cut = {"orders": swapped, "fills": [], "lines": {}}
    diff = compare_traces(full, cut, len(dates) - 1, dates)
    assert diff is not None and "order #1 differs" in diff and "MSFT" in diff
    one = execute(
        BacktestJob(
            job_id="s",
            variant_id="v",
            code=src.SMA_CROSS,
            symbol="AAPL",
            bars=bars["AAPL"],
            fold=fold,
        )
    )
    assert all(len(row) == 4 for row in collect_trace(one)["orders"])


@pytest.mark.integration
def test_a_regime_filtered_variant_passes_and_a_peek_at_the_index_is_caught(pool) -> None:
    """The index feed (``index:SPY``) is cut with the traded symbol: the regime filter is
    clean; the same filter reading the index's next close is flagged."""
    from strategies.families import with_regime_filter

    spec = with_regime_filter(default_spec(Family.TREND))
    code = render(spec)
    assert validate_code(code).ok
    bars = {
        "MSFT": read_real_bars("MSFT", "2014-01-01", "2016-12-31"),
        "index:SPY": read_real_bars("SPY", "2014-01-01", "2016-12-31"),
    }
    fold = FAMILY_FOLD.model_copy(update={"warmup_start": date(2014, 1, 2)})
    honest = check_lookahead(code, bars, fold=fold, costs=CostModel(), executor=pool, symbol="MSFT")
    assert honest.checked and not honest.biased, honest.mismatches[:3]
    peek = code.replace(  # the index's average over its next closes
        "bt.indicators.SMA(self.regime_feed.close,", "bt.indicators.SMA(self.regime_feed.close(1),"
    )
    assert peek != code and not validate_code(peek).ok
    biased = check_lookahead(
        peek, bars, fold=fold, costs=CostModel(), executor=pool, symbol="MSFT", policy=BYPASS
    )
    assert biased.checked and biased.biased, biased
