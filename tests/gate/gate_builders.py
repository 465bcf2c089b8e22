"""Builders for gate tests: metrics, backtest results and evaluations from a few numbers."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import numpy as np

from backtest.contracts import BacktestResult, JobStatus, Metrics
from backtest.metrics import compute_metrics, equity_from_returns
from gate.contracts import VariantEvaluation

BASE_METRICS: dict[str, Any] = dict(
    sharpe=1.5,
    sharpe_per_period=1.5 / np.sqrt(252),
    sortino=2.0,
    cagr_pct=12.0,
    total_return_pct=40.0,
    max_drawdown_pct=10.0,
    win_rate_pct=50.0,
    profit_factor=1.6,
    n_trades=60,
    exposure_pct=50.0,
    final_value=140_000.0,
    n_obs=750,
    skew=0.0,
    kurtosis=3.0,
)


def make_metrics(**overrides: Any) -> Metrics:
    return Metrics(**{**BASE_METRICS, **overrides})


def iso_dates(n: int, start: date = date(2020, 1, 1)) -> list[str]:
    return [(start + timedelta(days=i)).isoformat() for i in range(n)]


def make_result(
    variant_id: str,
    returns: list[float] | np.ndarray,
    *,
    symbol: str = "AAA",
    fold: int = 0,
    dates: list[str] | None = None,
    trade_pnls: list[float] | None = None,
    bars_in_market: int = 0,
    status: JobStatus = JobStatus.OK,
    error: str | None = None,
) -> BacktestResult:
    rets = [float(x) for x in returns]
    if status != JobStatus.OK:
        return BacktestResult(
            job_id=f"{variant_id}-{symbol}-{fold}",
            variant_id=variant_id,
            symbol=symbol,
            fold=fold,
            status=status,
            error=error or "boom",
        )
    pnls = list(trade_pnls or [])
    m = (
        compute_metrics(equity_from_returns(rets), trade_pnls=pnls, bars_in_market=bars_in_market)
        if rets
        else None
    )
    return BacktestResult(
        job_id=f"{variant_id}-{symbol}-{fold}",
        variant_id=variant_id,
        symbol=symbol,
        fold=fold,
        status=status,
        metrics=m,
        return_dates=dates or iso_dates(len(rets)),
        returns=rets,
        trade_pnls=pnls,
        bars_in_market=bars_in_market,
    )


def make_eval(variant_id: str = "v1", family: str = "momentum", **kw: Any) -> VariantEvaluation:
    kw.setdefault("trial_key", f"key-{variant_id}")
    kw.setdefault("n_jobs", 4)
    kw.setdefault("metrics", None)
    return VariantEvaluation(variant_id=variant_id, family=family, **kw)


# The absolute criteria (the defaults without the alpha rule): tests of the fuzzy machinery,
# failure analysis and evaluation that do not build AlphaStats use these.
ABSOLUTE_CRITERIA_TEXT = (
    "sharpe>=1.0,max_drawdown_pct<=20,win_rate_pct>=40,profit_factor>=1.2,min_trades>=30"
)
