"""Seeded synthetic universes for calibrating the quality gate.

Two kinds, same machinery:

``null``  (no edge)  — each symbol's daily simple return is ``drift + sigma_t * z_t``:
    GARCH(1,1) volatility clustering around a per-symbol long-run volatility drawn from
    ``vol_range`` (20-40% a year), Student-t innovations (df 4, scaled to unit variance)
    mixed with a common market shock (correlation ``market_corr``), and a small common
    drift (0 by default: no expected excess return). Nothing is predictable from the past
    except the volatility level, so no timing rule has an edge beyond costs.

``planted`` (known edge) — the same, plus a persistent, hidden drift regime per symbol:
    a symmetric two-state Markov chain (up / down, expected duration ``regime_days``
    days) adds ``+/- regime_sharpe * sigma_lr / sqrt(252)`` to every daily return. The
    unconditional drift is still zero (buy and hold earns nothing), but the trailing
    return predicts the next one: time-series momentum. Its strength is stated as the
    annualised Sharpe of the drift inside a regime (``regime_sharpe``); ``describe``
    measures what rules can get out of it (the oracle that knows the state, and a
    plain "long when the trailing 60-day return is positive" rule).

    Default strength (``regime_sharpe`` 3, ``regime_days`` 120), measured over 40 seeds of
    3 symbols x 8 years: the 60-day momentum rule, long-only, after 0.15% per side,
    earns an equal-weight portfolio Sharpe of 2.0 on average (10th percentile 1.2,
    minimum 0.8); the long-only oracle 3.5; buy and hold ~0. At ``regime_sharpe`` 2 the
    same rule earns 1.1 (10th percentile 0.5): a much harder target.

Bars are realistic enough for the engine and the quality report: the close-to-close
return is split into an overnight gap (the open is near the previous close) and an
intraday move; highs and lows extend beyond the body by a half-normal amount scaled by
the day's volatility; volume is log-normal around a per-symbol level and rises with
the size of the move. ``write_universe`` writes ``SYMBOL.csv`` files
(``date,open,high,low,close,volume``) so a run reads them through the normal CSV source.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

Kind = Literal["null", "planted"]
TRADING_DAYS = 252
_MAX_VOL_MULT = 4.0  # GARCH variance is capped at (4 x long-run vol)^2: no runaway paths
_MAX_ABS_Z = 12.0  # t(4) tails are fat, not infinite: clip absurd single-day shocks


@dataclass(frozen=True)
class UniverseSpec:
    """Everything that determines a universe; the same spec and seed give the same bars."""

    kind: Kind = "null"
    seed: int = 0
    n_symbols: int = 3
    start: date = date(2013, 1, 1)
    years: float = 7.0
    vol_range: tuple[float, float] = (0.20, 0.40)  # long-run annual volatility per symbol
    t_df: float = 4.0  # Student-t degrees of freedom of the shocks (fat tails)
    garch_alpha: float = 0.08
    garch_beta: float = 0.90  # persistence alpha + beta = 0.98: realistic clustering
    market_corr: float = 0.3  # pairwise correlation of the shocks through a common factor
    drift_annual: float = 0.0  # common expected simple return per year (no edge: 0)
    # planted edge (ignored for kind="null")
    regime_sharpe: float = 3.0  # annualised Sharpe of the drift inside a regime
    regime_days: float = 120.0  # expected regime duration in trading days
    symbols: tuple[str, ...] = field(default=())

    def symbol_names(self) -> list[str]:
        if self.symbols:
            return list(self.symbols)
        return [f"SYN{chr(ord('A') + i)}" for i in range(self.n_symbols)]


@dataclass
class Universe:
    spec: UniverseSpec
    bars: dict[str, pd.DataFrame]  # symbol -> OHLCV indexed by date
    regimes: dict[str, np.ndarray]  # symbol -> +1/-1 per bar (zeros for null)
    vol_annual: dict[str, float]  # symbol -> long-run annual volatility


def _student_t(rng: np.random.Generator, df: float, shape: tuple[int, ...]) -> np.ndarray:
    """Unit-variance Student-t draws (df > 2)."""
    z = rng.standard_t(df, size=shape) * math.sqrt((df - 2.0) / df)
    return np.clip(z, -_MAX_ABS_Z, _MAX_ABS_Z)


def _regime_path(rng: np.random.Generator, n: int, mean_days: float) -> np.ndarray:
    """A symmetric two-state Markov chain of +1/-1, switching with probability 1/mean_days."""
    p_switch = 1.0 / max(mean_days, 1.0)
    flips = rng.random(n) < p_switch
    flips[0] = False
    first = 1.0 if rng.random() < 0.5 else -1.0
    return first * np.where(np.cumsum(flips) % 2 == 0, 1.0, -1.0)


def generate_universe(spec: UniverseSpec) -> Universe:
    """Daily OHLCV for every symbol of ``spec`` (business days from ``spec.start``)."""
    if spec.t_df <= 2:
        raise ValueError(f"t_df must be > 2 for a finite variance, got {spec.t_df}")
    if not 0.0 <= spec.market_corr < 1.0:
        raise ValueError(f"market_corr must be in [0, 1), got {spec.market_corr}")
    if spec.garch_alpha + spec.garch_beta >= 1.0:
        raise ValueError("garch_alpha + garch_beta must be < 1 (stationary variance)")
    n = int(round(spec.years * TRADING_DAYS))
    if n < 50:
        raise ValueError(f"{spec.years} years is too short for a universe (need >= 50 bars)")
    rng = np.random.default_rng(
        np.random.SeedSequence([spec.seed, 0 if spec.kind == "null" else 1])
    )
    dates = pd.bdate_range(pd.Timestamp(spec.start), periods=n)
    names = spec.symbol_names()
    k = len(names)

    market = _student_t(rng, spec.t_df, (n,))
    idio = _student_t(rng, spec.t_df, (n, k))
    shocks = math.sqrt(spec.market_corr) * market[:, None] + math.sqrt(1 - spec.market_corr) * idio

    bars: dict[str, pd.DataFrame] = {}
    regimes: dict[str, np.ndarray] = {}
    vols: dict[str, float] = {}
    drift = spec.drift_annual / TRADING_DAYS
    for j, sym in enumerate(names):
        vol_a = float(rng.uniform(*spec.vol_range))
        s_lr = vol_a / math.sqrt(TRADING_DAYS)
        h_lr = s_lr**2
        omega = h_lr * (1.0 - spec.garch_alpha - spec.garch_beta)
        h_cap = (_MAX_VOL_MULT * s_lr) ** 2
        z = shocks[:, j]
        sigma = np.empty(n)
        h = h_lr
        for t in range(n):
            sigma[t] = math.sqrt(h)
            u = sigma[t] * z[t]
            h = min(omega + spec.garch_alpha * u * u + spec.garch_beta * h, h_cap)
        if spec.kind == "planted":
            state = _regime_path(rng, n, spec.regime_days)
            mu = drift + state * spec.regime_sharpe * s_lr / math.sqrt(TRADING_DAYS)
        else:
            state = np.zeros(n)
            mu = np.full(n, drift)
        ret = np.maximum(mu + sigma * z, -0.5)  # simple close-to-close returns
        bars[sym] = _ohlcv(rng, ret, sigma, dates, vol_a)
        regimes[sym] = state
        vols[sym] = vol_a
    return Universe(spec=spec, bars=bars, regimes=regimes, vol_annual=vols)


def _ohlcv(
    rng: np.random.Generator,
    ret: np.ndarray,
    sigma: np.ndarray,
    dates: pd.DatetimeIndex,
    vol_annual: float,
) -> pd.DataFrame:
    n = len(ret)
    p0 = float(rng.uniform(20.0, 200.0))
    log_r = np.log1p(ret)
    close = p0 * np.exp(np.cumsum(log_r))
    prev_close = np.concatenate([[p0], close[:-1]])
    # Overnight gap: ~30% of the day's move plus a little independent noise; intraday the rest.
    gap = 0.3 * log_r + rng.normal(0.0, 0.25, n) * sigma
    open_ = prev_close * np.exp(gap)
    body_hi = np.maximum(open_, close)
    body_lo = np.minimum(open_, close)
    high = body_hi * np.exp(np.abs(rng.normal(0.0, 0.5, n)) * sigma)
    low = body_lo * np.exp(-np.abs(rng.normal(0.0, 0.5, n)) * sigma)
    base_volume = float(rng.uniform(5e5, 2e7))
    surprise = np.abs(log_r) / np.maximum(sigma, 1e-12)
    volume = base_volume * np.exp(rng.normal(0.0, 0.3, n) + 0.25 * np.minimum(surprise, 6.0))
    df = pd.DataFrame(
        {
            "open": np.round(open_, 4),
            "high": np.round(high, 4),
            "low": np.round(low, 4),
            "close": np.round(close, 4),
            "volume": np.round(volume).astype(np.int64),
        },
        index=pd.DatetimeIndex(dates, name="date"),
    )
    # Rounding to 4 decimals must not break the OHLC invariants.
    df["high"] = df[["open", "high", "close"]].max(axis=1)
    df["low"] = df[["open", "low", "close"]].min(axis=1)
    return df


def sharpe_annual(returns: np.ndarray) -> float:
    r = np.asarray(returns, dtype=float)
    sd = r.std(ddof=1)
    return float(r.mean() / sd * math.sqrt(TRADING_DAYS)) if sd > 0 else 0.0


def momentum_rule_returns(
    close: np.ndarray, lookback: int = 60, cost: float = 0.0, long_short: bool = False
) -> np.ndarray:
    """Daily returns of "long (or short) by the sign of the trailing ``lookback`` return".

    The signal uses closes up to t and earns the return from t to t+1 (a close-to-close
    proxy for next-open fills); ``cost`` is charged per unit of position change.
    """
    c = np.asarray(close, dtype=float)
    r = c[1:] / c[:-1] - 1.0
    trail = np.full(len(c), np.nan)
    trail[lookback:] = c[lookback:] / c[:-lookback] - 1.0
    sig = np.sign(trail[:-1])
    if not long_short:
        sig = np.maximum(sig, 0.0)
    sig = np.nan_to_num(sig)
    turnover = np.abs(np.diff(np.concatenate([[0.0], sig])))
    out = sig * r - cost * turnover
    return out[lookback:]


def describe(universe: Universe, lookback: int = 60, cost: float = 0.0015) -> dict:
    """Strength of what is in the data, per symbol and for the equal-weight portfolio.

    ``oracle_long_sharpe``: long exactly in the up regimes (knows the hidden state).
    ``momentum_long_sharpe``: long while the trailing ``lookback``-day return is positive,
    after ``cost`` per unit of turnover (0.15% = the lab's default commission + slippage).
    ``buy_hold_sharpe``: what holding earns (~0 by construction for zero drift).
    """
    per: dict[str, dict[str, float]] = {}
    mom_port, oracle_port = [], []
    for sym, df in universe.bars.items():
        close = df["close"].to_numpy()
        r = close[1:] / close[:-1] - 1.0
        mom = momentum_rule_returns(close, lookback, cost)
        state = universe.regimes[sym]
        oracle = (state[1:] > 0) * r if np.any(state) else np.zeros_like(r)
        per[sym] = {
            "vol_annual": round(universe.vol_annual[sym], 4),
            "buy_hold_sharpe": round(sharpe_annual(r), 3),
            "momentum_long_sharpe": round(sharpe_annual(mom), 3),
            "oracle_long_sharpe": round(sharpe_annual(oracle), 3),
        }
        mom_port.append(mom)
        oracle_port.append(oracle[lookback:])
    return {
        "symbols": per,
        "portfolio_momentum_long_sharpe": round(sharpe_annual(np.mean(mom_port, axis=0)), 3),
        "portfolio_oracle_long_sharpe": round(sharpe_annual(np.mean(oracle_port, axis=0)), 3),
    }


def write_universe(spec: UniverseSpec, out_dir: str | Path) -> dict:
    """Generate ``spec`` and write ``SYMBOL.csv`` files plus ``universe.json`` into ``out_dir``.

    Returns the metadata written to ``universe.json``: the spec, symbols, first and last
    date, and ``describe``'s measured strengths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    uni = generate_universe(spec)
    for sym, df in uni.bars.items():
        frame = df.reset_index()
        frame["date"] = frame["date"].dt.strftime("%Y-%m-%d")
        frame.to_csv(out / f"{sym}.csv", index=False)
    first = min(df.index[0] for df in uni.bars.values()).date()
    last = max(df.index[-1] for df in uni.bars.values()).date()
    meta = {
        "spec": asdict(spec) | {"start": spec.start.isoformat()},
        "symbols": list(uni.bars),
        "start": first.isoformat(),
        "end": last.isoformat(),
        "strength": describe(uni),
    }
    (out / "universe.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
