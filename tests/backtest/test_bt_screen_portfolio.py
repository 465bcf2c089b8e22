"""The portfolio screen equals Backtrader trade for trade (``backtest/screen/portfolio.py``).

The property test draws cross-sectional momentum and rotation specs (every parameter on the lab's
grid, long only or long/short), universes of real corpus symbols, windows and costs, runs the
rendered code through the engine in-process as one portfolio job (the books included) and
requires the same trades (entry and exit dates, size, prices to 1e-6), the same broker value at
every bar and the same metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date

import numpy as np
import pandas as pd
import pytest
from conftest import DAILY_DIR, REPO_ROOT, read_real_bars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from screen_agreement import assert_bankrupt_as_the_books

from backtest.contracts import BacktestJob, CostModel, Fold
from backtest.engine import execute
from backtest.screen import ScreenStatus, screen_portfolio
from backtest.screen.portfolio import LABEL, PortfolioWindow, evaluate
from backtest.trace import fill_rows
from backtest.trade_list import Trade, trades_from_trace_fills
from strategies.codegen import render
from strategies.families import PARAM_SPACE, PORTFOLIO_PARAMS, snap_params, spec_from_template
from strategies.portfolio import LABEL as PORTFOLIO_LABEL
from strategies.portfolio import portfolio_spec
from strategies.regime import INDEX_REGIME
from strategies.spec import Family, PortfolioFamily, StrategySpec

SYMBOLS = ("AAPL", "MSFT", "NVDA", "INTC", "CSCO", "ORCL")
PRICE_TOL = 1e-6


def _fold(start: str, end: str) -> Fold:
    first = date.fromisoformat(start)
    return Fold(
        index=0, warmup_start=date(first.year - 1, 1, 1), start=first, end=date.fromisoformat(end)
    )


def _frames(symbols: tuple[str, ...] | list[str], end: str) -> dict:
    return {s: read_real_bars(s, "2000-01-01", end) for s in symbols}


def _backtrader(spec: StrategySpec, frames: dict, fold: Fold, costs: CostModel):
    job = BacktestJob(
        job_id="screen-portfolio-test",
        variant_id="v",
        code=render(spec),
        symbol=PORTFOLIO_LABEL,
        bars=frames,
        fold=fold,
        costs=costs,
    )
    run = execute(job)
    # The trades a traced portfolio job reports: the books' fills as trace rows, per symbol.
    rows = fill_rows(run.fills, symbols=True)
    return run, trades_from_trace_fills(PORTFOLIO_LABEL, rows)


def _assert_same(bt: list[Trade], sc: list[Trade]) -> None:
    assert len(sc) == len(bt), f"{len(sc)} screen trades vs {len(bt)} Backtrader trades"
    for k, (a, b) in enumerate(zip(bt, sc, strict=True)):
        where = f"trade #{k}: backtrader {a} vs screen {b}"
        assert (a.symbol, a.entry_date, a.exit_date, a.size) == (
            b.symbol,
            b.entry_date,
            b.exit_date,
            b.size,
        ), where
        assert abs(a.entry_price - b.entry_price) <= PRICE_TOL, where
        assert (a.exit_price is None) == (b.exit_price is None), where
        if a.exit_price is not None:
            assert abs(a.exit_price - b.exit_price) <= PRICE_TOL, where


def _agree(
    spec: StrategySpec, symbols: list[str], start: str, end: str, costs: CostModel
) -> tuple[int, int]:
    """Screen and Backtrader on the universe; returns (trades, orders refused)."""
    frames = _frames(symbols, end)
    fold = _fold(start, end)
    run, bt_trades = _backtrader(spec, frames, fold, costs)
    window = PortfolioWindow.from_frames(frames, fold)
    res = screen_portfolio(spec, window, costs=costs)
    if run.result.status == "bankrupt":
        assert_bankrupt_as_the_books(res, run.result)
        return 0, 0
    if run.result.status != "ok":  # Backtrader failed: the screen must say error too
        assert res.status == ScreenStatus.ERROR, (run.result.error, res)
        return 0, 0
    assert res.status == ScreenStatus.OK, res.error
    _assert_same(bt_trades, res.trades)
    assert res.metrics == run.result.metrics
    ev = evaluate(spec, window, costs=costs)
    assert np.array_equal(ev.values, np.asarray(run.values))  # the final value included
    assert ev.sharpe() == run.result.metrics.sharpe
    assert res.result.returns == run.result.returns
    assert res.result.return_dates == run.result.return_dates
    assert res.result.trade_pnls == run.result.trade_pnls
    assert res.metrics.borrow_paid == run.result.metrics.borrow_paid  # in the metrics above
    return len(bt_trades), run.result.metrics.orders_rejected


# ---------------------------------------------------------------------------- unit


@pytest.mark.unit
@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (portfolio_spec(PortfolioFamily.PAIRS), "family pairs"),
        (
            portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, filters=(INDEX_REGIME,)),
            f"filter {INDEX_REGIME}",
        ),
        (
            portfolio_spec(PortfolioFamily.ROTATION).model_copy(update={"source_sha": "ab" * 32}),
            "custom code",
        ),
        (spec_from_template(Family.MOMENTUM, 0), "family momentum"),
    ],
)
def test_what_it_cannot_reproduce_is_unsupported_by_name(spec: StrategySpec, named: str) -> None:
    frames = _frames(["AAPL", "MSFT"], "2016-12-31")
    window = PortfolioWindow.from_frames(frames, _fold("2016-01-01", "2016-12-31"))
    res = screen_portfolio(spec, window)
    assert res.status == ScreenStatus.UNSUPPORTED and res.trades == [] and res.metrics is None
    assert res.error is not None and res.error.startswith(named), res.error
    assert res.symbol == LABEL == PORTFOLIO_LABEL


# ---------------------------------------------------------------------------- agreement


@pytest.mark.integration
@pytest.mark.parametrize(
    ("family", "params", "long_short"),
    [
        (PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {}, False),
        (PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1}, True),
        (
            PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
            {"inverse_vol": True, "vol_target": True},
            False,
        ),
        (PortfolioFamily.ROTATION, {}, False),
    ],
)
def test_templates_agree_with_backtrader(
    family: PortfolioFamily, params: dict, long_short: bool
) -> None:
    spec = portfolio_spec(family, params, long_short=long_short)
    trades, _ = _agree(spec, list(SYMBOLS), "2014-01-01", "2017-12-31", CostModel())
    assert trades > 0


@pytest.mark.integration
def test_a_long_short_book_paying_borrow_agrees_with_backtrader() -> None:
    spec = portfolio_spec(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1}, long_short=True
    )
    costs = CostModel(borrow_pct=30.0)
    trades, _ = _agree(spec, list(SYMBOLS), "2014-01-01", "2017-12-31", costs)
    assert trades > 0
    window = PortfolioWindow.from_frames(
        _frames(list(SYMBOLS), "2017-12-31"), _fold("2014-01-01", "2017-12-31")
    )
    paid = screen_portfolio(spec, window, costs=costs).result
    free = screen_portfolio(spec, window).result
    assert paid.metrics.borrow_paid > 0.0 and free.metrics.borrow_paid == 0.0
    assert paid.metrics.final_value < free.metrics.final_value


@pytest.mark.integration
def test_refused_orders_agree_with_backtrader() -> None:
    """Fully invested (gross 1.0), long only: an addition the cash cannot pay (with its
    commission, at the close it is sized on or at the slipped next open) is refused by the
    broker, in the screen as in Backtrader, and the run carries on with what filled."""
    spec = portfolio_spec(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {"gross": 1.0, "rebalance_bars": 5, "xs_lookback": 40, "xs_top_n": 2},
    )
    costs = CostModel(commission_pct=0.5, slippage_pct=0.5, cash=10_000.0)
    trades, refused = _agree(spec, list(SYMBOLS), "2008-01-01", "2010-12-31", costs)
    assert trades > 0 and refused > 0


def _gappy_universe(seed: int, k: int, n: int = 400) -> dict:
    """Random walks whose opens gap by tens of percent on one bar in twenty."""
    rng = np.random.default_rng(seed)
    index = pd.bdate_range("2019-01-01", periods=n)
    frames = {}
    for j in range(k):
        close = 50 * np.exp(np.cumsum(rng.normal(0, 0.03, n)))
        gap = np.where(rng.random(n) < 0.05, rng.normal(0, 0.6, n), rng.normal(0, 0.01, n))
        open_ = np.concatenate([[close[0]], close[:-1]]) * np.exp(gap)
        high = np.maximum(open_, close) * (1 + rng.random(n) * 0.02)
        low = np.minimum(open_, close) * (1 - rng.random(n) * 0.02)
        frames[f"S{j}"] = pd.DataFrame(
            {"open": open_, "high": high, "low": low, "close": close, "volume": 1e6}, index=index
        )
    return frames


@pytest.mark.integration
def test_an_opening_part_the_cash_cannot_pay_is_dropped_as_backtrader_drops_it() -> None:
    """Long/short, fully invested, on open gaps: a buy that covers a short and opens a long at a
    gapped-up open pays the cover, then lacks the cash for the long part. backtrader fills the
    cover alone and refuses the rest (``Margin``); so does the screen."""
    spec = portfolio_spec(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM,
        {
            "gross": 1.0,
            "rebalance_bars": 5,
            "xs_lookback": 20,
            "xs_skip": 0,
            "xs_top_n": 1,
            "vol_lookback": 10,
        },
        long_short=True,
    )
    costs = CostModel(commission_pct=0.1, slippage_pct=0.05, cash=100_000.0)
    fold = Fold(
        index=0, warmup_start=date(2019, 1, 1), start=date(2019, 6, 1), end=date(2020, 6, 30)
    )
    partial = 0
    for seed, k in ((6, 3), (13, 2), (22, 2)):
        frames = _gappy_universe(seed, k)
        run, bt_trades = _backtrader(spec, frames, fold, costs)
        res = screen_portfolio(spec, PortfolioWindow.from_frames(frames, fold), costs=costs)
        assert run.result.status == "ok" and res.status == ScreenStatus.OK, res.error
        _assert_same(bt_trades, res.trades)
        assert res.metrics == run.result.metrics
        # the orders the strategy placed (engine._note_order) against what filled
        placed = {(row[0], row[4]): abs(row[2]) for row in run.strategy._lab_orders}
        partial += sum(abs(f.size) < placed[(f.created.isoformat(), f.symbol)] for f in run.fills)
    assert partial > 0


@pytest.mark.integration
def test_a_close_of_zero_is_an_error_as_in_backtrader() -> None:
    """backtrader's PercentChange divides by the previous close: the run fails; the screen
    says error, not ok."""
    frames = _gappy_universe(1, 3, n=200)
    frames["S1"].iloc[120, frames["S1"].columns.get_loc("close")] = 0.0
    fold = Fold(
        index=0, warmup_start=date(2019, 1, 1), start=date(2019, 3, 1), end=date(2019, 12, 31)
    )
    spec = portfolio_spec(PortfolioFamily.ROTATION, {"xs_lookback": 20, "vol_lookback": 10})
    run, _ = _backtrader(spec, frames, fold, CostModel())
    res = screen_portfolio(spec, PortfolioWindow.from_frames(frames, fold))
    assert run.result.status == "error" and "ZeroDivisionError" in (run.result.error or "")
    assert res.status == ScreenStatus.ERROR and res.error.startswith("ZeroDivisionError")


def _spec_strategy() -> st.SearchStrategy[StrategySpec]:
    def grid(name: str) -> st.SearchStrategy:
        r = PARAM_SPACE[name]
        steps = int(round((r.high - r.low) / r.step))
        return st.integers(0, steps).map(lambda k: r.low + k * r.step)

    @st.composite
    def build(draw: st.DrawFn) -> StrategySpec:
        family = draw(
            st.sampled_from([PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, PortfolioFamily.ROTATION])
        )
        params = {}
        for name, default in PORTFOLIO_PARAMS[family].items():
            if isinstance(default, bool):
                params[name] = draw(st.booleans())
            else:
                params[name] = draw(grid(name))
        spec = portfolio_spec(family, snap_params(params), long_short=draw(st.booleans()))
        return spec

    return build()


@pytest.mark.integration
@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    spec=_spec_strategy(),
    symbols=st.lists(st.sampled_from(SYMBOLS), min_size=2, max_size=6, unique=True),
    first_year=st.integers(2003, 2018),  # every symbol has bars (and a warm-up year) by then
    years=st.integers(1, 3),
    commission=st.sampled_from([0.0, 0.1, 0.5]),
    slippage=st.sampled_from([0.0, 0.05, 0.5]),
    cash=st.sampled_from([10_000.0, 100_000.0]),
    borrow=st.sampled_from([0.0, 3.0, 40.0]),
)
def test_random_portfolio_specs_agree_with_backtrader_trade_for_trade(
    spec: StrategySpec,
    symbols: list[str],
    first_year: int,
    years: int,
    commission: float,
    slippage: float,
    cash: float,
    borrow: float,
) -> None:
    if not all((DAILY_DIR / f"{s}.csv").exists() for s in symbols):
        pytest.skip("real corpus not found")
    costs = CostModel(
        commission_pct=commission, slippage_pct=slippage, cash=cash, borrow_pct=borrow
    )
    end_year = min(first_year + years - 1, 2019)
    _agree(spec, symbols, f"{first_year}-01-01", f"{end_year}-12-31", costs)


# ---------------------------------------------------------------------------- CLI


@pytest.mark.integration
def test_screen_cli_screens_a_portfolio_spec_as_backtrader(tmp_path, daily_dir) -> None:
    spec = portfolio_spec(
        PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1}, long_short=True
    )
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    symbols = ["AAPL", "MSFT", "NVDA", "INTC"]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "backtest.screen",
            str(spec_file),
            "--data-dir",
            str(daily_dir),
            "--tickers",
            ",".join(symbols),
            "--start",
            "2015-01-01",
            "--end",
            "2016-12-31",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["status"] == "ok" and report["error"] is None
    # The CLI's warm-up is 365 calendar days before --start.
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 1), start=date(2015, 1, 1), end=date(2016, 12, 31)
    )
    run, bt_trades = _backtrader(spec, _frames(symbols, "2016-12-31"), fold, CostModel())
    assert bt_trades and report["trades"] == [t.model_dump() for t in bt_trades]
    assert report["metrics"] == run.result.metrics.model_dump(mode="json")
