"""Equity that cannot go through zero (issue 24): the margin rule (``backtest.margin``).

Red-team payloads shorted 40x and 100x the capital: backtrader's stock-like broker credits a
short sale to cash, so every order was affordable, the equity went through zero, and the lab
reported a Sharpe of 10.7 on a final value of -2.7e19, or ``ok`` at -157 %. Each payload now
runs with and without the lint, through the sandbox, the CLI and the pool's walk-forward path:
at the default cap its orders are refused; with deliberate leverage (a cap of 200) the run is
bankrupt; a child that lifts its own broker's cap is an integrity error. Never ``ok`` with a
figure computed on non-positive equity.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bt_hostile import MODES, Payload, _strategy, bars  # noqa: F401  (bars: a fixture)

from backtest.books import ClaimedFill, FillLog, IntegrityError, keep_books
from backtest.contracts import BacktestJob, BacktestResult, CostModel, Fold, JobStatus
from backtest.engine import execute
from backtest.executors import ProcessPoolBackend
from backtest.margin import (
    MAX_GROSS_LEVERAGE,
    bankrupt_at,
    exposure_after,
    margin_refuses,
    opens,
)
from backtest.metrics import equity_from_returns
from backtest.run import main
from backtest.sandbox import run_sandboxed
from backtest.screen.equity import BooksEquity
from backtest.splits import split_holdout, walk_forward_folds

# Sell 40x the equity every bar (the short piles up), and 100x the equity once.
SHORT_40X = Payload(
    "self.sell(size=int(40 * abs(self.broker.getvalue()) / self.data.close[0]) + 1)",
    lint_passes=True,
)
SHORT_100X = Payload(
    """
    if not self.position:
        self.sell(size=int(100 * self.broker.getvalue() / self.data.close[0]))
    """,
    lint_passes=True,
)
# The child's broker is the child's: lifting its cap makes its fills ones the books refuse.
TAMPERED = Payload(
    """
    self.broker.p.max_gross_leverage = 1000.0
    if not self.position:
        self.sell(size=int(40 * self.broker.getvalue() / self.data.close[0]))
    """
)
PAYLOADS = {"short_40x": SHORT_40X, "short_100x": SHORT_100X}
SANDBOX_MODES = ("lint", "nolint")
DELIBERATE = 200.0  # deliberate leverage the payloads' first orders fit in: the market ruins them


def _code(payload: Payload) -> str:
    return _strategy(payload, Path("/"), Path("/"))


def _job(code: str, frame: pd.DataFrame, fold: Fold, cap: float, job_id: str = "m") -> BacktestJob:
    return BacktestJob(
        job_id=job_id,
        variant_id="margin",
        code=code,
        symbol="AAPL",
        bars=frame,
        fold=fold,
        costs=CostModel(max_gross_leverage=cap),
        timeout_s=30.0,
    )


def _never_through_zero(res: BacktestResult) -> None:
    """No figure of ``res`` comes from non-positive equity."""
    assert res.status in (JobStatus.OK, JobStatus.BANKRUPT, JobStatus.INTEGRITY_ERROR), res
    if res.status == JobStatus.INTEGRITY_ERROR:
        return
    m = res.metrics
    assert m is not None
    equity = equity_from_returns(res.returns, 1.0)
    if res.status == JobStatus.OK:
        assert m.final_value > 0 and m.total_return_pct > -100.0
        assert (equity > 0).all()
    else:
        assert m.total_return_pct == -100.0 and m.final_value == 0.0
        assert (equity[:-1] > 0).all() and equity[-1] == 0.0
        assert "bankrupt on" in res.error


def _expect(res: BacktestResult, cap: float) -> None:
    _never_through_zero(res)
    if cap == MAX_GROSS_LEVERAGE:  # refused, as a broker refuses it: nothing filled
        assert res.status == JobStatus.OK, res
        assert res.metrics.orders_rejected > 0 and res.metrics.n_trades == 0
        assert res.metrics.final_value == CostModel().cash
    else:
        assert res.status == JobStatus.BANKRUPT, res


# ---------------------------------------------------------------------------- the rule


@pytest.mark.unit
def test_what_opens_exposure() -> None:
    assert opens(0, 5) and opens(0, -5) and opens(3, 2) and opens(-3, -2)
    assert opens(3, -5) and opens(-3, 5)  # a reversal opens the other side
    assert not opens(3, -2) and not opens(3, -3) and not opens(-3, 3) and not opens(1, 0)


@pytest.mark.unit
def test_exposure_after_a_fill() -> None:
    # flat, 10,000 cash: short 100 at 100 with 10 commission -> gross 10,000, equity 9,990
    assert exposure_after(10_000.0, [0.0], [99.0], 0, -100.0, 100.0, 10.0) == (10_000.0, 9_990.0)
    # another feed held long is marked at its open; the filled one at the fill price
    gross, equity = exposure_after(5_000.0, [50.0, 0.0], [100.0, 20.0], 1, -100.0, 21.0, 0.0)
    assert gross == 5_000.0 + 2_100.0 and equity == 5_000.0 + 2_100.0 + 5_000.0 - 2_100.0


@pytest.mark.unit
@pytest.mark.parametrize(
    ("gross", "equity", "cap", "refused"),
    [
        (0.0, -5.0, 2.0, False),  # nothing held: nothing to refuse
        (20_000.0, 10_000.0, 2.0, False),  # at the cap
        (20_000.01, 10_000.0, 2.0, True),
        (400_000.0, 10_000.0, 2.0, True),  # the 40x short
        (400_000.0, 10_000.0, 100.0, False),  # deliberate leverage
        (1.0, 0.0, 100.0, True),  # no equity: no exposure at all
        (1.0, -1.0, 100.0, True),
        (1.0, float("nan"), 2.0, True),
    ],
)
def test_the_initial_margin(gross: float, equity: float, cap: float, refused: bool) -> None:
    assert margin_refuses(gross, equity, cap) is refused


@pytest.mark.unit
def test_bankruptcy_is_the_first_bar_at_or_below_zero() -> None:
    assert bankrupt_at([1.0, 2.0, 3.0]) is None
    assert bankrupt_at([1.0, 0.0, -1.0, 2.0]) == 1
    assert bankrupt_at([-1.0, 1.0, -2.0], first=1) == 2
    assert bankrupt_at(np.array([5.0, np.nan])) == 1


@pytest.mark.unit
@pytest.mark.parametrize("first", [0, 1])
def test_the_screens_equity_ends_at_a_bankruptcy_as_the_books(first: int) -> None:
    """The screens' equity (``BooksEquity``) ends at the bust at zero, as the books: a
    screened set that went through zero never ranks on returns from negative equity."""

    class Run(BooksEquity):
        window = SimpleNamespace(first=first)
        values = np.array([100.0, 50.0, -10.0, 20.0])
        cash = 100.0

    assert Run().bankrupt_at() == 2
    base = [100.0] if first else [Run.cash, 100.0]  # the value before the fold's first bar
    assert Run().equity().tolist() == [*base, 50.0, 0.0]
    assert Run().returns().tolist()[-2:] == [-0.5, -1.0]


# ---------------------------------------------------------------------------- the books

# Ten bars rising 100 -> 190: a short loses; high/low 2 either side, close = open + 5.
IDX = pd.bdate_range("2020-01-01", periods=10)
OPEN = np.arange(100.0, 200.0, 10.0)
BARS = pd.DataFrame(
    {"open": OPEN, "high": OPEN + 7, "low": OPEN - 2, "close": OPEN + 5, "volume": 1e6},
    index=IDX,
)
FOLD = Fold(index=0, warmup_start=IDX[0].date(), start=IDX[1].date(), end=IDX[-1].date())
COSTS = CostModel(commission_pct=0.0, slippage_pct=0.0, cash=10_000.0)


def _books(size: float, costs: CostModel = COSTS) -> BacktestResult:
    """A market short of ``size`` placed on bar 1, filled at bar 2's open; honest values."""
    fill = ClaimedFill(0, 1, 2, "sell", size, OPEN[2], 0.0, "Market")
    held = np.where(np.arange(len(IDX)) >= 2, size, 0.0)
    values = COSTS.cash - held * OPEN[2] + held * (OPEN + 5)
    job = BacktestJob(
        job_id="b", variant_id="v", code="", symbol="X", bars=BARS, fold=FOLD, costs=costs
    )
    return keep_books(job, FillLog(fills=[fill], values=values)).result


@pytest.mark.unit
def test_a_forged_fill_beyond_the_margin_is_an_integrity_error() -> None:
    # 10,000 equity, a 40x short at 120: the margined broker refuses it, so no honest
    # broker reported it.
    with pytest.raises(IntegrityError, match="beyond the margin: gross exposure 480000.00"):
        _books(-4_000.0)
    # Within the cap (a 1.5x short) it is booked.
    assert _books(-125.0).status == JobStatus.OK


@pytest.mark.unit
def test_a_run_through_zero_is_bankrupt_and_ends_there() -> None:
    # The same 40x short, deliberately allowed: the equity is below zero at bar 2's close
    # (10,000 - 4,000 x 5); the run ends there at -100 %, no return from negative equity.
    res = _books(-4_000.0, COSTS.model_copy(update={"max_gross_leverage": DELIBERATE}))
    assert res.status == JobStatus.BANKRUPT
    assert res.error.startswith(f"bankrupt on {IDX[2].date()}: the equity reached -10000.00")
    assert res.returns == [0.0, -1.0] and res.return_dates[-1] == IDX[2].date().isoformat()
    assert res.metrics.total_return_pct == -100.0 and res.metrics.max_drawdown_pct == 100.0
    assert res.metrics.final_value == 0.0 and res.metrics.cagr_pct == -100.0


# ---------------------------------------------------------------------------- the payloads


@pytest.mark.integration
@pytest.mark.parametrize("cap", [MAX_GROSS_LEVERAGE, DELIBERATE])
@pytest.mark.parametrize("mode", SANDBOX_MODES)
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_huge_short_through_the_sandbox(name: str, mode: str, cap: float, bars) -> None:  # noqa: F811
    fold = Fold(
        index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31)
    )
    res = run_sandboxed(_job(_code(PAYLOADS[name]), bars, fold, cap), MODES[mode]).result
    _expect(res, cap)


@pytest.mark.integration
def test_a_child_lifting_its_brokers_cap_is_an_integrity_error(bars) -> None:  # noqa: F811
    fold = Fold(
        index=0, warmup_start=date(2015, 1, 2), start=date(2015, 3, 2), end=date(2015, 12, 31)
    )
    res = run_sandboxed(_job(_code(TAMPERED), bars, fold, MAX_GROSS_LEVERAGE), MODES["nolint"])
    assert res.result.status == JobStatus.INTEGRITY_ERROR, res.result
    assert "beyond the margin" in res.result.error


@pytest.mark.integration
@pytest.mark.parametrize("cap", [MAX_GROSS_LEVERAGE, DELIBERATE])
@pytest.mark.parametrize("lint", [True, False])
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_huge_short_through_the_cli(
    name: str, lint: bool, cap: float, tmp_path: Path, daily_dir: Path, capsys
) -> None:
    path = tmp_path / f"{name}.py"
    path.write_text(_code(PAYLOADS[name]))
    argv = [
        str(path),
        "--data-dir",
        str(daily_dir),
        "--tickers",
        "AAPL",
        "--start",
        "2015-01-01",
        "--end",
        "2016-12-31",
        "--max-gross-leverage",
        str(cap),
    ]
    assert main(argv + ([] if lint else ["--skip-validation"])) == 0
    out = json.loads(capsys.readouterr().out)
    if cap == MAX_GROSS_LEVERAGE:
        assert out["status"] == "ok" and out["metrics"]["n_trades"] == 0
        assert out["metrics"]["orders_rejected"] > 0 and out["warnings"]
        assert out["metrics"]["final_value"] == CostModel().cash
    else:
        assert out["status"] == "bankrupt" and "bankrupt on" in out["error"]
        assert out["metrics"]["total_return_pct"] == -100.0


@pytest.mark.integration
def test_the_cli_refuses_a_cap_out_of_range(tmp_path: Path, daily_dir: Path, capsys) -> None:
    path = tmp_path / "s.py"
    path.write_text(_code(SHORT_100X))
    argv = [
        str(path),
        "--data-dir",
        str(daily_dir),
        "--tickers",
        "AAPL",
        "--start",
        "2015-01-01",
        "--end",
        "2016-12-31",
        "--max-gross-leverage",
        "0",
    ]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "--max-gross-leverage" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.parametrize("mode", SANDBOX_MODES)
def test_huge_shorts_through_the_pools_walk_forward(mode: str) -> None:
    history = read_real_bars("AAPL", "2012-01-01", "2016-12-31")
    folds = walk_forward_folds(
        history.index, split_holdout(history.index), n_folds=3, warmup_bars=50
    )
    jobs = [
        _job(_code(payload), history, fold, cap, f"{name}|{cap:g}|{fold.index}")
        for name, payload in PAYLOADS.items()
        for cap in (MAX_GROSS_LEVERAGE, DELIBERATE)
        for fold in folds
    ]
    with ProcessPoolBackend(2, policy=MODES[mode]) as pool:
        results = pool.map(jobs)
    assert len(results) == len(jobs) == 12
    for job, res in zip(jobs, results, strict=True):
        assert res.job_id == job.job_id
        _never_through_zero(res)
        if job.costs.max_gross_leverage == MAX_GROSS_LEVERAGE:
            _expect(res, MAX_GROSS_LEVERAGE)
    # Deliberate leverage on a rising AAPL: at least one fold goes through zero, and ends.
    assert any(r.status == JobStatus.BANKRUPT for r in results)


# ---------------------------------------------------------------------------- random leverage


@pytest.mark.integration
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    targets=st.lists(
        st.tuples(st.integers(0, 180), st.sampled_from([-8.0, -3.0, -1.5, 0.0, 1.0, 2.5])),
        min_size=1,
        max_size=20,
    ),
    cap=st.sampled_from([MAX_GROSS_LEVERAGE, 5.0, DELIBERATE]),
    commission=st.sampled_from([0.0, 0.1]),
)
def test_leveraged_paths_are_refused_or_booked_and_never_go_through_zero(
    targets: list[tuple[int, float]], cap: float, commission: float
) -> None:
    """Targets of up to 8x the equity, long and short, on NVDA's 2016 (it tripled): whatever
    the cap, the margined broker's run is one the books accept (an honest broker is never an
    integrity error), booked bit for bit, and no figure comes from non-positive equity.
    (``test_bt_books``'s random paths stay far inside the cap: they pin the replay itself.)"""
    nvda = read_real_bars("NVDA", "2016-01-01", "2016-12-31")
    code = (
        "import backtrader as bt\n\n\nclass S(bt.Strategy):\n"
        f"    plan = {dict(targets)!r}\n\n"
        "    def next(self):\n"
        "        target = self.plan.get(len(self))\n"
        "        if target is not None:\n"
        "            self.order_target_value(target=target * self.broker.getvalue())\n"
    )
    fold = Fold(
        index=0, warmup_start=date(2016, 1, 4), start=date(2016, 1, 4), end=date(2016, 12, 30)
    )
    job = BacktestJob(
        job_id="r",
        variant_id="v",
        code=code,
        symbol="NVDA",
        bars=nvda,
        fold=fold,
        costs=CostModel(commission_pct=commission, max_gross_leverage=cap),
    )
    run = execute(job)
    assert run.result.status in (JobStatus.OK, JobStatus.BANKRUPT), run.result.error
    assert np.array_equal(run.log.values, np.asarray(run.values))
    _never_through_zero(run.result)
