"""Data extractor: price statistics, regime and starting parameters of the in-sample window.

Regime rule (documented here because strategy development relies on it)
------------------------------------------------------------------------
For a window we measure the *yearly return* ``r`` (the total return when the window
spans a year or less, otherwise the CAGR, so the thresholds mean the same thing for a
6-month and a 10-year window), the annualised volatility ``V`` of daily close-to-close
returns, the max drawdown ``D`` (positive %) and the range width ``W`` = (p95 - p5) /
median of the closes. Then, first match wins:

* **high-vol-chop**   V > 40 and |r| < 10: large swings, no net progress;
* **trending-up**     r > 5; "moderate drawdown" means D <= max(20, 1.5 V): a deeper
                      drawdown keeps the label but lowers the confidence;
* **trending-down**   r < -5;
* **range-bound**     otherwise (|r| <= 5); a wide range (W > 0.5) lowers the confidence.

Confidence is 0.5 + 0.5 x (distance to the nearest boundary / scale), clipped to
[0.05, 0.99]: a 25%/yr trend is a confident trending-up, 6%/yr is not.

The rule runs on the whole window and on its last 252 bars (when the window is longer).
If both agree, confidence = mean + 0.1. If they disagree, the whole window carries
weight 0.6 and the recent year 0.4; the label with the larger weighted confidence wins
and its confidence is reduced by half the loser's (floor 0.05).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Any

import numpy as np
import pandas as pd

from swarm.research.models import DataBrief, Regime, SuggestedParameters, SymbolBrief
from swarm.research.rounds import render_study_md

TRADING_DAYS = 252
RECENT_BARS = 252


@dataclass(frozen=True)
class WindowStats:
    n_bars: int
    total_return_pct: float
    yearly_return_pct: float  # total return if <= 1 year, else CAGR
    annual_volatility_pct: float
    max_drawdown_pct: float  # positive: 23.0 = 23% peak-to-trough
    range_width: float  # (p95 - p5) / median of closes


def window_stats(close: np.ndarray) -> WindowStats:
    """Return, volatility, drawdown and price-range statistics of a close series."""
    close = np.asarray(close, dtype=np.float64)
    n = len(close)
    total = close[-1] / close[0] - 1.0
    years = (n - 1) / TRADING_DAYS
    yearly = total if years <= 1.0 else (1.0 + total) ** (1.0 / years) - 1.0
    rets = np.diff(close) / close[:-1]
    vol = float(np.std(rets, ddof=1) * math.sqrt(TRADING_DAYS)) if len(rets) > 1 else 0.0
    peak = np.maximum.accumulate(close)
    mdd = float(np.max(1.0 - close / peak))
    p5, p50, p95 = np.percentile(close, [5, 50, 95])
    return WindowStats(
        n_bars=n,
        total_return_pct=float(total * 100),
        yearly_return_pct=float(yearly * 100),
        annual_volatility_pct=vol * 100,
        max_drawdown_pct=mdd * 100,
        range_width=float((p95 - p5) / p50) if p50 > 0 else float("nan"),
    )


def _conf(margin: float) -> float:
    return float(min(0.99, max(0.05, 0.5 + 0.5 * margin)))


def classify_window(s: WindowStats) -> tuple[Regime, float, str]:
    """Apply the regime rule to one window: (regime, confidence, reason with the numbers)."""
    r, v, d, w = s.yearly_return_pct, s.annual_volatility_pct, s.max_drawdown_pct, s.range_width
    if v > 40 and abs(r) < 10:
        margin = min((v - 40) / 20, (10 - abs(r)) / 10)
        reason = f"vol {v:.1f}% > 40% with yearly return {r:+.1f}% inside +/-10%"
        return Regime.HIGH_VOL_CHOP, _conf(margin), reason
    if r > 5:
        d_mod = max(20.0, 1.5 * v)
        conf = _conf((r - 5) / 20)
        reason = f"yearly return {r:+.1f}% > 5%, drawdown {d:.1f}% vs moderate limit {d_mod:.1f}%"
        if d > d_mod:
            # The trend is there but a deep drawdown makes it a rough ride: trust it less.
            conf = max(0.05, conf * d_mod / d)
            reason += f" (deeper: confidence x {d_mod / d:.2f})"
        return Regime.TRENDING_UP, conf, reason
    if r < -5:
        return Regime.TRENDING_DOWN, _conf((-5 - r) / 20), f"yearly return {r:+.1f}% < -5%"
    conf = _conf((5 - abs(r)) / 5)
    if w > 0.5:
        conf = max(0.05, conf * 0.5 / w)
    reason = f"yearly return {r:+.1f}% within +/-5%, range width {w * 100:.1f}% of median"
    return Regime.RANGE_BOUND, conf, reason


def combine_regimes(
    full: tuple[Regime, float, str], recent: tuple[Regime, float, str] | None
) -> tuple[Regime, float, str]:
    """The universe's regime from the whole window's and the recent year's reads: agreement raises
    confidence, else the weightier wins."""
    if recent is None:
        return full[0], full[1], f"whole window: {full[2]}"
    if full[0] == recent[0]:
        conf = min(0.99, (full[1] + recent[1]) / 2 + 0.1)
        return full[0], conf, f"whole window and last {RECENT_BARS} bars agree ({full[2]})"
    w_full, w_recent = 0.6 * full[1], 0.4 * recent[1]
    win, lose, which = (
        (full, recent, "whole window") if w_full >= w_recent else (recent, full, "recent year")
    )
    conf = max(0.05, win[1] - 0.5 * lose[1])
    reason = (
        f"{which} wins ({win[0].value} {win[1]:.2f}: {win[2]}) over "
        f"{lose[0].value} {lose[1]:.2f} ({lose[2]})"
    )
    return win[0], conf, reason


def basic_quality(bars: pd.DataFrame) -> dict[str, Any]:
    """Minimal quality checks used when the market-data layer passed no report."""
    issues: list[str] = []
    o, h, lo, c = (bars[k].to_numpy(dtype=np.float64) for k in ("open", "high", "low", "close"))
    n_nan = int(np.isnan(np.c_[o, h, lo, c]).any(axis=1).sum())
    if n_nan:
        issues.append(f"{n_nan} bars with missing prices")
    viol = int(((h < np.maximum(o, c)) | (lo > np.minimum(o, c)) | (h < lo)).sum())
    if viol:
        issues.append(f"{viol} OHLC violations (high/low not bracketing open/close)")
    rets = np.diff(c) / c[:-1]
    if len(rets) > 20:
        sd = float(np.nanstd(rets))
        n_out = int((np.abs(rets) > 8 * sd).sum()) if sd > 0 else 0
        if n_out:
            issues.append(f"{n_out} outlier bars (|daily return| > 8 sd = {8 * sd * 100:.1f}%)")
        n_jump = int((np.abs(rets) > 0.30).sum())
        if n_jump:
            issues.append(f"{n_jump} one-day moves > 30% (check for unadjusted splits)")
    zero_vol = int((bars["volume"].to_numpy() <= 0).sum())
    if zero_vol:
        issues.append(f"{zero_vol} bars with zero volume")
    # Coverage against weekdays: exchange holidays cap it near 96% for a clean series.
    expected = len(pd.bdate_range(bars.index[0], bars.index[-1]))
    coverage = 100.0 * len(bars) / expected if expected else 0.0
    return {"coverage_pct": coverage, "issues": issues}


_NOT_ISSUES = {"coverage_pct", "n_bars", "expected_bars", "timeframe", "start", "end"}


def _quality_issues(quality: dict[str, Any]) -> list[str]:
    """Issue lines from a quality report. A report with an ``issues`` list (e.g.
    ``backtest.data.quality.QualityReport.model_dump()``) already summarises its counts; a
    plain count-style dict (``{"gaps": 2}``) is turned into lines."""
    if "issues" in quality:
        return [str(i) for i in quality.get("issues") or []]
    issues = []
    for key, value in quality.items():
        if key in _NOT_ISSUES:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and value:
            issues.append(f"{key}: {value}")
        elif isinstance(value, list) and value:
            issues.append(f"{key}: {len(value)}")
    return issues


def brief_symbol(
    symbol: str, bars: pd.DataFrame, *, quality: dict[str, Any] | None, sha256: str
) -> SymbolBrief:
    """Summarise one symbol's in-sample bars (only the window passed in is used)."""
    if len(bars) < 2:
        raise ValueError(f"{symbol}: need at least 2 bars, got {len(bars)}")
    close = bars["close"].to_numpy(dtype=np.float64)
    full = window_stats(close)
    recent = window_stats(close[-RECENT_BARS:]) if len(close) > RECENT_BARS + 20 else None
    regime, conf, reason = combine_regimes(
        classify_window(full), classify_window(recent) if recent else None
    )
    q = quality if quality is not None else basic_quality(bars)
    p5, p50, p95 = np.percentile(close, [5, 50, 95])
    return SymbolBrief(
        symbol=symbol,
        start=bars.index[0].date().isoformat(),
        end=bars.index[-1].date().isoformat(),
        n_bars=len(bars),
        price_high=float(bars["high"].max()),
        price_low=float(bars["low"].min()),
        price_median=float(p50),
        price_p5=float(p5),
        price_p95=float(p95),
        total_return_pct=full.total_return_pct,
        annual_volatility_pct=full.annual_volatility_pct,
        max_drawdown_pct=full.max_drawdown_pct,
        regime=regime,
        regime_confidence=conf,
        coverage_pct=float(q.get("coverage_pct", float("nan"))),
        quality_issues=_quality_issues(q),
        sha256=sha256,
        yearly_return_pct=full.yearly_return_pct,
        range_width_pct=full.range_width * 100,
        recent_bars=recent.n_bars if recent else None,
        recent_return_pct=recent.total_return_pct if recent else None,
        recent_volatility_pct=recent.annual_volatility_pct if recent else None,
        recent_max_drawdown_pct=recent.max_drawdown_pct if recent else None,
        regime_reasoning=reason,
    )


# family, lookback, stop multiple of daily vol, reward/risk, max hold bars.
# Why: mean reversion trades short swings inside bands (tight stop, quick exit); trends
# need room and time; breakouts sit in between.
_FAMILY_RULES: dict[Regime, tuple[str, str, int, float, float, int]] = {
    Regime.RANGE_BOUND: ("mean_reversion", "mean reversion", 20, 2.0, 1.5, 10),
    Regime.TRENDING_UP: ("momentum", "momentum pullback", 50, 2.5, 2.0, 20),
    Regime.TRENDING_DOWN: ("trend", "trend following, short side or defensive", 50, 3.0, 2.5, 30),
    Regime.HIGH_VOL_CHOP: ("breakout", "volatility breakout", 20, 3.0, 2.0, 15),
}


def suggest_parameters(
    regime: Regime, regime_confidence: float, briefs: list[SymbolBrief]
) -> SuggestedParameters:
    """Starting parameters for the regime's family, stop and take-profit scaled to the median
    volatility."""
    family, label, lookback, stop_k, rr, hold = _FAMILY_RULES[regime]
    # Scale risk to the most recent volatility we have (the recent year when available).
    vols = [b.recent_volatility_pct or b.annual_volatility_pct for b in briefs]
    vol = float(median(vols))
    daily = vol / math.sqrt(TRADING_DAYS)
    # Band width grows with volatility: 25%/yr -> 2.0 sd, 50%/yr -> 2.5 sd (clipped 1.5..3).
    width = round(min(3.0, max(1.5, 1.5 + vol / 50)) * 4) / 4
    stop = round(stop_k * daily, 2)
    take = round(rr * stop, 2)
    reasoning = (
        f"{regime.value} (confidence {regime_confidence:.2f}) across {len(briefs)} symbol(s) "
        f"-> {label}; median annualised volatility {vol:.1f}% = {daily:.2f}% a day; "
        f"stop {stop_k:g} x daily vol = {stop:.2f}%, take-profit {rr:g} x stop = {take:.2f}%, "
        f"Bollinger width {width:g} sd (1.5 + vol/50), lookback {lookback} bars, "
        f"max hold {hold} bars"
    )
    return SuggestedParameters(
        family=family,
        lookback=lookback,
        bollinger_width=width,
        stop_loss_pct=stop,
        take_profit_pct=take,
        max_hold_bars=hold,
        reasoning=reasoning,
    )


def build_data_brief(briefs: list[SymbolBrief]) -> DataBrief:
    """Universe view: confidence-weighted regime vote and starting parameters.

    regime_confidence = (winning weight / total weight) x mean confidence of its voters.
    """
    if not briefs:
        raise ValueError("no symbol briefs")
    weight: dict[Regime, float] = defaultdict(float)
    voters: dict[Regime, list[float]] = defaultdict(list)
    for b in briefs:
        weight[b.regime] += b.regime_confidence
        voters[b.regime].append(b.regime_confidence)
    # Ties break on the enum order so the result is deterministic.
    order = list(Regime)
    regime = max(weight, key=lambda r: (weight[r], -order.index(r)))
    total = sum(weight.values())
    conf = (weight[regime] / total if total else 0.0) * float(np.mean(voters[regime]))
    return DataBrief(
        symbols=briefs,
        regime=regime,
        regime_confidence=conf,
        suggested=suggest_parameters(regime, conf, briefs),
    )


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def render_data_brief_md(brief: DataBrief) -> str:
    """data_brief.md: the regime, one row per symbol, and the suggested parameters with their
    reasoning."""
    lines = [
        "# Data brief (in-sample window only)",
        "",
        f"Universe regime: **{brief.regime.value}** (confidence {brief.regime_confidence:.2f}, "
        f"confidence-weighted vote of {len(brief.symbols)} symbol(s)).",
        "",
        "## Symbols",
        "",
        "| symbol | window | bars | low | p5 | median | p95 | high | total ret % | "
        "yearly ret % | ann. vol % | max DD % | last-252 ret % | regime | conf | coverage % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for b in brief.symbols:
        lines.append(
            f"| {b.symbol} | {b.start}..{b.end} | {b.n_bars} | {b.price_low:.2f} | "
            f"{b.price_p5:.2f} | {b.price_median:.2f} | {b.price_p95:.2f} | {b.price_high:.2f} | "
            f"{b.total_return_pct:+.1f} | {_f(b.yearly_return_pct, '+.1f')} | "
            f"{b.annual_volatility_pct:.1f} | {b.max_drawdown_pct:.1f} | "
            f"{_f(b.recent_return_pct, '+.1f')} | {b.regime.value} | "
            f"{b.regime_confidence:.2f} | {_f(b.coverage_pct, '.1f')} |"
        )
    lines += ["", "## Regime reasoning", ""]
    lines += [f"- **{b.symbol}**: {b.regime_reasoning}" for b in brief.symbols]
    lines += ["", "## Data quality", ""]
    for b in brief.symbols:
        issues = "; ".join(b.quality_issues) if b.quality_issues else "no issues found"
        lines.append(f"- **{b.symbol}** (sha256 `{b.sha256[:12]}`): {issues}")
    s = brief.suggested
    lines += [
        "",
        "## Suggested starting parameters",
        "",
        "| family | lookback | Bollinger width | stop-loss % | take-profit % | max hold bars |",
        "|---|---:|---:|---:|---:|---:|",
        f"| {s.family} | {s.lookback} | {s.bollinger_width:g} | {s.stop_loss_pct:.2f} | "
        f"{s.take_profit_pct:.2f} | {s.max_hold_bars} |",
        "",
        f"Why: {s.reasoning}.",
        "",
    ]
    if brief.study is not None:
        lines += render_study_md(brief.study, brief.studies)
    return "\n".join(lines)
