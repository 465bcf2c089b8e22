"""The parquet cache source: one raw-price entry per symbol and timeframe, merged atomically."""

from __future__ import annotations

import contextlib
import os
from datetime import date, timedelta
from pathlib import Path

import pandas as pd

from backtest.data.bars import NotFound, file_stem, normalize_bars, slice_days

CACHE_EDGE_SLACK = timedelta(days=4)  # weekends + a holiday at either edge of a cached range


def default_cache_dir() -> Path:
    """The user cache folder of the lab."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("swarm-lab"))


def cache_path(symbol: str, timeframe: str, cache_dir: Path) -> Path:
    """Where the cached bars of ``symbol`` at ``timeframe`` live."""
    return cache_dir / "ohlcv" / f"{file_stem(symbol).upper()}_{timeframe}.parquet"


def read_cache(
    symbol: str, start: date, end: date, timeframe: str, cache_dir: Path
) -> tuple[pd.DataFrame, str]:
    """The cached bars of ``symbol`` in ``start``..``end``, their path; ``NotFound`` on a miss."""
    path = cache_path(symbol, timeframe, cache_dir)
    if not path.exists():
        raise NotFound(f"cache: no entry {path.name}")
    try:
        bars = normalize_bars(pd.read_parquet(path), what=f"cache {path}")
    except Exception as exc:  # a corrupt cache entry is a miss, not a failure
        raise NotFound(f"cache: unreadable {path.name} ({type(exc).__name__})") from exc
    if bars.empty:
        raise NotFound(f"cache: {path.name} is empty")
    first, last = bars.index[0].date(), bars.index[-1].date()
    if first > start + CACHE_EDGE_SLACK or last < end - CACHE_EDGE_SLACK:
        raise NotFound(f"cache: {path.name} covers {first}..{last}, not {start}..{end}")
    sliced = slice_days(bars, start, end)
    if sliced.empty:
        raise NotFound(f"cache: {path.name} has no bars in {start}..{end}")
    return sliced, str(path)


def write_cache(symbol: str, bars: pd.DataFrame, timeframe: str, cache_dir: Path) -> Path:
    """Merge ``bars`` into the symbol's parquet entry (new values win), atomically."""
    path = cache_path(symbol, timeframe, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = bars
    if path.exists():
        with contextlib.suppress(Exception):  # corrupt old entry: overwrite it
            old = normalize_bars(pd.read_parquet(path))
            merged = pd.concat([old[~old.index.isin(bars.index)], bars]).sort_index()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    merged.to_parquet(tmp)
    os.replace(tmp, path)  # parallel workers never see a half-written file
    return path
