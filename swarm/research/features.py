"""The feature bundle: one deterministic TA-Lib computation per symbol.

Every number a research agent cites comes from here (or is derived from these
series under a clearly different key), so the evidence in a finding can be
re-checked against TA-Lib by anyone. Keys follow the TA-Lib naming with their
parameters (``RSI_14``, ``MACD_12_26_9``, ``BBANDS_UPPER_20_2``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import talib

# A representative set of candlestick patterns: classic reversals (engulfing,
# hammer, stars, harami), indecision (doji) and continuation (soldiers/crows).
CANDLE_PATTERNS: tuple[str, ...] = (
    "CDLENGULFING",
    "CDLHAMMER",
    "CDLINVERTEDHAMMER",
    "CDLHANGINGMAN",
    "CDLDOJI",
    "CDLMORNINGSTAR",
    "CDLEVENINGSTAR",
    "CDLSHOOTINGSTAR",
    "CDLHARAMI",
    "CDLPIERCING",
    "CDLDARKCLOUDCOVER",
    "CDL3WHITESOLDIERS",
    "CDL3BLACKCROWS",
    "CDLMARUBOZU",
)

INDICATOR_KEYS: tuple[str, ...] = (
    "CLOSE",
    "VOLUME",
    "SMA_20",
    "SMA_50",
    "SMA_200",
    "EMA_12",
    "EMA_26",
    "ADX_14",
    "PLUS_DI_14",
    "MINUS_DI_14",
    "RSI_14",
    "MACD_12_26_9",
    "MACDSIGNAL_12_26_9",
    "MACDHIST_12_26_9",
    "STOCHK_14_3_3",
    "STOCHD_14_3_3",
    "ROC_10",
    "ROC_20",
    "ROC_60",
    "BBANDS_UPPER_20_2",
    "BBANDS_MIDDLE_20_2",
    "BBANDS_LOWER_20_2",
    "ATR_14",
    "NATR_14",
    "OBV",
    "AD",
    "VOLUME_SMA_20",
    "HIGHEST_252",
    "LOWEST_252",
    # Added for the decision pipeline (swarm.analyze): evidence for the analysts.
    "EMA_20",
    "SWING_HIGH_5",
    "SWING_LOW_5",
    "GAP_PCT",
    "FORECAST_MID_60_10",
    "FORECAST_UPPER_60_10",
    "FORECAST_LOWER_60_10",
)

SWING_SPAN = 5  # a swing point is the extreme of the bars within 5 on either side
FORECAST_WINDOW = 60  # bars of log returns the drift and volatility are estimated on
FORECAST_HORIZON = 10  # bars ahead the forecast band is for
FORECAST_Z = 1.96  # the band holds ~95% of outcomes if log returns were i.i.d. normal

REQUIRED_COLUMNS = ("open", "high", "low", "close", "volume")


@dataclass(frozen=True)
class FeatureBundle:
    """All indicator series of one symbol, aligned on the bars' index."""

    symbol: str
    index: pd.DatetimeIndex
    data: dict[str, np.ndarray] = field(repr=False)

    @property
    def n_bars(self) -> int:
        """Bars in the bundle."""
        return len(self.index)

    @property
    def as_of(self) -> str:
        """ISO date of the last bar: the latest information any finding may use."""
        return self.index[-1].date().isoformat()

    @property
    def keys(self) -> tuple[str, ...]:
        """The bundle's feature keys."""
        return tuple(self.data)

    def position(self, as_of: str | pd.Timestamp | None = None) -> int:
        """Row of the last bar at or before ``as_of`` (the last bar when None)."""
        if as_of is None:
            return self.n_bars - 1
        pos = int(self.index.searchsorted(pd.Timestamp(as_of), side="right")) - 1
        if pos < 0:
            raise KeyError(f"{as_of} is before the first bar of {self.symbol}")
        return pos

    def value(self, key: str, as_of: str | pd.Timestamp | None = None) -> float:
        """Value of ``key`` at the last bar (or the last bar at or before ``as_of``)."""
        return float(self.data[key][self.position(as_of)])

    def series(self, key: str) -> pd.Series:
        """Feature ``key`` as a date-indexed series."""
        return pd.Series(self.data[key], index=self.index, name=key)

    def snapshot(
        self, keys: Iterable[str], as_of: str | pd.Timestamp | None = None
    ) -> dict[str, float]:
        """Exact values at ``as_of`` for use as evidence; undefined (NaN, warm-up) values
        are left out, because a finding must never cite a number that does not exist."""
        pos = self.position(as_of)
        out: dict[str, float] = {}
        for key in keys:
            v = float(self.data[key][pos])
            if math.isfinite(v):
                out[key] = v
        return out


def _as_float64(bars: pd.DataFrame, column: str) -> np.ndarray:
    # TA-Lib rejects anything but contiguous float64; copy so later edits of the
    # caller's frame cannot change cited evidence.
    return np.array(bars[column].to_numpy(), dtype=np.float64, copy=True, order="C")


def compute_features(symbol: str, bars: pd.DataFrame) -> FeatureBundle:
    """Compute every feature of ``symbol`` on the bars exactly as given (no resampling,
    no adjustment). ``bars`` must carry a DatetimeIndex and open/high/low/close/volume."""
    missing = [c for c in REQUIRED_COLUMNS if c not in bars.columns]
    if missing:
        raise ValueError(f"{symbol}: bars lack columns {missing}")
    if not isinstance(bars.index, pd.DatetimeIndex):
        raise ValueError(f"{symbol}: bars need a DatetimeIndex")
    if len(bars) == 0:
        raise ValueError(f"{symbol}: no bars")

    o, h, lo, c, v = (_as_float64(bars, col) for col in REQUIRED_COLUMNS)
    d: dict[str, np.ndarray] = {"CLOSE": c, "VOLUME": v}
    d["SMA_20"] = talib.SMA(c, timeperiod=20)
    d["SMA_50"] = talib.SMA(c, timeperiod=50)
    d["SMA_200"] = talib.SMA(c, timeperiod=200)
    d["EMA_12"] = talib.EMA(c, timeperiod=12)
    d["EMA_26"] = talib.EMA(c, timeperiod=26)
    d["ADX_14"] = talib.ADX(h, lo, c, timeperiod=14)
    d["PLUS_DI_14"] = talib.PLUS_DI(h, lo, c, timeperiod=14)
    d["MINUS_DI_14"] = talib.MINUS_DI(h, lo, c, timeperiod=14)
    d["RSI_14"] = talib.RSI(c, timeperiod=14)
    macd, sig, hist = talib.MACD(c, fastperiod=12, slowperiod=26, signalperiod=9)
    d["MACD_12_26_9"], d["MACDSIGNAL_12_26_9"], d["MACDHIST_12_26_9"] = macd, sig, hist
    k, dd = talib.STOCH(
        h, lo, c, fastk_period=14, slowk_period=3, slowk_matype=0, slowd_period=3, slowd_matype=0
    )
    d["STOCHK_14_3_3"], d["STOCHD_14_3_3"] = k, dd
    for n in (10, 20, 60):
        d[f"ROC_{n}"] = talib.ROC(c, timeperiod=n)
    up, mid, low_band = talib.BBANDS(c, timeperiod=20, nbdevup=2.0, nbdevdn=2.0, matype=0)
    d["BBANDS_UPPER_20_2"], d["BBANDS_MIDDLE_20_2"], d["BBANDS_LOWER_20_2"] = up, mid, low_band
    d["ATR_14"] = talib.ATR(h, lo, c, timeperiod=14)
    d["NATR_14"] = talib.NATR(h, lo, c, timeperiod=14)
    d["OBV"] = talib.OBV(c, v)
    d["AD"] = talib.AD(h, lo, c, v)
    d["VOLUME_SMA_20"] = talib.SMA(v, timeperiod=20)
    # Support/resistance over a trading year: highest high and lowest low.
    d["HIGHEST_252"] = talib.MAX(h, timeperiod=252)
    d["LOWEST_252"] = talib.MIN(lo, timeperiod=252)
    for name in CANDLE_PATTERNS:
        d[name] = getattr(talib, name)(o, h, lo, c).astype(np.float64)
    d["EMA_20"] = talib.EMA(c, timeperiod=20)
    d["SWING_HIGH_5"] = _last_swing(h, talib.MAX(h, timeperiod=2 * SWING_SPAN + 1))
    d["SWING_LOW_5"] = _last_swing(lo, talib.MIN(lo, timeperiod=2 * SWING_SPAN + 1))
    gap = np.full_like(c, np.nan)
    gap[1:] = 100.0 * (o[1:] / c[:-1] - 1.0)
    d["GAP_PCT"] = gap
    d.update(_forecast_band(c))
    return FeatureBundle(symbol=symbol, index=pd.DatetimeIndex(bars.index), data=d)


def _last_swing(x: np.ndarray, centred_extreme: np.ndarray) -> np.ndarray:
    """Value of the latest *confirmed* swing point at each bar: bar j is a swing when
    ``x[j]`` is the extreme of bars j-5..j+5, which is known only at bar j+5, so the
    value appears at j+5 (never earlier: no lookahead) and holds until the next one.
    ``centred_extreme[t]`` is the extreme of bars t-10..t (TA-Lib MAX/MIN over 11)."""
    n, span = len(x), SWING_SPAN
    out = np.full(n, np.nan)
    if n <= 2 * span:
        return out
    confirm = np.arange(2 * span, n)  # bar t confirms the candidate j = t - span
    is_swing = x[confirm - span] == centred_extreme[confirm]
    out[confirm[is_swing]] = x[confirm[is_swing] - span]
    return pd.Series(out).ffill().to_numpy(dtype=np.float64)


def _forecast_band(c: np.ndarray) -> dict[str, np.ndarray]:
    """A drift-plus-volatility band for the close 10 bars ahead: the mean and the
    population standard deviation of the last 60 log returns, projected as a random walk
    with drift (mid = close x exp(10 mu), band = mid x exp(+/-1.96 sigma sqrt(10))).
    Evidence for the analysts only: it is a naive baseline, never an input to sizing."""
    logret = np.full_like(c, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        logret[1:] = np.log(c[1:] / c[:-1])
    mu = talib.SMA(logret, timeperiod=FORECAST_WINDOW)
    sigma = talib.STDDEV(logret, timeperiod=FORECAST_WINDOW, nbdev=1.0)
    mid = c * np.exp(mu * FORECAST_HORIZON)
    half = FORECAST_Z * sigma * math.sqrt(FORECAST_HORIZON)
    return {
        "FORECAST_MID_60_10": mid,
        "FORECAST_UPPER_60_10": mid * np.exp(half),
        "FORECAST_LOWER_60_10": mid * np.exp(-half),
    }
