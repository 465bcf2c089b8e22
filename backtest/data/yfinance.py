"""The yfinance source: a quiet download, normalised and written through to the cache."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from backtest.data.bars import NotFound, Prices, normalize_bars, slice_days
from backtest.data.cache import write_cache
from backtest.errors import DataError

__all__ = [
    "Fetcher",
    "from_yfinance",
    "quiet_yfinance",
    "yfinance_fetch",
]

# fetcher(symbol, *, start, end, interval, timeout, cache_dir) -> raw frame (may be empty)
Fetcher = Callable[..., pd.DataFrame]


def quiet_yfinance(cache_dir: Path) -> Any:
    """The yfinance module, its caches under ours and its log silenced.

    Its warnings ("Cookie/crumb fetch failed", "Failed download") would break the
    progress output; every failure reaches us anyway, as an exception or an empty frame,
    and is reported in our own words. The logger stays muted for the process: restoring
    a level from parallel research threads would race.
    """
    import yfinance as yf

    folder = cache_dir / "yfinance"
    folder.mkdir(parents=True, exist_ok=True)
    yf.set_tz_cache_location(str(folder))  # tz and cookie caches: keep them out of ~/.cache
    logging.getLogger("yfinance").setLevel(logging.CRITICAL + 1)
    return yf


def yfinance_fetch(
    symbol: str, *, start: date, end: date, interval: str, timeout: float, cache_dir: Path
) -> pd.DataFrame:
    """Download with yfinance, quietly. Offline it returns an empty frame."""
    yf = quiet_yfinance(cache_dir)
    sink = io.StringIO()  # yfinance also prints errors; our stdout stays clean
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        df = yf.download(
            symbol,
            start=start.isoformat(),
            end=(end + timedelta(days=1)).isoformat(),  # yfinance's end is exclusive
            interval=interval,
            auto_adjust=False,
            progress=False,
            timeout=timeout,
            threads=False,
        )
    return df if df is not None else pd.DataFrame()


def from_yfinance(
    symbol: str,
    start: date,
    end: date,
    timeframe: str,
    cache_dir: Path,
    timeout: float,
    fetcher: Fetcher,
    prices: Prices = "raw",
) -> tuple[pd.DataFrame, str | None]:
    """The bars of ``symbol`` from Yahoo (cached on success), and a warning or None."""
    try:
        raw = fetcher(
            symbol, start=start, end=end, interval=timeframe, timeout=timeout, cache_dir=cache_dir
        )
    except Exception as exc:  # network, DNS, parsing: all mean "not available"
        raise NotFound(f"yfinance: {type(exc).__name__}: {str(exc)[:120]}") from exc
    if raw is None or raw.empty:
        raise NotFound("yfinance: empty download (offline or unknown symbol)")
    try:
        bars = normalize_bars(raw, what=f"yfinance {symbol}", prices=prices)
    except DataError as exc:
        raise NotFound(f"yfinance: unusable frame ({exc})") from exc
    if bars.empty:
        raise NotFound("yfinance: download had no complete bars")
    path: str | None = None
    if prices == "raw":  # the cache holds raw prices only
        with contextlib.suppress(OSError):  # a read-only cache must not lose the download
            path = str(write_cache(symbol, bars, timeframe, cache_dir))
    sliced = slice_days(bars, start, end)
    if sliced.empty:
        raise NotFound(f"yfinance: no bars in {start}..{end}")
    return sliced, path
