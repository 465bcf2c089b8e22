"""The canonical bars frame every market-data source returns, and what the sources share.

``normalize_bars`` turns any reasonable input (yfinance, CSV, parquet) into a DatetimeIndex
"date", float64 open/high/low/close/volume, sorted, unique frame; ``NotFound`` is a source's
miss, on which the chain (``backtest.data``) moves on to the next source.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

import numpy as np
import pandas as pd

from backtest.data.quality import OHLCV
from backtest.errors import DataError

__all__ = [
    "NotFound",
    "Prices",
    "adjust_for_dividends",
    "day_range",
    "file_stem",
    "normalize_bars",
    "slice_days",
]

Prices = Literal["raw", "adjusted"]


class NotFound(Exception):
    """A source has nothing for this symbol: the chain moves on (internal)."""


def file_stem(symbol: str) -> str:
    """``symbol`` as a filesystem-safe file stem (no caret, as in the corpus)."""
    # ^GSPC -> GSPC (the corpus drops the caret); keep names filesystem-safe.
    return re.sub(r"[^A-Za-z0-9._=-]", "_", symbol.strip().lstrip("^"))


def day_range(start: date, end: date) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The first and last instants of ``start``..``end``, both days inclusive."""
    # [start, end] inclusive for intraday bars too: up to the last instant of `end`.
    return pd.Timestamp(start), pd.Timestamp(end) + pd.Timedelta(days=1) - pd.Timedelta(1)


def adjust_for_dividends(df: pd.DataFrame, *, what: str) -> pd.DataFrame:
    """Total-return prices: open, high, low and close scaled by ``adj_close / close``.

    The factor is the one the data vendor applied to the close for splits and dividends,
    so every bar keeps its shape (high >= close >= low) and returns include dividends.
    Volume is left as traded. ``df`` has normalised lower-case column names.
    """
    if "adj_close" not in df.columns:
        raise DataError(
            f"--prices adjusted: {what} has no adj_close column; use --prices raw, or data "
            "with an adj_close column (the daily corpus has one)"
        )
    close = pd.to_numeric(df["close"], errors="coerce")
    factor = pd.to_numeric(df["adj_close"], errors="coerce") / close
    bad = close.notna() & ~np.isfinite(factor)
    if bad.any():
        raise DataError(
            f"--prices adjusted: {what} has a missing or unusable adj_close on "
            f"{pd.Timestamp(df.index[int(np.flatnonzero(bad.to_numpy())[0])]).date()}; "
            "fix the file or use --prices raw"
        )
    out = df.copy()
    for col in ("open", "high", "low", "close"):
        out[col] = pd.to_numeric(out[col], errors="coerce") * factor
    return out


def normalize_bars(
    raw: pd.DataFrame, *, what: str = "bars", prices: Prices = "raw"
) -> pd.DataFrame:
    """Canonical OHLCV frame from any reasonable input (yfinance, CSV, parquet);
    ``prices="adjusted"`` first scales OHLC to total return (:func:`adjust_for_dividends`)."""
    df = raw.copy()
    if isinstance(df.columns, pd.MultiIndex):
        # yfinance >= 0.2.48 returns (Price, Ticker) columns even for one ticker.
        for level in range(df.columns.nlevels):
            names = {str(v).strip().lower() for v in df.columns.get_level_values(level)}
            if {"open", "close"} <= names:
                df.columns = df.columns.get_level_values(level)
                break
    df.columns = [str(c).strip().lower().replace(" ", "_") for c in df.columns]
    df = df.loc[:, ~pd.Index(df.columns).duplicated()]
    missing = [c for c in ("open", "high", "low", "close") if c not in df.columns]
    if missing:
        raise DataError(
            f"{what}: missing column(s) {', '.join(missing)}; need open, high, low, close"
        )
    if prices == "adjusted":
        df = adjust_for_dividends(df, what=what)
    if "volume" not in df.columns:
        df["volume"] = 0.0  # flagged by the quality report as zero-volume bars
    index = pd.DatetimeIndex(df.index)
    if index.tz is not None:
        index = index.tz_convert("UTC").tz_localize(None)
    df.index = index.as_unit("ns")
    df.index.name = "date"
    df = df[OHLCV].apply(pd.to_numeric, errors="coerce").astype("float64")
    df = df.dropna(subset=["open", "high", "low", "close"])
    df["volume"] = df["volume"].fillna(0.0)
    df = df[~df.index.duplicated(keep="last")].sort_index()
    return df


def slice_days(bars: pd.DataFrame, start: date, end: date) -> pd.DataFrame:
    """The bars from ``start`` through the whole of ``end``."""
    lo, hi = day_range(start, end)
    return bars.loc[(bars.index >= lo) & (bars.index <= hi)]
