"""What a RESEARCH round can study besides the first round's indicator reading.

Each study is a pure function of in-sample closes (symbol -> pd.Series of the window the
caller passes: the holdout never reaches here) and returns a ``StudyResult``: the numbers,
one line per conclusion, the families the numbers favour and the starting parameters they
suggest. ``swarm.research.rounds`` chooses which study a round runs; the data extractor
runs it and writes what it found in the data brief.

* **horizons**: the variance ratio of h-bar log returns (Lo and MacKinlay 1988, z under
  i.i.d. returns) per symbol, averaged. VR > 1 means h-bar moves persist (trend, momentum at
  that horizon); VR < 1 means they revert (mean reversion). The strongest |z| wins.
* **cross_section**: the rank information coefficient (Spearman across symbols) of the
  past L-bar return against the next month's, every month, and its t-stat: positive means
  ranks persist (cross-sectional momentum, rotation), negative means they reverse; plus
  the cross-sectional dispersion of monthly returns (the room a ranking has to earn).
* **pairs**: for every pair, the correlation of daily log returns and the Engle-Granger
  cointegration p-value of log prices (statsmodels ``coint``), the hedge ratio and the
  spread's half-life (AR(1)); the most cointegrated pair is the pairs family's candidate.
* **subperiods**: the data extractor's regime rule per calendar year, voted across symbols:
  how often the regime changes, which regime dominates, which one held last.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from swarm.research.data_extractor import classify_window, window_stats
from swarm.research.models import Regime

HORIZONS: tuple[int, ...] = (5, 10, 20, 50, 100, 200)
# The entries' own horizon parameters (strategies.blocks): trend-following / reverting.
HORIZON_PARAMS: dict[bool, tuple[str, ...]] = {
    True: ("fast_period", "roc_period", "donchian_period"),
    False: ("bb_period", "rsi_period"),
}
XS_LOOKBACKS: tuple[int, ...] = (21, 63, 126, 252)
XS_STEP = 21  # rebalance and forward window of the cross-sectional study: a month
MAX_PAIR_SYMBOLS = 12  # 66 pairs: Engle-Granger on each stays within seconds
COINT_ALPHA = 0.05
COINT_MAXLAG = (
    10  # ADF lags up to two trading weeks, chosen by AIC (the default search is ~30x slower)
)
MIN_BARS = 60
REGIME_FAMILIES: dict[Regime, list[str]] = {
    Regime.TRENDING_UP: ["momentum", "trend"],
    Regime.TRENDING_DOWN: ["trend", "volatility"],
    Regime.RANGE_BOUND: ["mean_reversion"],
    Regime.HIGH_VOL_CHOP: ["breakout", "volatility"],
}


@dataclass
class StudyResult:
    """What one study found. ``numbers`` are the exact values the lines cite."""

    lines: list[str]
    numbers: dict[str, float] = field(default_factory=dict)
    families: list[str] = field(default_factory=list)  # block families favoured, best first
    portfolio_families: list[str] = field(default_factory=list)  # portfolio families favoured
    suggested: dict[str, Any] = field(default_factory=dict)  # data-brief parameter updates
    table: list[dict[str, Any]] = field(default_factory=list)  # per-item detail for the brief


def _frame(closes: Mapping[str, pd.Series]) -> pd.DataFrame:
    """Closes on their common dates, positive only (log prices)."""
    frame = pd.concat([s.rename(k) for k, s in closes.items()], axis=1, join="inner").dropna()
    return frame[(frame > 0).all(axis=1)]


def variance_ratio(close: np.ndarray, h: int) -> tuple[float, float] | None:
    """(VR(h), Lo-MacKinlay homoskedastic z) of overlapping h-bar log returns; None when the
    series is too short for the horizon."""
    logp = np.log(np.asarray(close, dtype=np.float64))
    r1 = np.diff(logp)
    n = len(r1)
    if n < max(MIN_BARS, 4 * h) or h < 2:
        return None
    var1 = float(np.var(r1, ddof=1))
    if var1 <= 0:
        return None
    rh = logp[h:] - logp[:-h]
    mu = float(np.mean(r1))
    varh = float(np.mean((rh - h * mu) ** 2))
    vr = varh / (h * var1)
    se = math.sqrt(2.0 * (2 * h - 1) * (h - 1) / (3.0 * h * n))
    return vr, (vr - 1.0) / se


def horizon_study(closes: Mapping[str, pd.Series], *, candidates: Sequence[int]) -> StudyResult:
    """Variance ratios at the candidate horizons; the strongest one sets the lookback."""
    table = []
    for h in candidates:
        per = [variance_ratio(s.to_numpy(), h) for s in closes.values()]
        per = [p for p in per if p is not None]
        if not per:
            continue
        vr = float(np.mean([p[0] for p in per]))
        z = float(np.mean([p[1] for p in per]))
        table.append({"horizon": h, "variance_ratio": vr, "z": z, "symbols": len(per)})
    numbers = {f"VR_{t['horizon']}": t["variance_ratio"] for t in table}
    numbers |= {f"VR_{t['horizon']}_z": t["z"] for t in table}
    if not table:
        return StudyResult(
            lines=[f"no horizon in {list(candidates)} fits the in-sample window"], numbers=numbers
        )
    best = max(table, key=lambda t: (abs(t["z"]), -t["horizon"]))
    h, vr, z = best["horizon"], best["variance_ratio"], best["z"]
    persistent = vr > 1.0
    families = ["trend", "momentum"] if persistent else ["mean_reversion", "breakout"]
    kind = "persist (trend/momentum)" if persistent else "revert (mean reversion)"
    lines = [
        "variance ratio by horizon (mean over symbols): "
        + ", ".join(
            f"VR({t['horizon']})={t['variance_ratio']:.3f} (z {t['z']:+.2f})" for t in table
        ),
        f"strongest horizon {h} bars: VR {vr:.3f}, z {z:+.2f}: {h}-bar moves {kind}"
        + (" (|z| < 2: weak evidence)" if abs(z) < 2 else ""),
    ]
    # On evidence (|z| >= 2) the horizon goes to the entries that express the finding (their
    # own parameter names), so a 5-bar reversion does not turn the trend entries into 5-bar
    # crosses; on weak evidence it is just another lookback for every entry to try.
    if abs(z) >= 2:
        suggested: dict[str, Any] = {p: int(h) for p in HORIZON_PARAMS[persistent]}
        suggested["family"] = families[0]
    else:
        suggested = {"lookback": int(h)}
        families = []
    return StudyResult(
        lines=lines, numbers=numbers, families=families, suggested=suggested, table=table
    )


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = pd.Series(a).rank().to_numpy()
    rb = pd.Series(b).rank().to_numpy()
    if np.std(ra) == 0 or np.std(rb) == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def cross_section_study(closes: Mapping[str, pd.Series]) -> StudyResult:
    """Rank IC of the past L-bar return against the next month's, per lookback L."""
    frame = _frame(closes)
    logp = np.log(frame.to_numpy(dtype=np.float64))
    n = len(logp)
    fwd_disp = []
    table = []
    for lb in XS_LOOKBACKS:
        ics = []
        for t in range(lb, n - XS_STEP, XS_STEP):
            past = logp[t] - logp[t - lb]
            fwd = logp[t + XS_STEP] - logp[t]
            ic = _spearman(past, fwd)
            if math.isfinite(ic):
                ics.append(ic)
            if lb == XS_LOOKBACKS[0]:
                fwd_disp.append(float(np.std(fwd, ddof=1)))
        if len(ics) < 6:
            continue
        mean, sd = float(np.mean(ics)), float(np.std(ics, ddof=1))
        t_stat = mean / sd * math.sqrt(len(ics)) if sd > 0 else 0.0
        hit = float(np.mean(np.asarray(ics) > 0))
        table.append({"lookback": lb, "ic": mean, "t": t_stat, "hit": hit, "periods": len(ics)})
    dispersion = 100.0 * float(np.mean(fwd_disp)) if fwd_disp else float("nan")
    numbers = {"XS_DISPERSION_21_pct": dispersion}
    numbers |= {f"XS_IC_{t['lookback']}": t["ic"] for t in table}
    numbers |= {f"XS_IC_{t['lookback']}_t": t["t"] for t in table}
    if not table:
        return StudyResult(lines=["too little common history to rank the symbols"], numbers=numbers)
    best = max(table, key=lambda t: (abs(t["t"]), -t["lookback"]))
    persists = best["ic"] > 0
    lines = [
        f"{frame.shape[1]} symbols, monthly cross-sectional dispersion {dispersion:.2f}% "
        f"(std of next-{XS_STEP}-bar returns across symbols, mean over months)",
        "rank IC of past return vs next month: "
        + ", ".join(f"L={t['lookback']} {t['ic']:+.3f} (t {t['t']:+.2f})" for t in table),
        f"strongest: L={best['lookback']} IC {best['ic']:+.3f}, t {best['t']:+.2f}: ranks "
        + ("persist: winners keep winning" if persists else "reverse: losers catch up")
        + (" (|t| < 2: weak evidence)" if abs(best["t"]) < 2 else ""),
    ]
    return StudyResult(
        lines=lines,
        numbers=numbers,
        families=["momentum", "trend"] if persists else ["mean_reversion"],
        portfolio_families=(["cross_sectional_momentum", "rotation"] if persists else ["pairs"]),
        suggested={"lookback": int(best["lookback"])} if abs(best["t"]) >= 2 else {},
        table=table,
    )


def half_life(spread: np.ndarray) -> float:
    """Bars for a spread shock to halve, from the AR(1) fit ds = a + b s_{t-1} (inf if b >= 0)."""
    s = np.asarray(spread, dtype=np.float64)
    lag, ds = s[:-1], np.diff(s)
    b = float(np.polyfit(lag, ds, 1)[0])
    if b >= 0 or b <= -1:
        return float("inf")
    return float(-math.log(2) / math.log(1 + b))


def pairs_study(closes: Mapping[str, pd.Series]) -> StudyResult:
    """Correlation and Engle-Granger cointegration of every pair (in-sample closes)."""
    from statsmodels.tsa.stattools import coint

    frame = _frame(dict(itertools.islice(closes.items(), MAX_PAIR_SYMBOLS)))
    if frame.shape[1] < 2 or len(frame) < MIN_BARS:
        return StudyResult(lines=["fewer than 2 symbols with common history: no pairs"])
    logs = np.log(frame.to_numpy(dtype=np.float64))
    rets = np.diff(logs, axis=0)
    names = list(frame.columns)
    table = []
    for i, j in itertools.combinations(range(len(names)), 2):
        _, pvalue, _ = coint(logs[:, i], logs[:, j], maxlag=COINT_MAXLAG)
        slope = float(np.polyfit(logs[:, j], logs[:, i], 1)[0])
        spread = logs[:, i] - slope * logs[:, j]
        table.append(
            {
                "pair": f"{names[i]}/{names[j]}",
                "corr": float(np.corrcoef(rets[:, i], rets[:, j])[0, 1]),
                "coint_p": float(pvalue),
                "hedge_ratio": slope,
                "half_life": half_life(spread),
            }
        )
    table.sort(key=lambda t: (t["coint_p"], t["pair"]))
    best = table[0]
    numbers = {f"CORR_{t['pair']}": t["corr"] for t in table}
    numbers |= {f"COINT_P_{t['pair']}": t["coint_p"] for t in table}
    hl = best["half_life"]
    found = best["coint_p"] < COINT_ALPHA and math.isfinite(hl)
    lines = [
        f"{len(table)} pair(s); most cointegrated {best['pair']}: Engle-Granger p "
        f"{best['coint_p']:.3f}, return correlation {best['corr']:.2f}, hedge ratio "
        f"{best['hedge_ratio']:.3f}, spread half-life "
        + (f"{hl:.1f} bars" if math.isfinite(hl) else "none (no reversion)"),
        f"mean return correlation {np.mean([t['corr'] for t in table]):.2f}; "
        f"{sum(t['coint_p'] < COINT_ALPHA for t in table)} pair(s) cointegrated at "
        f"{COINT_ALPHA:.0%}",
    ]
    if found:
        lines.append(f"a tradable spread: pairs / mean reversion over ~{hl:.0f} bars")
        suggested = {
            "lookback": int(min(60, max(5, round(2 * hl)))),
            "max_hold_bars": int(min(60, max(3, round(2 * hl)))),
        }
        return StudyResult(
            lines=lines,
            numbers=numbers,
            families=["mean_reversion"],
            portfolio_families=["pairs"],
            suggested=suggested,
            table=table,
        )
    lines.append("no pair cointegrated at 5%: a spread trade has no in-sample support")
    return StudyResult(lines=lines, numbers=numbers, table=table)


def _vote(stats: list[tuple[Regime, float]]) -> tuple[Regime, float]:
    weight: dict[Regime, float] = {}
    for regime, conf in stats:
        weight[regime] = weight.get(regime, 0.0) + conf
    order = list(Regime)
    regime = max(weight, key=lambda r: (weight[r], -order.index(r)))
    total = sum(weight.values())
    return regime, (weight[regime] / total if total else 0.0)


def subperiod_study(closes: Mapping[str, pd.Series], *, whole: Regime) -> StudyResult:
    """The regime rule per calendar year (a year needs 120+ bars), voted across symbols."""
    frame = _frame(closes)
    table = []
    for year, part in frame.groupby(frame.index.year):
        if len(part) < 120:
            continue
        votes = []
        for sym in part.columns:
            regime, conf, _ = classify_window(window_stats(part[sym].to_numpy()))
            votes.append((regime, conf))
        regime, share = _vote(votes)
        ew = part.div(part.iloc[0]).mean(axis=1).to_numpy()
        table.append(
            {
                "period": str(year),
                "regime": regime.value,
                "agreement": share,
                "return_pct": 100.0 * (ew[-1] / ew[0] - 1.0),
                "bars": len(part),
            }
        )
    if len(table) < 2:
        return StudyResult(lines=["fewer than 2 full years in-sample: no sub-periods"])
    regimes = [Regime(t["regime"]) for t in table]
    switches = sum(a != b for a, b in itertools.pairwise(regimes))
    share = {r: regimes.count(r) / len(regimes) for r in Regime if r in regimes}
    order = list(Regime)
    dominant = max(share, key=lambda r: (share[r], -order.index(r)))
    last = regimes[-1]
    numbers = {f"SHARE_{r.value}": v for r, v in share.items()}
    numbers |= {"SWITCHES": float(switches), "PERIODS": float(len(table))}
    rate = switches / (len(table) - 1)
    families: list[str] = []
    for r in sorted(share, key=lambda r: (-share[r], order.index(r))):
        families += [f for f in REGIME_FAMILIES[r] if f not in families]
    unstable = rate >= 0.5
    if unstable and "volatility" in families:
        families.remove("volatility")
        families.insert(1, "volatility")
    lines = [
        "regime by year: " + ", ".join(f"{t['period']} {t['regime']}" for t in table),
        f"{switches} switch(es) in {len(table)} years ({rate:.0%} of year ends); "
        + ", ".join(f"{r.value} {v:.0%}" for r, v in share.items())
        + f"; last year {last.value}; the whole window reads {whole.value}",
    ]
    if unstable:
        lines.append(
            "the regime changes more often than not: a regime filter and volatility "
            "sizing protect a single-regime rule"
        )
    suggested: dict[str, Any] = {}
    if dominant != whole:
        lines.append(f"the years mostly read {dominant.value}, not {whole.value}")
        suggested["family"] = REGIME_FAMILIES[dominant][0]
    return StudyResult(
        lines=lines, numbers=numbers, families=families, suggested=suggested, table=table
    )
