"""The synthetic source: seeded bars, only ever used when asked for (never a fallback)."""

from __future__ import annotations

import zlib
from datetime import date

import numpy as np
import pandas as pd

from backtest.errors import DataError


def synthetic_bars(
    symbol: str, start: date, end: date, timeframe: str = "1d", seed: int = 0
) -> pd.DataFrame:
    """Seeded GBM with Student-t(4) shocks; same (seed, symbol, range) -> same bars.

    crc32 (not ``hash()``) keys the symbol: Python's string hash changes per process.
    """
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(symbol.upper().encode())])
    days = pd.bdate_range(start, end)
    if timeframe == "1h":
        index = pd.DatetimeIndex(
            [d + pd.Timedelta(hours=h) for d in days for h in range(9, 16)]
        )  # 7 session bars a business day
        periods = 252 * 7
    else:
        index = days
        periods = 252
    n = len(index)
    if n == 0:
        raise DataError(f"--start/--end: {start}..{end} contains no business days; widen the range")
    vol = rng.uniform(0.25, 0.35) / np.sqrt(periods)
    drift = rng.uniform(-0.02, 0.12) / periods
    df_t = 4.0
    shocks = rng.standard_t(df_t, size=n) / np.sqrt(df_t / (df_t - 2))  # unit variance
    logret = drift - 0.5 * vol**2 + vol * shocks
    p0 = float(rng.uniform(20.0, 200.0))
    close = p0 * np.exp(np.cumsum(logret))
    prev_close = np.concatenate([[p0], close[:-1]])
    open_ = prev_close * np.exp(rng.normal(0.0, 0.25 * vol, size=n))  # small overnight gap
    body_hi = np.maximum(open_, close)
    body_lo = np.minimum(open_, close)
    high = body_hi * np.exp(np.abs(rng.normal(0.0, 0.5 * vol, size=n)))
    low = body_lo * np.exp(-np.abs(rng.normal(0.0, 0.5 * vol, size=n)))
    base_volume = rng.uniform(1e6, 5e6)
    volume = np.round(base_volume * np.exp(rng.normal(0, 0.3, size=n)) * (1 + 5 * np.abs(logret)))
    bars = pd.DataFrame(
        {"open": open_, "high": high, "low": low, "close": close, "volume": volume},
        index=pd.DatetimeIndex(index, name="date"),
    ).astype("float64")
    return bars
