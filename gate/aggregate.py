"""One variant's verdict input: an equal-weight portfolio over its symbols and folds."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from backtest.contracts import BacktestResult, JobStatus, Metrics
from backtest.metrics import compute_metrics, equity_from_returns


def _portfolio_returns(results: list[BacktestResult]) -> tuple[list[str], list[float]]:
    """Equal-weight across whatever results have a return on each date (rebalanced daily)."""
    by_date: dict[str, list[float]] = defaultdict(list)
    for r in results:
        for d, x in zip(r.return_dates, r.returns, strict=False):
            by_date[d].append(float(x))
    dates = sorted(by_date)  # ISO dates sort chronologically
    return dates, [sum(by_date[d]) / len(by_date[d]) for d in dates]


def _job_obs(r: BacktestResult) -> int:
    return r.metrics.n_obs if r.metrics is not None else len(r.returns)


def _metrics_of(
    results: list[BacktestResult], periods_per_year: int, base: float
) -> Metrics | None:
    _, rets = _portfolio_returns(results)
    if not rets:
        return None
    obs = sum(_job_obs(r) for r in results)
    in_market = sum(r.bars_in_market for r in results)
    # Scale so exposure = sum(bars_in_market)/sum(n_obs): the n_obs-weighted mean of the
    # jobs' exposures (a float on purpose: rounding would bias small samples).
    bars = len(rets) * in_market / obs if obs else 0.0
    metrics = compute_metrics(
        equity_from_returns(rets, base),
        trade_pnls=[p for r in results for p in r.trade_pnls],
        bars_in_market=bars,  # type: ignore[arg-type]
        periods_per_year=periods_per_year,
    )
    # Turnover and holding period of the jobs themselves (each traded its own book): the
    # n_obs-weighted mean turnover, and bars in the market per closed trade over all jobs.
    turns = [
        (r.metrics.turnover_annual, _job_obs(r))
        for r in results
        if r.metrics is not None and r.metrics.turnover_annual is not None
    ]
    n_trades = sum(len(r.trade_pnls) for r in results)
    return metrics.model_copy(
        update={
            "turnover_annual": (
                sum(t * w for t, w in turns) / sum(w for _, w in turns)
                if turns and sum(w for _, w in turns)
                else None
            ),
            "avg_holding_bars": (
                sum(r.bars_in_market for r in results) / n_trades if n_trades else None
            ),
            "orders_rejected": sum(r.metrics.orders_rejected for r in results if r.metrics),
            "borrow_paid": sum(r.metrics.borrow_paid for r in results if r.metrics),
        }
    )


def aggregate_variant(
    results: list[BacktestResult],
    *,
    periods_per_year: int = 252,
    base: float = 100_000.0,
) -> tuple[Metrics | None, list[float | None], list[float]]:
    """(aggregate metrics, per-fold annualised Sharpe in fold order, portfolio returns).

    Only OK results count. The aggregate is None when no OK result carries returns;
    a fold's Sharpe is None when it has no OK result or an undefined Sharpe.
    """
    ok = [r for r in results if r.status == JobStatus.OK]
    metrics = _metrics_of(ok, periods_per_year, base)
    _, port = _portfolio_returns(ok)
    fold_sharpes: list[float | None] = []
    for fold in sorted({r.fold for r in results}):
        fm = _metrics_of([r for r in ok if r.fold == fold], periods_per_year, base)
        fold_sharpes.append(None if fm is None else fm.sharpe)
    return metrics, fold_sharpes, port


def portfolio_series(results: list[BacktestResult]) -> dict[str, float]:
    """One variant's equal-weight portfolio return per ISO date, from its ok results."""
    dates, rets = _portfolio_returns([r for r in results if r.status == JobStatus.OK])
    return dict(zip(dates, rets, strict=True))


def common_matrix(series: list[dict[str, float]]) -> np.ndarray:
    """T x N matrix of the series on the dates they all share (the input of PBO by CSCV:
    every column measured on the same periods)."""
    if not series:
        return np.zeros((0, 0))
    common = sorted(set.intersection(*(set(s) for s in series)))
    return np.array([[s[d] for s in series] for d in common], dtype=float).reshape(
        len(common), len(series)
    )
