from __future__ import annotations

import pytest
from gate_builders import iso_dates, make_result

from backtest.contracts import JobStatus
from backtest.metrics import compute_metrics, equity_from_returns
from gate.aggregate import aggregate_variant

pytestmark = pytest.mark.unit


def test_equal_weight_portfolio_by_date() -> None:
    d = iso_dates(3)
    a = make_result(
        "v", [0.01, 0.02, 0.0], symbol="A", dates=d, trade_pnls=[100.0, -50.0], bars_in_market=1
    )
    b = make_result(
        "v", [0.03, -0.02, 0.02], symbol="B", dates=d, trade_pnls=[30.0], bars_in_market=3
    )
    err = make_result("v", [], symbol="C", status=JobStatus.ERROR, error="ZeroDivisionError")
    m, folds, port = aggregate_variant([a, b, err])
    assert port == pytest.approx([0.02, 0.0, 0.01])
    assert m is not None
    assert m.total_return_pct == pytest.approx((1.02 * 1.0 * 1.01 - 1) * 100)
    assert m.n_trades == 3 and m.win_rate_pct == pytest.approx(200 / 3)
    assert m.exposure_pct == pytest.approx(100 * (1 + 3) / (3 + 3))  # n_obs-weighted mean
    assert m.n_obs == 3
    assert folds == [pytest.approx(m.sharpe)]


def test_partial_date_overlap_averages_what_exists() -> None:
    a = make_result("v", [0.01, 0.02], symbol="A", dates=["2020-01-01", "2020-01-02"])
    b = make_result("v", [0.03], symbol="B", dates=["2020-01-02"])
    _, _, port = aggregate_variant([a, b])
    assert port == pytest.approx([0.01, 0.025])


def test_folds_in_order_with_none_for_failed_fold() -> None:
    f0 = make_result("v", [0.01, -0.005, 0.02, 0.0], fold=0, dates=iso_dates(4))
    f2 = make_result("v", [0.0], fold=2, status=JobStatus.TIMEOUT)
    f1 = make_result(
        "v",
        [0.002, 0.001, -0.004, 0.003],
        fold=1,
        dates=iso_dates(4, start=__import__("datetime").date(2021, 1, 1)),
    )
    m, folds, port = aggregate_variant([f2, f1, f0])
    expected0 = compute_metrics(equity_from_returns([0.01, -0.005, 0.02, 0.0])).sharpe
    expected1 = compute_metrics(equity_from_returns([0.002, 0.001, -0.004, 0.003])).sharpe
    assert folds == [pytest.approx(expected0), pytest.approx(expected1), None]
    assert len(port) == 8 and m is not None and m.n_obs == 8


def test_none_without_ok_results() -> None:
    m, folds, port = aggregate_variant([make_result("v", [], status=JobStatus.ERROR)])
    assert m is None and folds == [None] and port == []
    assert aggregate_variant([]) == (None, [], [])


def test_turnover_is_the_obs_weighted_mean_and_holding_spans_all_jobs() -> None:
    from gate.aggregate import aggregate_variant

    a = make_result("v", [0.001] * 100, symbol="A", trade_pnls=[1.0] * 4, bars_in_market=60)
    b = make_result("v", [0.002] * 300, symbol="B", trade_pnls=[1.0] * 2, bars_in_market=90)
    a.metrics = a.metrics.model_copy(update={"turnover_annual": 4.0})
    b.metrics = b.metrics.model_copy(update={"turnover_annual": 2.0})
    m, _, _ = aggregate_variant([a, b])
    assert m.turnover_annual == pytest.approx((4.0 * 100 + 2.0 * 300) / 400)
    assert m.avg_holding_bars == pytest.approx((60 + 90) / 6)
