"""Seeded synthetic universes for calibrating the quality gate.

Seven kinds, same machinery:

``null``  (no edge)  — each symbol's daily simple return is ``drift + sigma_t * z_t``:
    GARCH(1,1) volatility clustering around a per-symbol long-run volatility drawn from
    ``vol_range`` (20-40% a year), Student-t innovations (df 4, scaled to unit variance)
    mixed with a common market shock (correlation ``market_corr``), and a common drift
    (``drift_annual``; 0 by default). Nothing is predictable from the past except the
    volatility level, so no timing rule beats holding: with a drift, buy and hold earns
    it, and a timing rule earns at most its share of it (no alpha over buy and hold).

``planted`` (known edge: time-series momentum) — the same, plus a persistent, hidden
    drift regime per symbol: a symmetric two-state Markov chain (up / down, expected
    duration ``regime_days`` days) adds ``+/- regime_sharpe * sigma_lr / sqrt(252)`` to
    every daily return. The regimes average out (buy and hold earns only ``drift_annual``),
    but the trailing return predicts the next one: time-series momentum. Its strength is
    stated as the annualised Sharpe of the drift inside a regime (``regime_sharpe``);
    ``describe`` measures what rules can get out of it (the oracle that knows the state,
    and a plain "long when the trailing 60-day return is positive" rule).

    Default strength (``regime_sharpe`` 3, ``regime_days`` 120), measured over 40 seeds of
    3 symbols x 8 years at zero drift: the 60-day momentum rule, long-only, after 0.15%
    per side, earns an equal-weight portfolio Sharpe of 2.0 on average (10th percentile
    1.2, minimum 0.8); the long-only oracle 3.5; buy and hold ~0. At ``regime_sharpe`` 2
    the same rule earns 1.1 (10th percentile 0.5): a much harder target.

``reversion`` (known edge: short-horizon mean reversion) — the log price is a drifting
    random walk plus a hidden Ornstein-Uhlenbeck deviation with a half-life of
    ``reversion_half_life`` days, which carries ``reversion_share`` of the daily return
    variance (so the realised volatility is still the symbol's ``vol_range`` draw, and
    the clustering and fat tails act on both parts). A price pushed below its recent
    mean tends to come back within days: daily returns are negatively autocorrelated
    (lag-1 about -0.08 at the defaults), while the deviation averages out, so buy and hold
    earns only ``drift_annual`` (the mean simple return is corrected for the deviation's
    convexity). ``describe`` measures a Bollinger-style rule: long when the close is
    2 standard deviations below its 20-day mean, out when it is back above the mean.

    Default strength (``reversion_share`` 0.8, ``reversion_half_life`` 3 days), over
    10 seeds of 3 symbols x 8 years at 5% drift: that rule earns an equal-weight portfolio
    Sharpe of 1.9 after 0.15% per unit of turnover (10th percentile 1.5-1.7 depending on
    the seeds, t-stat of its alpha over buy and hold ~5.7); the lab's own
    ``bollinger_reversion`` template, run through the engine with next-open fills, 1.75
    (10th percentile 1.3); the long-only oracle 3.6; buy and hold 0.1-0.2; the 60-day
    momentum rule loses (-1.4). Why this second effect: it is the mirror image of momentum
    (returns anti-correlated, not correlated), it lives at a horizon of days instead of
    months, and the lab has a family for it (mean_reversion: RSI, Bollinger). A weaker
    share (0.7) brings the template down to ~1.45.

``cross_sectional`` (known edge: cross-sectional momentum) — the null's returns, plus a drift
    that every ``xs_rebalance`` days is set by each symbol's rank among the universe on its
    return over the last ``xs_lookback`` days (skipping the last ``xs_skip``): the leader gets
    ``+xs_sharpe``, the laggard ``-xs_sharpe`` (annualised Sharpe units of the universe's mean
    volatility), the others in between, so the tilts sum to zero at every date. The average
    symbol earns only ``drift_annual``: buy and hold of the universe has no edge, and with a
    strong common factor (``market_corr``) one symbol's own past return says little; its
    rank against the others says what comes next. Only a strategy that compares the symbols
    (``strategies.portfolio``) can use it.

    Default strength (``xs_sharpe`` 1), measured on 4 seeds of 10 symbols x 8 years at 5%
    drift through the engine (0.1% commission + 0.05% slippage): the lab's default
    cross-sectional template (top 2 of 10 on 126-day returns skipping 21, monthly) earns a
    Sharpe of 1.0-1.6 long only (alpha t over the universe's buy and hold 2.4-6.5, beta ~1)
    and 1.9-3.1 long/short (alpha t 4.7-8.4, beta ~0). At ``xs_sharpe`` 0.75: 0.7-1.1 long
    only (alpha t 1.9-4.5).

``vol_regime`` (known edge: momentum in calm markets only) — a market-wide two-state
    volatility chain (calm ``calm_days`` ~250 days, storm ``storm_days`` ~100 days, a storm's
    volatility ``storm_vol_mult`` 3x the calm one) multiplies every symbol's GARCH volatility;
    ``planted``'s momentum drift regimes act only while it is calm. A plain momentum rule
    carries the storms' whipsaw and drawdowns; a volatility target or filter keeps the calm
    edge. The ``planted-vol-regime`` scenario (calm volatility 15-25%, ``regime_sharpe`` 4),
    measured on 10 seeds of 3 symbols x 8 years (in-sample 80%) with the 60-day rule after
    0.15% per unit of turnover: raw portfolio Sharpe median 1.07 (maximum drawdown 26%),
    volatility-targeted at 15% 1.79 (13%), an ATR(14)/close < 4% filter 1.41 (17%). The
    ``planted-drawdown`` scenario is ``planted`` on volatile, correlated names (45-65%,
    ``market_corr`` 0.6): raw drawdown median 33% (over 20% in 9 of 10 seeds), volatility
    targeted 11% (all under 20%), Sharpe 1.78 raw, 2.0 targeted.

``earnings`` (known edge: post-earnings-announcement drift) and ``earnings_null`` (its
    null) — the null's returns plus quarterly earnings reports written in the corpus layout
    (the run's ``--alt-data``), each moving its first tradable session, and (``earnings``
    only) a drift the surprise's way for ``pead_days`` returns after a report whose surprise
    is at least ``pead_threshold_pct``: ``swarm.calibration.synthetic_earnings``.

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

from swarm.calibration.synthetic_earnings import (
    SURPRISES,
    drift_sides,
    earnings_rule_returns,
    reaction_shocks,
    report_sides,
    report_table,
)

Kind = Literal[
    "null", "planted", "reversion", "cross_sectional", "vol_regime", "earnings", "earnings_null"
]
# Each kind draws from its own random stream: the same seed never gives two kinds the same shocks.
_KIND_STREAM: dict[str, int] = {
    "null": 0,
    "planted": 1,
    "reversion": 2,
    "cross_sectional": 3,
    "vol_regime": 4,
    # The earnings null shares the planted kind's stream: one seed, the same shocks and reports.
    "earnings": 5,
    "earnings_null": 5,
}
EARNINGS_KINDS = ("earnings", "earnings_null")
TRADING_DAYS = 252
ALT_DIR = "alt"  # an earnings universe's alternative-data folder, inside its CSV folder
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
    # planted momentum edge (kind="planted" only)
    regime_sharpe: float = 3.0  # annualised Sharpe of the drift inside a regime
    regime_days: float = 120.0  # expected regime duration in trading days
    # planted mean-reversion edge (kind="reversion" only)
    reversion_share: float = 0.8  # share of the daily return variance that reverts
    reversion_half_life: float = 3.0  # half-life of a deviation, in trading days
    # planted cross-sectional edge (kind="cross_sectional" only)
    xs_sharpe: float = 1.0  # annualised Sharpe of the leader's (and minus the laggard's) tilt
    xs_lookback: int = 126  # trading days of the ranking return
    xs_skip: int = 21  # most recent days left out of it
    xs_rebalance: int = 21  # days between re-rankings
    # volatility regimes (kind="vol_regime" only): a market-wide calm / storm chain; the
    # momentum drift regimes (regime_sharpe, regime_days) act only while it is calm
    storm_vol_mult: float = 3.0  # a storm's volatility as a multiple of the calm one
    calm_days: float = 250.0  # expected duration of a calm, trading days
    storm_days: float = 100.0  # expected duration of a storm
    # planted post-earnings drift (kinds "earnings" / "earnings_null": swarm.calibration.
    # synthetic_earnings); the null draws the same reports and reactions, without the drift
    pead_sharpe: float = 2.0  # annualised Sharpe of the drift after an eligible report
    pead_threshold_pct: float = 5.0  # |surprise| in % of the consensus that starts a drift
    pead_days: int = 40  # returns the drift lasts, from the first one a rule can earn
    pead_reaction: float = 1.0  # report-session move: daily sd per 10% surprise (capped at 3)
    symbols: tuple[str, ...] = field(default=())

    def symbol_names(self) -> list[str]:
        """The symbols' names: the spec's own, else SYNA … SYNZ, SYNAA, SYNAB … (letters
        only, so no two name one file: past Z, ``chr`` gave ``SYN[`` and ``SYNa``)."""
        if self.symbols:
            return list(self.symbols)
        return [f"SYN{_letters(i)}" for i in range(self.n_symbols)]


def _letters(i: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA, 27 -> AB … (spreadsheet columns)."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = chr(ord("A") + r) + out
    return out


@dataclass
class Universe:
    spec: UniverseSpec
    bars: dict[str, pd.DataFrame]  # symbol -> OHLCV indexed by date
    regimes: dict[str, np.ndarray]  # symbol -> +1/-1 per bar (zeros unless "planted")
    vol_annual: dict[str, float]  # symbol -> long-run annual volatility
    # symbol -> hidden log-price deviation per bar (kind "reversion" only)
    deviation: dict[str, np.ndarray] = field(default_factory=dict)
    # the earnings reports in the corpus columns (kinds "earnings" / "earnings_null" only)
    reports: pd.DataFrame | None = None


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


def _two_state_path(
    rng: np.random.Generator, n: int, off_days: float, on_days: float
) -> np.ndarray:
    """A two-state Markov chain (False / True) with expected durations ``off_days`` and
    ``on_days``, started in its stationary distribution."""
    p_on, p_off = 1.0 / max(off_days, 1.0), 1.0 / max(on_days, 1.0)
    u = rng.random(n)
    out = np.empty(n, dtype=bool)
    on = bool(rng.random() < p_on / (p_on + p_off))
    for t in range(n):
        if t and u[t] < (p_off if on else p_on):
            on = not on
        out[t] = on
    return out


def _garch_sigma(shock: np.ndarray, s_lr: float, spec: UniverseSpec) -> np.ndarray:
    """Daily volatility path of GARCH(1,1) around ``s_lr``, driven by unit-variance ``shock``."""
    n = len(shock)
    h_lr = s_lr**2
    omega = h_lr * (1.0 - spec.garch_alpha - spec.garch_beta)
    h_cap = (_MAX_VOL_MULT * s_lr) ** 2
    sigma = np.empty(n)
    h = h_lr
    for t in range(n):
        sigma[t] = math.sqrt(h)
        u = sigma[t] * shock[t]
        h = min(omega + spec.garch_alpha * u * u + spec.garch_beta * h, h_cap)
    return sigma


def _reverting_returns(
    z: np.ndarray, e: np.ndarray, s_lr: float, drift: float, spec: UniverseSpec
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(simple returns, sigma, hidden deviation) of a random walk plus an OU deviation.

    ``z`` drives the random walk, ``e`` the deviation; both are unit-variance and the
    GARCH volatility follows their mix, so the whole daily move clusters. The deviation's
    innovations are scaled so that its daily changes carry ``reversion_share`` of the
    variance; the log drift loses half that variance so the mean simple return stays
    ``drift`` (the deviation adds no return, only timing).
    """
    w = spec.reversion_share
    phi = 0.5 ** (1.0 / spec.reversion_half_life)
    sigma = _garch_sigma(math.sqrt(1.0 - w) * z + math.sqrt(w) * e, s_lr, spec)
    walk = np.maximum(drift + sigma * math.sqrt(1.0 - w) * z, -0.5)
    # Stationary AR(1): var(x) = var(eta) / (1 - phi^2) and var(dx) = 2 var(eta) / (1 + phi).
    eta = sigma * math.sqrt(w * (1.0 + phi) / 2.0) * e
    x = np.empty(len(z))
    level = 0.0
    for t in range(len(z)):
        level = phi * level + eta[t]
        x[t] = level
    dx = np.diff(x, prepend=0.0)
    log_r = np.log1p(walk) + dx - 0.5 * w * sigma**2
    return np.maximum(np.expm1(log_r), -0.5), sigma, x


def generate_universe(spec: UniverseSpec) -> Universe:
    """Daily OHLCV for every symbol of ``spec`` (business days from ``spec.start``)."""
    _check_spec(spec)
    n = int(round(spec.years * TRADING_DAYS))
    if n < 50:
        raise ValueError(f"{spec.years} years is too short for a universe (need >= 50 bars)")
    rng = np.random.default_rng(np.random.SeedSequence([spec.seed, _KIND_STREAM[spec.kind]]))
    dates = pd.bdate_range(pd.Timestamp(spec.start), periods=n)
    names = spec.symbol_names()
    k = len(names)

    market = _student_t(rng, spec.t_df, (n,))
    idio = _student_t(rng, spec.t_df, (n, k))
    shocks = math.sqrt(spec.market_corr) * market[:, None] + math.sqrt(1 - spec.market_corr) * idio
    if spec.kind == "reversion":  # the deviations' own shocks, as correlated as the walk's
        market_dev = _student_t(rng, spec.t_df, (n,))
        idio_dev = _student_t(rng, spec.t_df, (n, k))
        dev_shocks = (
            math.sqrt(spec.market_corr) * market_dev[:, None]
            + math.sqrt(1 - spec.market_corr) * idio_dev
        )

    bars: dict[str, pd.DataFrame] = {}
    regimes: dict[str, np.ndarray] = {}
    vols: dict[str, float] = {}
    deviation: dict[str, np.ndarray] = {}
    drift = spec.drift_annual / TRADING_DAYS
    if spec.kind == "cross_sectional":
        return _cross_sectional(rng, spec, shocks, dates, names, drift)
    reports, sides, reactions = None, {}, {}
    if spec.kind in EARNINGS_KINDS:  # the reports, then the bars they touch
        if spec.pead_days < 1 or spec.pead_threshold_pct < 0:
            raise ValueError("pead_days must be >= 1 and pead_threshold_pct >= 0")
        reports = report_table(rng, names, dates)
        sides, reactions = drift_sides(
            reports, dates, names, threshold_pct=spec.pead_threshold_pct, days=spec.pead_days
        )
    if spec.storm_vol_mult < 1.0:
        raise ValueError(f"storm_vol_mult must be >= 1, got {spec.storm_vol_mult}")
    # Market-wide calm (1) / storm (storm_vol_mult) volatility multiplier, vol_regime only.
    vol_mult = np.ones(n)
    if spec.kind == "vol_regime":
        storm = _two_state_path(rng, n, spec.calm_days, spec.storm_days)
        vol_mult = np.where(storm, spec.storm_vol_mult, 1.0)
    for j, sym in enumerate(names):
        vol_a = float(rng.uniform(*spec.vol_range))
        s_lr = vol_a / math.sqrt(TRADING_DAYS)
        z = shocks[:, j]
        state = np.zeros(n)
        if spec.kind == "reversion":
            ret, sigma, deviation[sym] = _reverting_returns(z, dev_shocks[:, j], s_lr, drift, spec)
        else:
            sigma = _garch_sigma(z, s_lr, spec) * vol_mult
            mu = np.full(n, drift)
            if spec.kind in ("planted", "vol_regime"):
                state = _regime_path(rng, n, spec.regime_days)
                if spec.kind == "vol_regime":  # the edge lives in the calm regime only
                    state = np.where(vol_mult > 1.0, 0.0, state)
                mu = drift + state * spec.regime_sharpe * s_lr / math.sqrt(TRADING_DAYS)
            if spec.kind in EARNINGS_KINDS:  # report-day moves in both, the drift planted only
                z = z + reaction_shocks(reactions[sym], spec.pead_reaction)
                if spec.kind == "earnings":
                    state = sides[sym]
                    mu = drift + state * spec.pead_sharpe * s_lr / math.sqrt(TRADING_DAYS)
            ret = np.maximum(mu + sigma * z, -0.5)  # simple close-to-close returns
        bars[sym] = _ohlcv(rng, ret, sigma, dates, vol_a)
        regimes[sym] = state
        vols[sym] = vol_a
    return Universe(
        spec=spec,
        bars=bars,
        regimes=regimes,
        vol_annual=vols,
        deviation=deviation,
        reports=reports,
    )


def _check_spec(spec: UniverseSpec) -> None:
    """ValueError for a spec whose parameters make no stationary, finite-variance universe."""
    if spec.t_df <= 2:
        raise ValueError(f"t_df must be > 2 for a finite variance, got {spec.t_df}")
    if not 0.0 <= spec.market_corr < 1.0:
        raise ValueError(f"market_corr must be in [0, 1), got {spec.market_corr}")
    if spec.garch_alpha + spec.garch_beta >= 1.0:
        raise ValueError("garch_alpha + garch_beta must be < 1 (stationary variance)")
    if spec.kind not in _KIND_STREAM:
        raise ValueError(f"kind must be one of {', '.join(_KIND_STREAM)}, got {spec.kind!r}")
    if not 0.0 < spec.reversion_share < 1.0:
        raise ValueError(f"reversion_share must be in (0, 1), got {spec.reversion_share}")
    if spec.reversion_half_life <= 0:
        raise ValueError(f"reversion_half_life must be > 0, got {spec.reversion_half_life}")


def _cross_sectional(
    rng: np.random.Generator,
    spec: UniverseSpec,
    shocks: np.ndarray,
    dates: pd.DatetimeIndex,
    names: list[str],
    drift: float,
) -> Universe:
    """Returns whose drift follows each symbol's rank on its own past (see the module doc).

    The volatility paths depend only on the shocks, so they are drawn first; the drifts are
    then set block by block, each block's from the returns generated before it."""
    n, k = shocks.shape
    if k < 2:
        raise ValueError("a cross-sectional universe needs at least 2 symbols")
    vols = {sym: float(rng.uniform(*spec.vol_range)) for sym in names}
    s_lr = np.array([vols[sym] / math.sqrt(TRADING_DAYS) for sym in names])
    sigma = np.column_stack([_garch_sigma(shocks[:, j], s_lr[j], spec) for j in range(k)])
    unit = spec.xs_sharpe * float(s_lr.mean()) / math.sqrt(TRADING_DAYS)
    ret = np.empty((n, k))
    tilt = np.zeros((n, k))
    log_level = np.zeros((n + 1, k))  # cumulative log return before each bar
    current = np.zeros(k)
    span = spec.xs_lookback + spec.xs_skip
    for t in range(n):
        if t % spec.xs_rebalance == 0 and t >= span:
            past = log_level[t - spec.xs_skip] - log_level[t - span]
            ranks = np.argsort(np.argsort(past))  # 0 = the laggard, k - 1 = the leader
            current = (ranks - (k - 1) / 2.0) / ((k - 1) / 2.0)
        tilt[t] = current
        ret[t] = np.maximum(drift + current * unit + sigma[t] * shocks[t], -0.5)
        log_level[t + 1] = log_level[t] + np.log1p(ret[t])
    bars = {
        sym: _ohlcv(rng, ret[:, j], sigma[:, j], dates, vols[sym]) for j, sym in enumerate(names)
    }
    regimes = {sym: tilt[:, j] for j, sym in enumerate(names)}
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
    """Annualised Sharpe of daily returns (0 when they do not vary)."""
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


def reversion_rule_returns(
    close: np.ndarray,
    lookback: int = 20,
    entry_z: float = 2.0,
    cost: float = 0.0,
) -> np.ndarray:
    """Daily returns of a long-only Bollinger-style reversion rule.

    Long from a close more than ``entry_z`` standard deviations (of the last ``lookback``
    closes) below their mean, out at the first close back above the mean; ``entry_z`` 0
    makes it "long while below the mean". Same timing and costs as
    ``momentum_rule_returns``; returns are aligned with theirs from bar ``lookback`` on.
    """
    c = np.asarray(close, dtype=float)
    r = c[1:] / c[:-1] - 1.0
    window = pd.Series(c).rolling(lookback)
    with np.errstate(invalid="ignore", divide="ignore"):  # a flat window has no z: not held
        z = ((c - window.mean().to_numpy()) / window.std().to_numpy())[:-1]
    sig = np.zeros(len(r))
    held = False
    for t, zt in enumerate(z):
        held = bool(np.isfinite(zt) and zt < (0.0 if held else -entry_z))
        sig[t] = 1.0 if held else 0.0
    turnover = np.abs(np.diff(np.concatenate([[0.0], sig])))
    out = sig * r - cost * turnover
    return out[lookback:]


def timing_alpha(rule: np.ndarray, market: np.ndarray) -> tuple[float, float, float]:
    """(annual alpha, beta, t-stat of alpha) of a rule's daily returns over buy and hold.

    Plain OLS. A long-only rule on a drifting market earns a positive Sharpe from its beta
    alone; only the intercept says whether its timing added anything.
    """
    y = np.asarray(rule, dtype=float)
    x = np.column_stack([np.ones(len(y)), np.asarray(market, dtype=float)])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    s2 = float(resid @ resid) / max(len(y) - 2, 1)
    var_alpha = s2 * float(np.linalg.inv(x.T @ x)[0, 0])
    t = float(coef[0] / math.sqrt(var_alpha)) if var_alpha > 0 else 0.0
    return float(coef[0] * TRADING_DAYS), float(coef[1]), t


def describe(
    universe: Universe, lookback: int = 60, cost: float = 0.0015, reversion_lookback: int = 20
) -> dict:
    """Strength of what is in the data, per symbol and for the equal-weight portfolio.

    ``oracle_long_sharpe``: long exactly when the hidden state says the next return is
    expected to be positive (an up regime, or a deviation below zero), before costs.
    ``momentum_long_sharpe``: long while the trailing ``lookback``-day return is positive,
    after ``cost`` per unit of turnover (0.15% = the lab's default commission + slippage).
    ``reversion_long_sharpe``: ``reversion_rule_returns`` (20-day, 2 sd), same costs.
    ``buy_hold_sharpe``: what holding earns (~0 by construction for zero drift).
    ``portfolio_*_alpha_t``: t-stat of the rule's alpha over the equal-weight buy and hold
    (``timing_alpha``): a rule on a drifting market must beat holding, not just be positive.
    """
    per: dict[str, dict[str, float]] = {}
    ports: dict[str, list[np.ndarray]] = {"mom": [], "rev": [], "oracle": [], "bh": []}
    skip = max(lookback, reversion_lookback)  # every series starts on the same bar
    for sym, df in universe.bars.items():
        close = df["close"].to_numpy()
        r = close[1:] / close[:-1] - 1.0
        mom = momentum_rule_returns(close, lookback, cost)
        rev = reversion_rule_returns(close, reversion_lookback, cost=cost)
        if sym in universe.deviation:
            oracle = (universe.deviation[sym][:-1] < 0) * r
        elif np.any(universe.regimes[sym]):
            oracle = (universe.regimes[sym][1:] > 0) * r
        else:
            oracle = np.zeros_like(r)
        per[sym] = {
            "vol_annual": round(universe.vol_annual[sym], 4),
            "buy_hold_sharpe": round(sharpe_annual(r), 3),
            "momentum_long_sharpe": round(sharpe_annual(mom), 3),
            "reversion_long_sharpe": round(sharpe_annual(rev), 3),
            "oracle_long_sharpe": round(sharpe_annual(oracle), 3),
        }
        ports["mom"].append(mom[skip - lookback :])
        ports["rev"].append(rev[skip - reversion_lookback :])
        ports["oracle"].append(oracle[skip:])
        ports["bh"].append(r[skip:])
    port = {k: np.mean(v, axis=0) for k, v in ports.items()}
    mom_alpha, _, mom_t = timing_alpha(port["mom"], port["bh"])
    rev_alpha, _, rev_t = timing_alpha(port["rev"], port["bh"])
    extra = _earnings_strength(universe, cost) if universe.reports is not None else {}
    return extra | {
        "symbols": per,
        "portfolio_momentum_long_sharpe": round(sharpe_annual(port["mom"]), 3),
        "portfolio_reversion_long_sharpe": round(sharpe_annual(port["rev"]), 3),
        "portfolio_oracle_long_sharpe": round(sharpe_annual(port["oracle"]), 3),
        "portfolio_buy_hold_sharpe": round(sharpe_annual(port["bh"]), 3),
        "portfolio_momentum_alpha_annual": round(mom_alpha, 4),
        "portfolio_momentum_alpha_t": round(mom_t, 2),
        "portfolio_reversion_alpha_annual": round(rev_alpha, 4),
        "portfolio_reversion_alpha_t": round(rev_t, 2),
    }


def _earnings_strength(universe: Universe, cost: float) -> dict[str, float]:
    """What the planted earnings drift is worth: the family's rule at the planted threshold
    and length (no delay), long only and long/short, as equal-weight portfolio Sharpes after
    ``cost`` per unit of turnover, and the long-only rule's alpha t over buy and hold."""
    spec, reports = universe.spec, universe.reports
    assert reports is not None
    dates = next(iter(universe.bars.values())).index
    sides = report_sides(reports, dates, list(universe.bars), spec.pead_threshold_pct)
    books: dict[str, list[np.ndarray]] = {"long": [], "ls": [], "bh": []}
    for sym, df in universe.bars.items():
        close = df["close"].to_numpy()
        for key, ls in (("long", False), ("ls", True)):
            books[key].append(
                earnings_rule_returns(
                    close, sides[sym], hold=spec.pead_days, cost=cost, long_short=ls
                )
            )
        books["bh"].append(close[1:] / close[:-1] - 1.0)
    port = {k: np.mean(v, axis=0) for k, v in books.items()}
    _, _, t = timing_alpha(port["long"], port["bh"])
    return {
        "portfolio_earnings_long_sharpe": round(sharpe_annual(port["long"]), 3),
        "portfolio_earnings_ls_sharpe": round(sharpe_annual(port["ls"]), 3),
        "portfolio_earnings_alpha_t": round(t, 2),
        "reports": len(reports),
        "eligible_reports": int(sum(np.count_nonzero(s) for s in sides.values())),
    }


def write_universe(spec: UniverseSpec, out_dir: str | Path) -> dict:
    """Generate ``spec`` and write ``SYMBOL.csv`` files plus ``universe.json`` into ``out_dir``.

    Returns the metadata written to ``universe.json``: the spec, symbols, first and last
    date, and ``describe``'s measured strengths. An earnings universe also writes its reports
    under ``alt/`` in the corpus layout (``alt_data`` in the metadata: the run's --alt-data).
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
    if uni.reports is not None:  # the alternative-data folder a run gets as --alt-data
        alt = out / ALT_DIR
        (alt / SURPRISES.source).parent.mkdir(parents=True, exist_ok=True)
        uni.reports.to_csv(alt / SURPRISES.source, index=False)
        meta["alt_data"] = str(alt)
    (out / "universe.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return meta
