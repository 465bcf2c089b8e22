"""Rules brains of the five technical subagents.

Each reads only the feature bundle. Evidence keys that are bundle keys hold the bundle's
exact value at ``as_of``; anything derived (slopes, %B, pattern statistics) carries a
key that is not a bundle key, e.g. ``SMA_50_slope_20_pct``.
"""

from __future__ import annotations

import math

import numpy as np

from swarm.research.context import ResearchContext, abstain, clip, sign
from swarm.research.features import CANDLE_PATTERNS, FeatureBundle
from swarm.research.models import Domain, Finding

YEAR = 252
RECENT_PATTERN_BARS = 3
MIN_PATTERN_SAMPLE = 10  # signals needed before a pattern's history counts as an edge
# TA-Lib flags these with +100 whatever the direction: they mark indecision, not a side.
NON_DIRECTIONAL = frozenset({"CDLDOJI"})


def _missing(ev: dict[str, float], keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if k not in ev]


def _lagged_change(bundle: FeatureBundle, key: str, lag: int) -> float:
    arr = bundle.data[key]
    if len(arr) <= lag:
        return float("nan")
    return float(arr[-1] - arr[-1 - lag])


def _agreement(components: list[float], direction: float) -> float:
    """Share of components whose sign matches the overall direction."""
    s = sign(direction)
    if s == 0 or not components:
        return 0.0
    return sum(1 for c in components if sign(c) == s) / len(components)


def _too_short(bundle: FeatureBundle, spec: str, indicator: str, missing: list[str]) -> Finding:
    reason = f"{bundle.n_bars} bars are too few: {', '.join(missing)} undefined at {bundle.as_of}"
    return abstain(bundle.symbol, Domain.TECHNICAL, spec, indicator, reason, bundle.as_of)


def trend(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The trend subagent: the moving-average stack, EMA cross, DI and SMA_50 slope, scaled by ADX
    strength."""
    keys = (
        "CLOSE",
        "SMA_20",
        "SMA_50",
        "SMA_200",
        "EMA_12",
        "EMA_26",
        "ADX_14",
        "PLUS_DI_14",
        "MINUS_DI_14",
        "HIGHEST_252",
        "LOWEST_252",
    )
    ev = bundle.snapshot(keys)
    need = ("CLOSE", "SMA_20", "SMA_50", "EMA_12", "EMA_26", "ADX_14", "PLUS_DI_14")
    if miss := _missing(ev, need + ("MINUS_DI_14",)):
        return _too_short(bundle, "trend", "SMA/EMA stack, ADX_14", miss)

    chain = [k for k in ("CLOSE", "SMA_20", "SMA_50", "SMA_200") if k in ev]
    pairs = [sign(ev[a] - ev[b]) for a, b in zip(chain, chain[1:], strict=False)]
    stack = sum(pairs) / len(pairs)  # +1 = close > SMA20 > SMA50 > SMA200
    ema = sign(ev["EMA_12"] - ev["EMA_26"])
    di = sign(ev["PLUS_DI_14"] - ev["MINUS_DI_14"])
    slope = 100 * _lagged_change(bundle, "SMA_50", 20) / ev["SMA_50"]
    slope_s = sign(slope) if math.isfinite(slope) else 0.0
    components = [stack, ema, di, slope_s]
    direction = 0.4 * stack + 0.2 * ema + 0.2 * di + 0.2 * slope_s
    adx = ev["ADX_14"]
    strength = clip((adx - 15) / 25, 0, 1)  # ADX 15 -> no trend, 40 -> full strength
    signal = clip(direction * (0.4 + 0.6 * strength))
    agree = _agreement(components, direction)
    confidence = clip(0.15 + 0.4 * strength + 0.4 * agree, 0, 0.95)

    if math.isfinite(slope):
        ev["SMA_50_slope_20_pct"] = slope
    sr = ""
    if "HIGHEST_252" in ev and "LOWEST_252" in ev:
        to_high = 100 * (ev["CLOSE"] / ev["HIGHEST_252"] - 1)
        to_low = 100 * (ev["CLOSE"] / ev["LOWEST_252"] - 1)
        ev["CLOSE_vs_HIGHEST_252_pct"], ev["CLOSE_vs_LOWEST_252_pct"] = to_high, to_low
        sr = (
            f"; close is {to_high:+.1f}% from the 252-bar high {ev['HIGHEST_252']:.2f} "
            f"(resistance) and {to_low:+.1f}% from the 252-bar low {ev['LOWEST_252']:.2f} "
            f"(support)"
        )
    bull = sum(1 for p in pairs if p > 0)
    sma200 = f"/SMA200 {ev['SMA_200']:.2f}" if "SMA_200" in ev else ""
    slope_txt = f"SMA50 slope {slope:+.2f}% over 20 bars, " if math.isfinite(slope) else ""
    interp = (
        f"Close {ev['CLOSE']:.2f} vs SMA20 {ev['SMA_20']:.2f}/SMA50 {ev['SMA_50']:.2f}{sma200}: "
        f"{bull} of {len(pairs)} adjacent pairs in bullish order; EMA12 {ev['EMA_12']:.2f} "
        f"{'above' if ema > 0 else 'below'} EMA26 {ev['EMA_26']:.2f}; {slope_txt}"
        f"ADX14 {adx:.1f} (strength {strength:.2f}) with +DI {ev['PLUS_DI_14']:.1f} vs "
        f"-DI {ev['MINUS_DI_14']:.1f}{sr}; {agree * 100:.0f}% of trend votes agree."
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.TECHNICAL,
        specialization="trend",
        indicator="SMA_20/50/200 stack, EMA_12/26, ADX_14, DI_14, HIGHEST/LOWEST_252",
        value=adx,
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def momentum(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The momentum subagent: RSI, MACD, stochastics and rate of change, less confident when
    stretched."""
    keys = (
        "RSI_14",
        "MACD_12_26_9",
        "MACDSIGNAL_12_26_9",
        "MACDHIST_12_26_9",
        "STOCHK_14_3_3",
        "STOCHD_14_3_3",
        "ROC_10",
        "ROC_20",
        "ROC_60",
    )
    ev = bundle.snapshot(keys)
    if miss := _missing(ev, keys[:6] + ("ROC_20",)):
        return _too_short(bundle, "momentum", "RSI_14, MACD_12_26_9, STOCH_14_3_3", miss)

    rsi, k, d = ev["RSI_14"], ev["STOCHK_14_3_3"], ev["STOCHD_14_3_3"]
    rsi_s = clip((rsi - 50) / 25)
    macd_s = 0.5 * sign(ev["MACDHIST_12_26_9"]) + 0.5 * sign(ev["MACD_12_26_9"])
    stoch_s = 0.5 * clip((k - 50) / 40) + 0.5 * sign(k - d)
    rocs = [math.tanh(ev["ROC_20"] / 10)]
    if "ROC_60" in ev:
        rocs.append(math.tanh(ev["ROC_60"] / 20))
    roc_s = sum(rocs) / len(rocs)
    components = [rsi_s, macd_s, stoch_s, roc_s]
    signal = clip(0.25 * rsi_s + 0.3 * macd_s + 0.15 * stoch_s + 0.3 * roc_s)
    agree = _agreement(components, signal)
    # Zone: +1 overbought (RSI > 70 or %K > 80), -1 oversold (RSI < 30 or %K < 20).
    zone = 1.0 if rsi > 70 or k > 80 else -1.0 if rsi < 30 or k < 20 else 0.0
    stretched = zone != 0 and sign(zone) == sign(signal)
    confidence = clip(0.15 + 0.5 * agree * min(1.0, 2 * abs(signal)) - 0.15 * stretched, 0, 0.9)
    ev["RSI_14_zone"] = zone
    zone_txt = {1.0: "overbought", -1.0: "oversold", 0.0: "neutral"}[zone]
    roc60 = f", ROC60 {ev['ROC_60']:+.2f}%" if "ROC_60" in ev else ""
    interp = (
        f"RSI14 {rsi:.1f} ({zone_txt} zone); MACD {ev['MACD_12_26_9']:.3f} vs signal "
        f"{ev['MACDSIGNAL_12_26_9']:.3f} (histogram {ev['MACDHIST_12_26_9']:+.3f}); "
        f"Stoch %K {k:.1f} vs %D {d:.1f}; ROC20 {ev['ROC_20']:+.2f}%{roc60}; "
        f"{agree * 100:.0f}% of momentum votes agree with the {signal:+.2f} signal"
        + ("; the move is stretched, so confidence is cut." if stretched else ".")
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.TECHNICAL,
        specialization="momentum",
        indicator="RSI_14, MACD_12_26_9, STOCH_14_3_3, ROC_20/60",
        value=rsi,
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def volatility(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The volatility subagent: position in the Bollinger band and the volatility regime (high leans
    bearish)."""
    keys = (
        "CLOSE",
        "BBANDS_UPPER_20_2",
        "BBANDS_MIDDLE_20_2",
        "BBANDS_LOWER_20_2",
        "ATR_14",
        "NATR_14",
    )
    ev = bundle.snapshot(keys)
    if miss := _missing(ev, keys):
        return _too_short(bundle, "volatility", "BBANDS_20_2, ATR_14, NATR_14", miss)

    up, mid, lo = ev["BBANDS_UPPER_20_2"], ev["BBANDS_MIDDLE_20_2"], ev["BBANDS_LOWER_20_2"]
    pct_b = (ev["CLOSE"] - lo) / (up - lo) if up > lo else 0.5
    width = 100 * (up - lo) / mid
    widths = 100 * (bundle.data["BBANDS_UPPER_20_2"] - bundle.data["BBANDS_LOWER_20_2"])
    widths = (widths / bundle.data["BBANDS_MIDDLE_20_2"])[-YEAR:]
    widths = widths[np.isfinite(widths)]
    width_pctile = float(100 * np.mean(widths <= width))
    natr_hist = bundle.data["NATR_14"][-YEAR:]
    natr_hist = natr_hist[np.isfinite(natr_hist)]
    natr_med = float(np.median(natr_hist))
    ratio = ev["NATR_14"] / natr_med if natr_med > 0 else 1.0
    regime = "high" if ratio > 1.25 else "low" if ratio < 0.8 else "normal"
    squeeze = width_pctile <= 20
    # Position in the band tilts the read; equity volatility expands in sell-offs, so a
    # high-volatility regime leans bearish and a calm one slightly bullish.
    signal = clip(
        0.4 * clip((pct_b - 0.5) * 2)
        - (0.2 if regime == "high" else 0.0)
        + (0.1 if regime == "low" else 0.0)
    )
    outside = pct_b > 1 or pct_b < 0
    confidence = clip(
        0.2 + 0.35 * min(1.0, abs(ratio - 1) / 0.5) + 0.2 * (squeeze or outside), 0, 0.85
    )
    ev.update(
        {
            "BBANDS_PCTB_20_2": pct_b,
            "BBANDS_WIDTH_20_2_pct": width,
            "BBANDS_WIDTH_20_2_pctile_252": width_pctile,
            "NATR_14_median_252": natr_med,
            "NATR_14_vs_median_252": ratio,
        }
    )
    interp = (
        f"Close {ev['CLOSE']:.2f} sits at %B {pct_b:.2f} of the 20-bar 2-sd band "
        f"[{lo:.2f}, {up:.2f}]; bandwidth {width:.2f}% of the middle band is at the "
        f"{width_pctile:.0f}th percentile of the last {len(widths)} bars"
        + (" (squeeze)" if squeeze else "")
        + f"; ATR14 {ev['ATR_14']:.3f} = NATR {ev['NATR_14']:.2f}% vs its median over the "
        f"last {len(natr_hist)} bars "
        f"{natr_med:.2f}% (x{ratio:.2f}, {regime} volatility regime)."
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.TECHNICAL,
        specialization="volatility",
        indicator="BBANDS_20_2, ATR_14, NATR_14",
        value=ev["NATR_14"],
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def volume(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The volume subagent: OBV and A/D flow over 20 bars, more confident when it confirms price."""
    keys = ("OBV", "AD", "VOLUME", "VOLUME_SMA_20", "ROC_20")
    ev = bundle.snapshot(keys)
    if miss := _missing(ev, keys):
        return _too_short(bundle, "volume", "OBV, AD, VOLUME_SMA_20", miss)
    vol_avg = ev["VOLUME_SMA_20"]
    if vol_avg <= 0:
        reason = f"VOLUME_SMA_20 is {vol_avg:g} at {bundle.as_of}: no traded volume to read"
        return abstain(bundle.symbol, Domain.TECHNICAL, "volume", "OBV, AD", reason, bundle.as_of)
    # Flows over 20 bars in units of 20 average bars: +1 = every bar was an up-volume bar.
    obv_flow = _lagged_change(bundle, "OBV", 20) / (20 * vol_avg)
    ad_flow = _lagged_change(bundle, "AD", 20) / (20 * vol_avg)
    vol_ratio = ev["VOLUME"] / vol_avg
    confirms = sign(obv_flow) == sign(ev["ROC_20"]) and sign(obv_flow) != 0
    signal = clip(1.5 * (0.6 * obv_flow + 0.4 * ad_flow))
    confidence = clip(
        0.15 + 0.3 * confirms + 0.25 * min(1.0, 3 * abs(obv_flow)) + 0.1 * (vol_ratio > 1.5),
        0,
        0.85,
    )
    ev.update(
        {
            "OBV_change_20_norm": obv_flow,
            "AD_change_20_norm": ad_flow,
            "VOLUME_vs_SMA_20": vol_ratio,
        }
    )
    interp = (
        f"OBV moved {obv_flow:+.2f} and A/D {ad_flow:+.2f} average-volume units per bar "
        f"over 20 bars while price moved {ev['ROC_20']:+.2f}% (ROC20): volume "
        f"{'confirms' if confirms else 'diverges from'} price; last volume is "
        f"x{vol_ratio:.2f} its 20-bar average {vol_avg:,.0f}."
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.TECHNICAL,
        specialization="volume",
        indicator="OBV, AD, VOLUME_SMA_20",
        value=obv_flow,
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )


def pattern_stats(bundle: FeatureBundle, horizon: int) -> tuple[dict[str, float], float]:
    """Forward-return statistics of every pattern inside the window (hit rate: share of
    forward returns in the pattern's direction; for non-directional patterns, share > 0).

    A signal at bar t counts only if t + horizon <= last bar, so every forward window
    ends at or before ``as_of``. Returns (stats keyed ``<PAT>_<bull|bear>_<stat>``,
    unconditional mean forward return in %).
    """
    close = bundle.data["CLOSE"]
    n_valid = len(close) - horizon
    stats: dict[str, float] = {}
    if n_valid <= 0:
        return stats, float("nan")
    fwd = 100 * (close[horizon:] / close[:n_valid] - 1)
    base = float(fwd.mean())
    for name in CANDLE_PATTERNS:
        sig = bundle.data[name][:n_valid]
        sides = (
            (("any", sig != 0, fwd > 0),)
            if name in NON_DIRECTIONAL
            else (("bull", sig > 0, fwd > 0), ("bear", sig < 0, fwd < 0))
        )
        for side, mask, good in sides:
            cnt = int(mask.sum())
            if cnt == 0:
                continue
            stats[f"{name}_{side}_n"] = float(cnt)
            stats[f"{name}_{side}_fwd{horizon}_mean_pct"] = float(fwd[mask].mean())
            stats[f"{name}_{side}_fwd{horizon}_hit_rate"] = float(good[mask].mean())
            if cnt >= 2:
                sd = float(fwd[mask].std(ddof=1))
                if sd > 0:
                    # t-statistic of the pattern's mean against the window's base rate.
                    t = (float(fwd[mask].mean()) - base) / (sd / math.sqrt(cnt))
                    stats[f"{name}_{side}_fwd{horizon}_tstat"] = t
    return stats, base


def pattern(bundle: FeatureBundle, context: ResearchContext) -> Finding:
    """The pattern subagent: candles of the last bars, each voting with its history's t-statistic
    against the base rate."""
    h = context.pattern_horizon
    stats, base = pattern_stats(bundle, h)
    if not math.isfinite(base):
        reason = f"{bundle.n_bars} bars leave no {h}-bar forward window inside the sample"
        return abstain(bundle.symbol, Domain.TECHNICAL, "pattern", "CDL*", reason, bundle.as_of)
    ev: dict[str, float] = dict(stats)
    ev[f"fwd{h}_base_mean_pct"] = base
    n_signals = int(sum(v for k, v in stats.items() if k.endswith("_n")))

    votes: list[float] = []  # t-stat of each recent pattern's history, scaled
    fired: list[str] = []
    for name in CANDLE_PATTERNS:
        recent = bundle.data[name][-RECENT_PATTERN_BARS:]
        hits = np.flatnonzero(recent)
        if len(hits) == 0:
            continue
        last = int(hits[-1])
        bars_ago = RECENT_PATTERN_BARS - 1 - last
        direction = 0.0 if name in NON_DIRECTIONAL else sign(float(recent[last]))
        side = "any" if direction == 0 else "bull" if direction > 0 else "bear"
        ev[f"{name}_last{RECENT_PATTERN_BARS}_value"] = float(recent[last])
        ev[f"{name}_last{RECENT_PATTERN_BARS}_bars_ago"] = float(bars_ago)
        if bars_ago == 0:
            ev[name] = bundle.value(name)  # the bundle's own value at as_of
        cnt = stats.get(f"{name}_{side}_n", 0.0)
        fired.append(f"{name} {side} {bars_ago} bar(s) ago (history n={cnt:.0f})")
        if cnt < MIN_PATTERN_SAMPLE or direction == 0:
            continue
        # A pattern votes with the t-statistic of its own history against the base rate:
        # |t| = 3 is a full vote, a noisy history barely moves the signal.
        t = stats.get(f"{name}_{side}_fwd{h}_tstat", 0.0)
        votes.append(clip(t / 3))
    signal = clip(sum(votes))
    confidence = clip(0.1 + 0.3 * max((abs(v) for v in votes), default=0.0), 0, 0.4)

    best = sorted(
        (k[:-2] for k in stats if k.endswith("_n") and stats[k] >= MIN_PATTERN_SAMPLE),
        key=lambda p: abs(stats.get(f"{p}_fwd{h}_tstat", 0.0)),
        reverse=True,
    )[:2]
    best_txt = "; ".join(
        f"{p} mean {stats[f'{p}_fwd{h}_mean_pct']:+.2f}% "
        f"(n={stats[f'{p}_n']:.0f}, hit {100 * stats[f'{p}_fwd{h}_hit_rate']:.0f}%, "
        f"t {stats.get(f'{p}_fwd{h}_tstat', 0.0):+.2f})"
        for p in best
    )
    interp = (
        f"{n_signals} pattern signals in {bundle.n_bars} bars; unconditional {h}-bar forward "
        f"return {base:+.2f}%"
        + (f"; most distinctive: {best_txt}" if best_txt else "")
        + (
            f". Last {RECENT_PATTERN_BARS} bars: {', '.join(fired)}"
            if fired
            else f". None of {len(CANDLE_PATTERNS)} patterns fired in the last "
            f"{RECENT_PATTERN_BARS} bars"
        )
        + f"; {len(votes)} with n >= {MIN_PATTERN_SAMPLE} vote for signal {signal:+.2f}."
    )
    return Finding(
        symbol=bundle.symbol,
        type=Domain.TECHNICAL,
        specialization="pattern",
        indicator=f"{len(CANDLE_PATTERNS)} TA-Lib CDL patterns, {h}-bar forward returns",
        value=float(len(fired)),
        interpretation=interp,
        signal=signal,
        confidence=confidence,
        evidence=ev,
        as_of=bundle.as_of,
    )
