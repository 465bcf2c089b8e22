"""Market-data source chain: CSV folder, parquet cache, yfinance, seeded synthetic.

Every loader returns the same canonical frame (DatetimeIndex "date", float64
open/high/low/close/volume, sorted, unique) plus its quality report and sha256,
so downstream code never cares where the bars came from.

This module is the chain (``load_bars``); the sources are ``backtest.data.csv``,
``backtest.data.cache``, ``backtest.data.yfinance`` and ``backtest.data.synthetic``, and
``backtest.data.bars`` holds the canonical frame they all return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from backtest.data.bars import NotFound, Prices, file_stem
from backtest.data.cache import default_cache_dir, read_cache
from backtest.data.csv import from_csv
from backtest.data.integrity import BarDefect
from backtest.data.quality import QualityReport, assess_quality, bars_sha256
from backtest.data.synthetic import synthetic_bars
from backtest.data.yfinance import Fetcher, from_yfinance, yfinance_fetch
from backtest.errors import DataError, MissingSymbolError

__all__ = [
    "PRICES",
    "SOURCES",
    "TIMEFRAMES",
    "LoadedBars",
    "Source",
    "load_bars",
    "load_universe",
    "periods_per_year",
]

Source = Literal["auto", "csv", "cache", "yfinance", "synthetic"]
PRICES = ("raw", "adjusted")
SOURCES = ("auto", "csv", "cache", "yfinance", "synthetic")
TIMEFRAMES = ("1d", "1h")


@dataclass(frozen=True)
class LoadedBars:
    """One symbol's bars over the requested range, with provenance.

    ``bars``: DatetimeIndex "date" (datetime64[ns], tz-naive; UTC for intraday
    sources that carry a tz), float64 open/high/low/close/volume, sorted, unique.
    """

    symbol: str
    bars: pd.DataFrame
    source_used: str  # "cache" | "yfinance" | "csv" | "synthetic"
    sha256: str
    quality: QualityReport
    path: str | None = None
    notes: tuple[str, ...] = ()  # what the chain tried before this source answered
    repairs: tuple[BarDefect, ...] = ()  # what --repair changed (backtest.data.integrity)

    def summary(self) -> dict[str, Any]:
        """What a manifest records of this dataset: where it came from and its fingerprint."""
        return {
            "source": self.source_used,
            "path": self.path,
            "sha256": self.sha256,
            "n_bars": len(self.bars),
            "quality": self.quality.model_dump(mode="json"),
            "repairs": [r.model_dump(mode="json") for r in self.repairs],
        }

    def repair_lines(self) -> list[str]:
        """One line per change ``--repair`` made, for stderr and the report."""
        where = self.path or self.source_used
        return [f"{self.symbol}: {where} {r.describe()} -> {r.action}" for r in self.repairs]


def _finish(
    symbol: str,
    bars: pd.DataFrame,
    source: str,
    timeframe: str,
    path: str | None,
    notes: list[str],
    window: tuple[date, date],
    repairs: list[BarDefect] | None = None,
) -> LoadedBars:
    return LoadedBars(
        symbol=symbol,
        bars=bars,
        source_used=source,
        sha256=bars_sha256(bars),
        quality=assess_quality(bars, timeframe, window=window),
        path=path,
        notes=tuple(notes),
        repairs=tuple(repairs or ()),
    )


def load_bars(
    symbol: str,
    *,
    start: date,
    end: date,
    timeframe: str = "1d",
    source: str = "auto",
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    seed: int = 0,
    yf_timeout: float = 10.0,
    fetcher: Fetcher | None = None,
    prices: Prices = "raw",
    repair: bool = False,
) -> LoadedBars:
    """Load ``symbol`` over [start, end] (inclusive) through the source chain.

    ``auto``: with ``data_dir`` the CSV folder is tried first (the user pointed at
    it on purpose), then the parquet cache, then yfinance; without it, cache then
    yfinance. ``synthetic`` is never a fallback: only used when asked for.
    ``fetcher`` replaces the yfinance download (tests pass a fake).
    ``prices="adjusted"``: total return from ``adj_close`` (a CSV without it is a
    DataError); the parquet cache, which holds raw prices, is skipped; synthetic bars have
    no dividends and are the same either way.
    A CSV with broken bars in the window (non-positive prices, repeated timestamps, OHLC
    violations) is a DataError naming the line; ``repair=True`` mends them and lists each
    change in ``LoadedBars.repairs`` (``backtest.data.integrity``).
    """
    _check_request(source, timeframe, start, end, prices)
    symbol = symbol.strip()
    if not symbol:
        raise DataError("--tickers: empty symbol; pass symbols like AAPL,MSFT")
    data_dir = Path(data_dir).expanduser() if data_dir is not None else None
    cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    fetch = fetcher or yfinance_fetch

    if source == "synthetic":
        bars = synthetic_bars(symbol, start, end, timeframe, seed)
        return _finish(
            symbol, bars, "synthetic", timeframe, None, [f"synthetic seed={seed}"], (start, end)
        )
    if source == "csv" and data_dir is None:
        raise DataError("--data-dir: --source csv needs --data-dir DIR holding SYMBOL.csv files")

    steps = _steps(
        symbol,
        start,
        end,
        timeframe,
        source,
        data_dir,
        cache_dir,
        fetch,
        yf_timeout,
        prices,
        repair,
    )
    notes: list[str] = []
    for name, step in steps:
        try:
            bars, path, repairs = step()
        except NotFound as miss:
            notes.append(str(miss))
            continue
        except MissingSymbolError as err:
            # A missing file in an explicit folder may still be found downstream in
            # auto mode; a broken file or an empty range in it is the user's to fix.
            if source != "auto":
                raise
            notes.append(err.short)
            continue
        return _finish(symbol, bars, name, timeframe, path, notes, (start, end), repairs)

    raise _no_data(symbol, timeframe, start, end, source, notes)


def _no_data(
    symbol: str, timeframe: str, start: date, end: date, source: str, notes: list[str]
) -> DataError:
    """The error when no source had the bars: what each said, and what to do about it."""
    tried = "; ".join(notes) or "nothing"
    hint = (
        f"pass --data-dir DIR with {file_stem(symbol).upper()}.csv, "
        "or --source synthetic for a seeded synthetic series"
    )
    if source == "cache":
        hint = "run once with --source auto or yfinance while online, or pass --data-dir DIR"
    return DataError(
        f"--tickers: no data for {symbol} {timeframe} {start}..{end} (tried {tried}); {hint}"
    )


def _check_request(source: str, timeframe: str, start: date, end: date, prices: str) -> None:
    """Raise ``DataError`` naming the option when the source, timeframe, range or prices
    are not ones the chain serves."""
    if source not in SOURCES:
        raise DataError(f"--source: unknown source {source!r}; choose one of {', '.join(SOURCES)}")
    if timeframe not in TIMEFRAMES:
        raise DataError(
            f"--timeframe: {timeframe!r} is not supported; use one of {', '.join(TIMEFRAMES)}"
        )
    if start > end:
        raise DataError(f"--start/--end: start {start} is after end {end}; swap them")
    if prices not in PRICES:
        raise DataError(f"--prices: {prices!r}; use raw or adjusted")


_Step = Callable[[], tuple[pd.DataFrame, str | None, list[BarDefect]]]


def _steps(
    symbol: str,
    start: date,
    end: date,
    timeframe: str,
    source: str,
    data_dir: Path | None,
    cache_dir: Path,
    fetch: Fetcher,
    yf_timeout: float,
    prices: Prices,
    repair: bool,
) -> list[tuple[str, _Step]]:
    """The sources ``source`` may try, in order, each a loader of (bars, path, repairs)."""
    steps: list[tuple[str, _Step]] = []
    if data_dir is not None and source in ("auto", "csv"):
        steps.append(
            ("csv", lambda: from_csv(symbol, start, end, timeframe, data_dir, prices, repair))
        )
    if source in ("auto", "cache") and prices == "raw":
        steps.append(("cache", lambda: (*read_cache(symbol, start, end, timeframe, cache_dir), [])))
    if source in ("auto", "yfinance"):
        steps.append(
            (
                "yfinance",
                lambda: (
                    *from_yfinance(
                        symbol, start, end, timeframe, cache_dir, yf_timeout, fetch, prices
                    ),
                    [],
                ),
            )
        )
    return steps


def load_universe(symbols: Iterable[str], **kw: Any) -> dict[str, LoadedBars]:
    """Load every symbol with the same options; the first DataError propagates, and so does
    one for two symbols that read the same file (file names ignore case and characters
    outside ``A-Z 0-9 . _ = -``, so ``SYN[`` and ``SYN_`` would trade one series twice)."""
    loaded = {sym: load_bars(sym, **kw) for sym in symbols}
    by_path: dict[str, str] = {}
    for sym, got in loaded.items():
        if got.path is None:
            continue
        other = by_path.setdefault(got.path, sym)
        if other != sym:
            raise DataError(
                f"--tickers: {other} and {sym} both read {got.path} (file names ignore case "
                "and characters outside A-Z 0-9 . _ = -); drop one of them or rename its file"
            )
    return loaded


def periods_per_year(bars: pd.DataFrame, timeframe: str = "1d") -> int:
    """Bars per year for annualising: 252 for exchange days, 365 for 24/7 markets."""
    index = pd.DatetimeIndex(bars.index)
    weekend_share = float((index.day_of_week >= 5).mean()) if len(index) else 0.0
    days = 365 if weekend_share > 0.1 else 252
    if timeframe == "1d":
        return days
    if not len(index):
        return days * 7
    per_day = pd.Series(1, index=index).groupby(index.normalize()).size().median()
    return int(round(days * float(per_day)))
