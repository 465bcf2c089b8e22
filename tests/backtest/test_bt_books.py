"""The trusted books (``backtest.books``): every check of a claimed fill log, and the replay's
agreement with backtrader's own broker, bit for bit."""

from __future__ import annotations

import base64
import textwrap
from datetime import date

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backtest.books import ClaimedFill, FillLog, IntegrityError, account, keep_books
from backtest.contracts import BacktestJob, CostModel, Fold, JobStatus
from backtest.engine import bt, execute

pytestmark = pytest.mark.unit

# Ten bars: open 100..109, high open+2, low open-2, close open+1.
IDX = pd.bdate_range("2020-01-01", periods=10)
OPEN = np.arange(100.0, 110.0)
BARS = pd.DataFrame(
    {"open": OPEN, "high": OPEN + 2, "low": OPEN - 2, "close": OPEN + 1, "volume": 1e6},
    index=IDX,
)
FOLD = Fold(index=0, warmup_start=IDX[0].date(), start=IDX[2].date(), end=IDX[-1].date())
COSTS = CostModel(commission_pct=0.1, slippage_pct=0.05, cash=10_000.0)


def _job(stop_after: date | None = None) -> BacktestJob:
    return BacktestJob(
        job_id="j",
        variant_id="v",
        code="",
        symbol="X",
        bars=BARS,
        fold=FOLD,
        costs=COSTS,
        stop_after=stop_after,
    )


def buy_price(i: int) -> float:
    return min(OPEN[i] * (1 + 0.0005), OPEN[i] + 2)


def sell_price(i: int) -> float:
    return max(OPEN[i] * (1 - 0.0005), OPEN[i] - 2)


def _fill(
    created: int,
    executed: int,
    size: float,
    price: float,
    *,
    kind: str = "Market",
    commission: float | None = None,
    data: int = 0,
) -> ClaimedFill:
    fee = abs(size) * 0.001 * price if commission is None else commission
    side = "buy" if size > 0 else "sell"
    return ClaimedFill(data, created, executed, side, size, price, fee, kind)


def _honest_values(fills: list[ClaimedFill]) -> np.ndarray:
    """What an honest child would claim, by hand: cash moves at each fill, the position is
    marked at each close."""
    cash, size, out = COSTS.cash, 0.0, []
    by_bar = {f.executed: f for f in fills}
    for i in range(len(BARS)):
        f = by_bar.get(i)
        if f is not None:
            cash -= f.size * f.price + f.commission
            size += f.size
        out.append(cash + size * (OPEN[i] + 1))
    return np.array(out)


def test_a_round_trip_is_booked() -> None:
    fills = [_fill(2, 3, 10.0, buy_price(3)), _fill(5, 6, -10.0, sell_price(6))]
    values = _honest_values(fills)
    books = keep_books(_job(), FillLog(fills=fills, values=values))
    res = books.result
    assert res.status == JobStatus.OK
    np.testing.assert_allclose(books.values, values, rtol=1e-12)
    assert res.metrics.n_trades == 1
    pnl = 10 * (sell_price(6) - buy_price(3)) - fills[0].commission - fills[1].commission
    assert res.trade_pnls == [pytest.approx(pnl, rel=1e-12)]
    assert res.bars_in_market == 3  # bars 3, 4, 5 (flat again at bar 6's close)
    assert res.metrics.final_value == pytest.approx(COSTS.cash + pnl, rel=1e-12)
    assert res.return_dates[0] == IDX[2].date().isoformat()
    assert [f.executed for f in books.fills] == [IDX[3].date(), IDX[6].date()]


@pytest.mark.parametrize(
    ("fill", "message"),
    [
        (_fill(2, 3, 10.0, OPEN[3] - 2), "is not the bar's open"),
        (_fill(2, 4, 10.0, buy_price(4)), "fills on the bar after it is placed"),
        (_fill(2, 3, 10.0, OPEN[3] + 1.5, kind="Close"), "is not the bar's close"),
        (_fill(2, 5, 10.0, OPEN[5] - 2.5, kind="Limit"), "outside the bar's range"),
        (_fill(2, 5, 10.0, OPEN[5] + 2.5, kind="Stop"), "outside the bar's range"),
        (_fill(2, 3, 10.0, buy_price(3), commission=0.0), "the cost model's is"),
        (_fill(2, 3, 1000.0, buy_price(3)), "not affordable"),
        (_fill(0, 1, 10.0, buy_price(1)), "not between the fold's first bar"),
        (_fill(3, 3, 10.0, buy_price(3), kind="Limit"), "not between the fold's first bar"),
        (_fill(2, 12, 10.0, 100.0), "outside the run's 10 bars"),
        (_fill(2, 3, 10.0, buy_price(3), data=1), "data feed 1 does not exist"),
        (ClaimedFill(0, 2, 3, "sell", 10.0, buy_price(3), 1.0, "Market"), "does not match"),
        (_fill(2, 3, float("nan"), buy_price(3)), "not finite"),
    ],
)
def test_an_impossible_fill_is_named(fill: ClaimedFill, message: str) -> None:
    log = FillLog(fills=[fill], values=np.full(len(BARS), COSTS.cash))
    with pytest.raises(IntegrityError, match=message):
        keep_books(_job(), log)
    res = account(_job(), log).result
    assert res.status == JobStatus.INTEGRITY_ERROR and message.split()[0] in res.error


def test_fills_out_of_order_are_refused() -> None:
    fills = [_fill(4, 5, 10.0, buy_price(5)), _fill(2, 3, -10.0, sell_price(3))]
    with pytest.raises(IntegrityError, match="out of order"):
        keep_books(_job(), FillLog(fills=fills, values=np.full(len(BARS), COSTS.cash)))


def test_a_cash_change_no_fill_explains() -> None:
    values = np.full(len(BARS), COSTS.cash)
    values[6:] += 1000.0  # add_cash on bar 6
    with pytest.raises(IntegrityError, match=f"no fill explains on {IDX[6].date()}"):
        keep_books(_job(), FillLog(values=values))


def test_the_run_must_cover_the_window() -> None:
    with pytest.raises(IntegrityError, match="covered 9 bars, the window has 10"):
        keep_books(_job(), FillLog(values=np.full(9, COSTS.cash)))
    # A run stopped after a cut covers the bars up to the cut and the first one after it.
    books = keep_books(_job(stop_after=IDX[5].date()), FillLog(values=np.full(7, COSTS.cash)))
    assert books.result.metrics.n_obs == 5  # bars 2..6


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "not an object"),
        ({"fills": "x", "values": "", "orders_rejected": 0}, "not a list"),
        ({"fills": [], "values": "", "orders_rejected": -1}, "non-negative"),
        ({"fills": [], "values": "!!", "orders_rejected": 0}, "not base64"),
        (
            {"fills": [], "values": base64.b64encode(b"abc").decode(), "orders_rejected": 0},
            "not float64s",
        ),
        (
            {"fills": [[0, 1, 2, "buy", 1.0, 1.0, 0.0]], "values": "", "orders_rejected": 0},
            "fill #1 is malformed",
        ),
        (
            {
                "fills": [[0, 1, 2, "buy", 1.0, 1.0, 0.0, "Teleport"]],
                "values": "",
                "orders_rejected": 0,
            },
            "fill #1 is malformed",
        ),
        (
            {
                "fills": [[True, 1, 2, "buy", 1.0, 1.0, 0.0, "Market"]],
                "values": "",
                "orders_rejected": 0,
            },
            "fill #1 is malformed",
        ),
    ],
)
def test_a_malformed_log_is_an_integrity_error(payload: object, message: str) -> None:
    with pytest.raises(IntegrityError, match=message):
        FillLog.from_json(payload)


def test_the_log_round_trips_through_json() -> None:
    log = FillLog(
        fills=[_fill(2, 3, 10.0, buy_price(3))], values=np.linspace(1, 2, 10), orders_rejected=3
    )
    back = FillLog.from_json(log.to_json())
    assert back.fills == log.fills and back.orders_rejected == 3
    assert np.array_equal(back.values, log.values)


# ---------------------------------------------------------------------------- vs backtrader

STRATEGIES = {
    "reversals": """
        def __init__(self):
            self.x = bt.ind.CrossOver(bt.ind.SMA(period=10), bt.ind.SMA(period=30))

        def next(self):
            if self.x[0] > 0:
                self.order_target_size(target=50)
            elif self.x[0] < 0:
                self.order_target_size(target=-50)
    """,
    "target_percent": """
        def __init__(self):
            self.m = bt.ind.ROC(period=20)

        def next(self):
            self.order_target_percent(target=0.95 if self.m[0] > 0 else 0.0)
    """,
    "brackets": """
        def __init__(self):
            self.sma = bt.ind.SMA(period=10)
            self.orders = []

        def next(self):
            if self.data.datetime.date(0).year < 2015:  # warm-up: the gate refuses orders
                return
            if self.position or [o for o in self.orders if o.alive()]:
                return
            c = self.data.close[0]
            if c > self.sma[0]:
                self.orders = self.buy_bracket(size=30, exectype=bt.Order.Market,
                                               stopprice=c * 0.97, limitprice=c * 1.04)
            else:
                self.orders = self.sell_bracket(size=30, exectype=bt.Order.Limit,
                                                price=c * 1.005, stopprice=c * 1.03,
                                                limitprice=c * 0.96)
    """,
    "close_stop_trail": """
        def __init__(self):
            self.sma = bt.ind.SMA(period=7)
            self.trail = None

        def next(self):
            if not self.position:
                if self.data.close[0] > self.sma[0]:
                    self.buy(size=20, exectype=bt.Order.Close)
                else:
                    self.buy(size=20, exectype=bt.Order.Stop, price=self.data.high[0], valid=2)
            elif self.trail is None or not self.trail.alive():
                # One trailing stop at a time: a new one every bar piled up shorts until the
                # equity went through zero, which the margin now refuses (test_bt_hostile_margin).
                self.trail = self.sell(size=20, exectype=bt.Order.StopTrail, trailpercent=0.02)
    """,
    "fractional_many_per_bar": """
        def next(self):
            if len(self) % 3 == 0:
                self.buy(size=1.5)
                self.buy(size=2.25)
                self.sell(size=0.75)
            elif len(self) % 3 == 1 and self.position:
                self.close()
    """,
    "all_in_refused": """
        def next(self):
            size = int(self.broker.getvalue() / self.data.close[0])
            if not self.position and len(self) % 4 == 0:
                self.buy(size=size)
            elif self.position and len(self) % 4 == 2:
                self.close()
    """,
}


def _code(body: str) -> str:
    return "import backtrader as bt\n\n\nclass S(bt.Strategy):\n" + textwrap.indent(
        textwrap.dedent(body).strip() + "\n", "    "
    )


class _Truth(bt.Analyzer):
    """backtrader's own figures: the broker value at every bar and each closed trade."""

    def start(self) -> None:
        self.values: list[float] = []
        self.pnls: list[float] = []

    def next(self) -> None:
        self.values.append(self.strategy.broker.getvalue())

    def notify_trade(self, trade) -> None:  # noqa: ANN001
        if trade.isclosed:
            self.pnls.append(trade.pnlcomm)


def _backtrader_alone(code: str, frame: pd.DataFrame, costs: CostModel, start: date):
    """The same run in plain backtrader, without the lab (its gate refuses orders before
    ``start``, as the engine's does)."""
    namespace: dict = {}
    exec(compile(code, "<truth>", "exec"), namespace)  # noqa: S102  (our own fixture code)
    user = namespace["S"]

    class Gated(user):
        def buy(self, *a, **k):  # noqa: ANN002, ANN003, ANN202
            return None if self.data.datetime.date(0) < start else super().buy(*a, **k)

        def sell(self, *a, **k):  # noqa: ANN002, ANN003, ANN202
            return None if self.data.datetime.date(0) < start else super().sell(*a, **k)

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=frame, openinterest=None))
    cerebro.addstrategy(Gated)
    cerebro.addanalyzer(_Truth, _name="truth")
    cerebro.broker.setcash(costs.cash)
    cerebro.broker.setcommission(commission=costs.commission_pct / 100.0)
    cerebro.broker.set_slippage_perc(
        costs.slippage_pct / 100.0, slip_open=True, slip_limit=True, slip_match=True, slip_out=False
    )
    return cerebro.run()[0].analyzers.truth


@pytest.mark.integration
@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.parametrize("symbol", ["AAPL", "NVDA"])
def test_the_books_agree_with_backtrader_bit_for_bit(name: str, symbol: str) -> None:
    bars = read_real_bars(symbol, "2014-01-01", "2017-12-31")
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2017, 12, 29)
    )
    costs = CostModel(commission_pct=0.1, slippage_pct=0.05, cash=20_000.0)
    code = _code(STRATEGIES[name])
    job = BacktestJob(
        job_id="j", variant_id="v", code=code, symbol=symbol, bars=bars, fold=fold, costs=costs
    )
    run = execute(job)
    assert run.result.status == JobStatus.OK, run.result.error
    truth = _backtrader_alone(code, bars.loc[:"2017-12-29"], costs, fold.start)
    assert np.array_equal(np.asarray(run.values), np.asarray(truth.values))  # bit for bit
    assert run.result.trade_pnls == truth.pnls
    assert run.result.metrics.final_value == truth.values[-1]
    assert len(run.fills) > 0
    if name == "all_in_refused":
        assert run.result.metrics.orders_rejected > 0


@pytest.mark.integration
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    targets=st.lists(
        st.tuples(st.integers(0, 180), st.sampled_from([-40, -10, 0, 0, 15, 60])),
        min_size=1,
        max_size=25,
    ),
    commission=st.sampled_from([0.0, 0.1, 0.5]),
    slippage=st.sampled_from([0.0, 0.05, 1.0]),
)
def test_random_target_paths_are_booked_as_the_broker_books_them(targets, commission, slippage):
    bars = read_real_bars("MSFT", "2016-01-01", "2016-12-31")
    plan = dict(targets)
    code = _code(f"""
        plan = {plan!r}

        def next(self):
            target = self.plan.get(len(self))
            if target is not None:
                self.order_target_size(target=target)
    """)
    job = BacktestJob(
        job_id="j",
        variant_id="v",
        code=code,
        symbol="MSFT",
        bars=bars,
        fold=Fold(
            index=0, warmup_start=date(2016, 1, 4), start=date(2016, 1, 4), end=date(2016, 12, 30)
        ),
        costs=CostModel(commission_pct=commission, slippage_pct=slippage),
    )
    run = execute(job)
    assert run.result.status == JobStatus.OK, run.result.error
    assert np.array_equal(run.log.values, np.asarray(run.values))


ROTATION = """
import backtrader as bt


class Rotation(bt.Strategy):
    params = dict(lookback=20, every=5)

    def __init__(self):
        self.roc = {d: bt.ind.ROC(d.close, period=self.p.lookback) for d in self.datas}

    def next(self):
        if len(self) % self.p.every:
            return
        ranked = sorted(self.datas, key=lambda d: self.roc[d][0], reverse=True)
        best, worst = ranked[0], ranked[-1]
        for d in self.datas:
            if d is not best and d is not worst:
                self.order_target_percent(data=d, target=0.0)
        self.order_target_percent(data=best, target=0.6)
        self.order_target_percent(data=worst, target=-0.2)
"""


@pytest.mark.integration
def test_a_portfolio_job_is_booked_feed_by_feed_as_backtrader_books_it() -> None:
    """One job over three symbols (``self.datas``): the books value the positions feed by feed
    in feed order, as the broker sums them, bit for bit; fills name their symbol."""
    symbols = ("AAPL", "MSFT", "NVDA")
    bars = {s: read_real_bars(s, "2014-01-01", "2016-12-30") for s in symbols}
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30)
    )
    job = BacktestJob(
        job_id="p", variant_id="v", code=ROTATION, symbol="AAPL+MSFT+NVDA", bars=bars, fold=fold
    )
    run = execute(job)
    assert run.result.status == JobStatus.OK, run.result.error
    assert {f.symbol for f in run.fills} == set(symbols)
    assert any(f.side == "sell" and f.size < 0 for f in run.fills)

    namespace: dict = {}
    exec(compile(ROTATION, "<truth>", "exec"), namespace)  # noqa: S102  (our own fixture)

    class Gated(namespace["Rotation"]):
        def buy(self, *a, **k):  # noqa: ANN002, ANN003, ANN202
            return None if self.data.datetime.date(0) < fold.start else super().buy(*a, **k)

        def sell(self, *a, **k):  # noqa: ANN002, ANN003, ANN202
            return None if self.data.datetime.date(0) < fold.start else super().sell(*a, **k)

    cerebro = bt.Cerebro(stdstats=False)
    for s in symbols:
        cerebro.adddata(bt.feeds.PandasData(dataname=bars[s], openinterest=None), name=s)
    cerebro.addstrategy(Gated)
    cerebro.addanalyzer(_Truth, _name="truth")
    cerebro.broker.setcash(job.costs.cash)
    cerebro.broker.setcommission(commission=job.costs.commission_pct / 100.0)
    cerebro.broker.set_slippage_perc(
        job.costs.slippage_pct / 100.0,
        slip_open=True,
        slip_limit=True,
        slip_match=True,
        slip_out=False,
    )
    truth = cerebro.run()[0].analyzers.truth
    # Bit for bit with the engine's broker (positions touched in feed order); plain backtrader
    # sums the positions in the order the strategy first touched them, so to the last ulps.
    assert np.array_equal(run.values, run.log.values)
    assert np.allclose(run.values, truth.values, rtol=1e-13, atol=0)
    assert run.result.metrics.final_value == pytest.approx(truth.values[-1], rel=1e-13)
    # A portfolio's trades are its reductions (backtrader's flat-to-flat trades would count a
    # leader held for years, rebalanced monthly, as one).
    held: dict[str, float] = {}
    reductions = 0
    for f in run.fills:
        before = held.get(f.symbol, 0.0)
        held[f.symbol] = before + f.size
        reductions += before != 0 and (before > 0) != (f.size > 0)
    assert len(run.result.trade_pnls) == reductions > len(truth.pnls)


def test_a_portfolio_fill_on_a_feed_that_does_not_exist() -> None:
    bars = {"A": BARS, "B": BARS * 2}
    job = BacktestJob(
        job_id="p", variant_id="v", code="", symbol="A+B", bars=bars, fold=FOLD, costs=COSTS
    )
    log = FillLog(
        fills=[_fill(2, 3, 1.0, 2 * buy_price(3), data=2)], values=np.full(len(BARS), COSTS.cash)
    )
    with pytest.raises(IntegrityError, match="data feed 2 does not exist \\(2 fed\\)"):
        keep_books(job, log)
    ok = FillLog(
        fills=[_fill(2, 3, 1.0, min(2 * OPEN[3] * 1.0005, 2 * OPEN[3] + 4), data=1)],
        values=np.full(len(BARS), COSTS.cash),
    )
    with pytest.raises(IntegrityError, match="cash change"):  # the B position moves the value
        keep_books(job, ok)


@pytest.mark.integration
@pytest.mark.slow
def test_the_lookahead_check_cuts_a_portfolio_s_feeds_together() -> None:
    from backtest.lookahead import check_lookahead
    from backtest.sandbox import SandboxPolicy

    bars = {s: read_real_bars(s, "2015-01-01", "2015-12-31") for s in ("AAPL", "MSFT")}
    fold = Fold(
        index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31)
    )
    honest = check_lookahead(ROTATION, bars, fold=fold, n_cuts=4, symbol="AAPL+MSFT")
    assert honest.checked and not honest.biased, honest
    peek = ROTATION.replace(  # ranks on the return two bars ahead
        "self.roc[d][0]", "d.close.array[min(len(d) + 1, d.buflen() - 1)] / d.close[0]"
    )
    peek = peek.replace("every=5", "every=1")
    biased = check_lookahead(
        peek, bars, fold=fold, n_cuts=4, symbol="AAPL+MSFT", policy=SandboxPolicy(validate=False)
    )
    assert biased.biased and biased.integrity is None, biased


def test_a_fill_on_an_index_feed_is_an_integrity_error() -> None:
    """A regime filter's index feed (``index:SPY``) is read, never traded: the books refuse a
    fill on it, and a symbol job fed one still books its trades flat to flat."""
    bars = {"A": BARS, "index:SPY": BARS * 3}
    job = BacktestJob(
        job_id="p", variant_id="v", code="", symbol="A", bars=bars, fold=FOLD, costs=COSTS
    )
    bought = min(3 * OPEN[3] * 1.0005, 3 * OPEN[3] + 6)
    log = FillLog(fills=[_fill(2, 3, 1.0, bought, data=1)], values=np.full(len(BARS), COSTS.cash))
    with pytest.raises(IntegrityError, match="index feed index:SPY, which a strategy reads"):
        keep_books(job, log)
    # Two partial sales of one long: one trade (flat to flat), not two reductions.
    fills = [
        _fill(2, 3, 10.0, buy_price(3)),
        _fill(4, 5, -4.0, sell_price(5)),
        _fill(6, 7, -6.0, sell_price(7)),
    ]
    single = keep_books(_job(), FillLog(fills=fills, values=_honest_values(fills)))
    fed = keep_books(job, FillLog(fills=fills, values=_honest_values(fills)))
    assert len(fed.result.trade_pnls) == len(single.result.trade_pnls) == 1
    assert fed.result.trade_pnls == single.result.trade_pnls
    assert np.array_equal(fed.values, single.values)
    assert {f.symbol for f in fed.fills} == {"A"}
