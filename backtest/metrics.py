"""The one metrics function. Every figure the lab reports comes from here.

Conventions: ``equity`` starts with the base value (the capital before the first
measured bar), so ``n_obs`` returns come from ``n_obs + 1`` values. Sharpe uses
the sample standard deviation (ddof=1) and no risk-free rate; kurtosis is raw
(normal = 3), the form the deflated-Sharpe formulas expect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from backtest.contracts import Metrics

PROFIT_FACTOR_CAP = 999.0  # "no losing trade" is reported as the cap, never as infinity


def compute_metrics(
    equity: pd.Series | Sequence[float],
    *,
    trade_pnls: Sequence[float] = (),
    bars_in_market: int = 0,
    periods_per_year: int = 252,
    traded_notional: float | None = None,
) -> Metrics:
    """The metrics of an equity curve (base value first, then one value per bar)."""
    values = np.asarray(equity, dtype=float)
    if values.size < 2:
        raise ValueError("compute_metrics needs at least two equity values (base + one bar)")
    if not np.all(np.isfinite(values)):
        raise ValueError("equity contains NaN or infinite values")
    first, last = values[0], values[-1]
    rets = values[1:] / values[:-1] - 1.0
    n_obs = int(rets.size)

    total_return = last / first - 1.0
    years = n_obs / periods_per_year
    cagr = (last / first) ** (1.0 / years) - 1.0 if last > 0 else -1.0

    mean = float(rets.mean())
    std = float(rets.std(ddof=1)) if n_obs >= 2 else 0.0
    sharpe_pp = mean / std if std > 1e-15 else None
    downside = math.sqrt(float(np.mean(np.minimum(rets, 0.0) ** 2)))
    sortino = mean / downside * math.sqrt(periods_per_year) if downside > 1e-15 else None

    peaks = np.maximum.accumulate(values)
    max_dd = float(np.max(1.0 - values / peaks)) if values.size else 0.0

    pnls = np.asarray(trade_pnls, dtype=float)
    n_trades = int(pnls.size)
    win_rate = float((pnls > 0).mean() * 100.0) if n_trades else None
    gross_win = float(pnls[pnls > 0].sum())
    gross_loss = float(-pnls[pnls < 0].sum())
    if gross_loss > 0:
        profit_factor: float | None = min(gross_win / gross_loss, PROFIT_FACTOR_CAP)
    elif gross_win > 0:
        profit_factor = PROFIT_FACTOR_CAP
    else:
        profit_factor = None

    skew = kurt = None
    if n_obs >= 3 and std > 1e-15:
        # pandas' sample (bias-corrected) moments, as scipy's skew/kurtosis(bias=False);
        # not scipy.stats itself: it would add ~40 MB and 0.4 s to every backtest worker.
        series = pd.Series(rets)
        skew = float(series.skew())
        kurt = float(series.kurt()) + 3.0  # pandas gives excess kurtosis

    return Metrics(
        sharpe=None if sharpe_pp is None else sharpe_pp * math.sqrt(periods_per_year),
        sharpe_per_period=sharpe_pp,
        sortino=sortino,
        cagr_pct=cagr * 100.0,
        total_return_pct=total_return * 100.0,
        max_drawdown_pct=max_dd * 100.0,
        win_rate_pct=win_rate,
        profit_factor=profit_factor,
        n_trades=n_trades,
        exposure_pct=min(100.0, 100.0 * bars_in_market / n_obs),
        final_value=float(last),
        n_obs=n_obs,
        skew=skew,
        kurtosis=kurt,
        turnover_annual=(
            None
            if traded_notional is None
            else float(traded_notional / float(np.mean(values)) / years)
        ),
        avg_holding_bars=float(bars_in_market) / n_trades if n_trades else None,
    )


def strict_json(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None: JSON has neither, and an
    undefined number is recorded as null, as in the contracts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def equity_from_returns(returns: Sequence[float], base: float = 100_000.0) -> np.ndarray:
    """Compound per-period returns into an equity curve that starts with ``base``."""
    r = np.asarray(returns, dtype=float)
    return base * np.concatenate([[1.0], np.cumprod(1.0 + r)])
