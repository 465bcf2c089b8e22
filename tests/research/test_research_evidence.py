"""Acceptance: every number a technical finding cites is true.

TA-Lib is recomputed here independently of swarm.research.features (raw CSV, own
parameter table), and the derived statistics are recomputed with pandas.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import talib
from conftest import read_real_bars

from swarm.research.context import ResearchContext
from swarm.research.features import compute_features
from swarm.research.models import Domain
from swarm.research.subagents import SUBAGENTS, run_subagent

pytestmark = pytest.mark.integration
TOL = 1e-9


def independent(bars: pd.DataFrame) -> dict[str, np.ndarray]:
    o, h, lo, c, v = (
        bars[k].to_numpy(dtype="float64") for k in ("open", "high", "low", "close", "volume")
    )
    macd = talib.MACD(c, 12, 26, 9)
    stoch = talib.STOCH(h, lo, c, 14, 3, 0, 3, 0)
    bb = talib.BBANDS(c, 20, 2, 2, 0)
    out = {
        "CLOSE": c,
        "VOLUME": v,
        "SMA_20": talib.SMA(c, 20),
        "SMA_50": talib.SMA(c, 50),
        "SMA_200": talib.SMA(c, 200),
        "EMA_12": talib.EMA(c, 12),
        "EMA_26": talib.EMA(c, 26),
        "ADX_14": talib.ADX(h, lo, c, 14),
        "PLUS_DI_14": talib.PLUS_DI(h, lo, c, 14),
        "MINUS_DI_14": talib.MINUS_DI(h, lo, c, 14),
        "RSI_14": talib.RSI(c, 14),
        "MACD_12_26_9": macd[0],
        "MACDSIGNAL_12_26_9": macd[1],
        "MACDHIST_12_26_9": macd[2],
        "STOCHK_14_3_3": stoch[0],
        "STOCHD_14_3_3": stoch[1],
        "ROC_10": talib.ROC(c, 10),
        "ROC_20": talib.ROC(c, 20),
        "ROC_60": talib.ROC(c, 60),
        "BBANDS_UPPER_20_2": bb[0],
        "BBANDS_MIDDLE_20_2": bb[1],
        "BBANDS_LOWER_20_2": bb[2],
        "ATR_14": talib.ATR(h, lo, c, 14),
        "NATR_14": talib.NATR(h, lo, c, 14),
        "OBV": talib.OBV(c, v),
        "AD": talib.AD(h, lo, c, v),
        "VOLUME_SMA_20": talib.SMA(v, 20),
        "HIGHEST_252": talib.MAX(h, 252),
        "LOWEST_252": talib.MIN(lo, 252),
    }
    for name in [n for n in talib.get_function_groups()["Pattern Recognition"]]:
        out[name] = getattr(talib, name)(o, h, lo, c).astype("float64")
    return out


def derived(ref: dict[str, np.ndarray], i: int, horizon: int = 5) -> dict[str, float]:
    """Derived evidence recomputed from the reference series at row i (= as_of)."""
    s = {k: pd.Series(v[: i + 1]) for k, v in ref.items()}
    c = s["CLOSE"]
    up, mid, lo = s["BBANDS_UPPER_20_2"], s["BBANDS_MIDDLE_20_2"], s["BBANDS_LOWER_20_2"]
    width = (100 * (up - lo) / mid).tail(252).dropna()
    natr = s["NATR_14"].tail(252).dropna()
    vsma = s["VOLUME_SMA_20"].iloc[-1]
    d = {
        "SMA_50_slope_20_pct": 100 * s["SMA_50"].diff(20).iloc[-1] / s["SMA_50"].iloc[-1],
        "CLOSE_vs_HIGHEST_252_pct": 100 * (c.iloc[-1] / s["HIGHEST_252"].iloc[-1] - 1),
        "CLOSE_vs_LOWEST_252_pct": 100 * (c.iloc[-1] / s["LOWEST_252"].iloc[-1] - 1),
        "BBANDS_PCTB_20_2": (c.iloc[-1] - lo.iloc[-1]) / (up.iloc[-1] - lo.iloc[-1]),
        "BBANDS_WIDTH_20_2_pct": width.iloc[-1],
        "BBANDS_WIDTH_20_2_pctile_252": 100 * (width <= width.iloc[-1]).mean(),
        "NATR_14_median_252": natr.median(),
        "NATR_14_vs_median_252": natr.iloc[-1] / natr.median(),
        "OBV_change_20_norm": s["OBV"].diff(20).iloc[-1] / (20 * vsma),
        "AD_change_20_norm": s["AD"].diff(20).iloc[-1] / (20 * vsma),
        "VOLUME_vs_SMA_20": s["VOLUME"].iloc[-1] / vsma,
    }
    fwd = (100 * (c.shift(-horizon) / c - 1)).dropna()
    d[f"fwd{horizon}_base_mean_pct"] = fwd.mean()
    for name in [k for k in ref if k.startswith("CDL")]:
        sig = s[name].iloc[: len(fwd)]
        sides = {"any": (sig != 0, fwd > 0), "bull": (sig > 0, fwd > 0), "bear": (sig < 0, fwd < 0)}
        for side, (mask, good) in sides.items():
            if mask.sum():
                d[f"{name}_{side}_n"] = float(mask.sum())
                d[f"{name}_{side}_fwd{horizon}_mean_pct"] = fwd[mask].mean()
                d[f"{name}_{side}_fwd{horizon}_hit_rate"] = good[mask].mean()
                sel = fwd[mask]
                if len(sel) >= 2 and sel.std() > 0:
                    tstat = (sel.mean() - d[f"fwd{horizon}_base_mean_pct"]) / (
                        sel.std() / np.sqrt(len(sel))
                    )
                    d[f"{name}_{side}_fwd{horizon}_tstat"] = tstat
    return d


PATTERN_RECENT = re.compile(r"^(CDL\w+)_last3_(value|bars_ago)$")


@pytest.mark.parametrize(
    ("symbol", "start", "end"),
    [
        ("AAPL", "2012-01-01", "2018-12-31"),
        ("MSFT", "2012-01-01", "2018-12-31"),
        ("AAPL", "2012-01-01", "2015-06-30"),
    ],
)
def test_every_technical_evidence_value_equals_talib(symbol: str, start: str, end: str) -> None:
    bars = read_real_bars(symbol, start, end)
    bundle = compute_features(symbol, bars)
    ctx = ResearchContext()
    findings = [
        run_subagent(s.id, symbol=symbol, bundle=bundle, context=ctx)
        for s in SUBAGENTS
        if s.domain == Domain.TECHNICAL
    ]
    assert len(findings) == 5
    ref = independent(bars)
    checked = 0
    for f in findings:
        assert not f.abstained, f.reason
        assert f.as_of == bars.index[-1].date().isoformat()
        i = bars.index.get_loc(pd.Timestamp(f.as_of))
        extra = derived(ref, i)
        assert f.evidence, f"{f.specialization} cites nothing"
        for key, value in f.evidence.items():
            if key in ref:
                expected = float(ref[key][i])
            elif key in extra:
                expected = float(extra[key])
            elif key == "RSI_14_zone":
                rsi, k = ref["RSI_14"][i], ref["STOCHK_14_3_3"][i]
                expected = 1.0 if rsi > 70 or k > 80 else -1.0 if rsi < 30 or k < 20 else 0.0
            elif m := PATTERN_RECENT.match(key):
                recent = ref[m.group(1)][i - 2 : i + 1]
                pos = int(np.flatnonzero(recent)[-1])
                expected = float(recent[pos]) if m.group(2) == "value" else float(2 - pos)
            else:
                pytest.fail(f"{f.specialization} cites {key!r}, which nothing can verify")
            # Bundle keys: absolute 1e-9; derived ratios recomputed by pandas: relative 1e-9.
            tol = TOL if key in ref else TOL * max(1.0, abs(expected))
            assert abs(value - expected) <= tol, (key, value, expected)
            checked += 1
        # The headline value is one of the cited numbers (or a count of fired patterns).
        if f.specialization != "pattern":
            assert f.value in f.evidence.values()
    assert checked > 60
