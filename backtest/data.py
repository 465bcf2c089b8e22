"""Market-data source chain: CSV folder, parquet cache, yfinance, seeded synthetic.

Every loader returns the same canonical frame (DatetimeIndex "date", float64
open/high/low/close/volume, sorted, unique) plus its quality report and sha256,
so downstream code never cares where the bars came from.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from backtest.errors import DataError, MissingSymbolError
from backtest.quality import OHLCV, QualityReport, assess_quality, bars_sha256

Source = Literal["auto", "csv", "cache", "yfinance", "synthetic"]
Prices = Literal["raw", "adjusted"]
PRICES = ("raw", "adjusted")
SOURCES = ("auto", "csv", "cache", "yfinance", "synthetic")
TIMEFRAMES = ("1d", "1h")
DATE_COLUMNS = ("date", "datetime", "timestamp", "time")
CACHE_EDGE_SLACK = timedelta(days=4)  # weekends + a holiday at either edge of a cached range

# fetcher(symbol, *, start, end, interval, timeout, cache_dir) -> raw frame (may be empty)
Fetcher = Callable[..., pd.DataFrame]


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

    def summary(self) -> dict[str, Any]:
        """What a manifest records of this dataset: where it came from and its fingerprint."""
        return {
            "source": self.source_used,
            "path": self.path,
            "sha256": self.sha256,
            "n_bars": len(self.bars),
            "quality": self.quality.model_dump(mode="json"),
        }


# ---------------------------------------------------------------------------- helpers


def default_cache_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("swarm-lab"))


def _file_stem(symbol: str) -> str:
    # ^GSPC -> GSPC (the corpus drops the caret); keep names filesystem-safe.
    return re.sub(r"[^A-Za-z0-9._=-]", "_", symbol.strip().lstrip("^"))


def _day_range(start: date, end: date) -> tuple[pd.Timestamp, pd.Timestamp]:
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


def _slice(bars: pd.DataFrame, start: date, end: date) -> pd.DataFrame:
    lo, hi = _day_range(start, end)
    return bars.loc[(bars.index >= lo) & (bars.index <= hi)]


def _finish(
    symbol: str,
    bars: pd.DataFrame,
    source: str,
    timeframe: str,
    path: str | None,
    notes: list[str],
) -> LoadedBars:
    return LoadedBars(
        symbol=symbol,
        bars=bars,
        source_used=source,
        sha256=bars_sha256(bars),
        quality=assess_quality(bars, timeframe),
        path=path,
        notes=tuple(notes),
    )


def _available(data_dir: Path) -> list[str]:
    return sorted(p.stem for p in data_dir.glob("*.csv"))


def _describe_available(names: list[str]) -> str:
    if not names:
        return "no .csv files there"
    shown = ", ".join(names[:8])
    return f"available: {shown}{', ...' if len(names) > 8 else ''} {len(names)} files"


# ---------------------------------------------------------------------------- csv


class _NotFound(Exception):
    """A source has nothing for this symbol: the chain moves on (internal)."""


def find_csv(symbol: str, data_dir: Path, timeframe: str = "1d") -> Path:
    """Locate ``SYMBOL.csv`` (or ``SYMBOL_1h.csv``...) case-insensitively; DataError if absent."""
    if not data_dir.is_dir():
        raise DataError(
            f"--data-dir: {data_dir} does not exist or is not a folder; "
            "pass a folder that holds SYMBOL.csv files (date,open,high,low,close,volume)"
        )
    stem = _file_stem(symbol).lower()
    by_name = {p.name.lower(): p for p in data_dir.iterdir() if p.suffix.lower() == ".csv"}
    wanted = [f"{stem}_{timeframe}.csv", f"{stem}.csv"]
    if timeframe == "1d":
        wanted = [f"{stem}.csv", f"{stem}_1d.csv"]
    for name in wanted:
        if name in by_name:
            return by_name[name]
    # e.g. BTCUSD_bitstamp_1h.csv for BTCUSD at 1h: accept one unambiguous match.
    suffix = f"_{timeframe}.csv"
    loose = [p for n, p in by_name.items() if n.startswith(stem + "_") and n.endswith(suffix)]
    if len(loose) == 1:
        return loose[0]
    sym = _file_stem(symbol).upper()
    hint = f"{sym}.csv" if timeframe == "1d" else f"{sym}_{timeframe}.csv or {sym}.csv"
    available = _available(data_dir)
    where = f"in --data-dir {data_dir} ({_describe_available(available)})"
    raise MissingSymbolError(
        f"--tickers: {symbol} has no file {hint} {where}; pick one of those or add {hint}",
        symbol=symbol,
        available=available,
        short=f"csv: no {hint} {where}",
    )


def read_bars_csv(path: Path, timeframe: str = "1d", *, prices: Prices = "raw") -> pd.DataFrame:
    """Read one corpus-format CSV into canonical bars; DataError naming the file and problem."""
    try:
        raw = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"--data-dir: cannot read {path}: {first}; fix or remove the file") from exc
    raw.columns = [str(c).strip().lower().replace(" ", "_") for c in raw.columns]
    date_col = next((c for c in DATE_COLUMNS if c in raw.columns), None)
    missing = [c for c in ("open", "high", "low", "close") if c not in raw.columns]
    if date_col is None:
        missing.insert(0, "date")
    if missing:
        raise DataError(
            f"--data-dir: {path} is missing column(s) {', '.join(missing)} "
            f"(has: {', '.join(map(str, raw.columns))}); "
            "expected date,open,high,low,close,volume"
        )
    stamps = pd.to_datetime(raw[date_col], errors="coerce", format="mixed")
    bad = stamps.isna() & raw[date_col].notna()
    if raw[date_col].isna().any() or bad.any():
        row = int(np.flatnonzero(stamps.isna().to_numpy())[0])
        raise DataError(
            f"--data-dir: {path} has an unparsable date {raw[date_col].iloc[row]!r} "
            f"on line {row + 2}; use ISO dates like 2020-01-31"
        )
    for col in ("open", "high", "low", "close", "volume"):
        if col not in raw.columns:
            continue
        num = pd.to_numeric(raw[col], errors="coerce")
        bad = num.isna() & raw[col].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"--data-dir: {path} has a non-numeric {col} value {raw[col].iloc[row]!r} "
                f"on line {row + 2}; prices and volume must be numbers"
            )
    frame = raw.set_index(pd.DatetimeIndex(stamps))
    bars = normalize_bars(frame, what=f"--data-dir: {path}", prices=prices)
    if timeframe == "1h" and len(bars) and (bars.index == bars.index.normalize()).all():
        raise DataError(
            f"--timeframe: {path} holds daily bars (no times of day), not 1h bars; "
            "use --timeframe 1d or provide SYMBOL_1h.csv with timestamps"
        )
    return bars


def _from_csv(
    symbol: str, start: date, end: date, timeframe: str, data_dir: Path, prices: Prices = "raw"
) -> tuple[pd.DataFrame, str]:
    path = find_csv(symbol, data_dir, timeframe)
    bars = read_bars_csv(path, timeframe, prices=prices)
    sliced = _slice(bars, start, end)
    if sliced.empty:
        have = "no bars"
        if len(bars):
            have = f"bars from {bars.index[0].date()} to {bars.index[-1].date()}"
        raise DataError(
            f"--start/--end: {path.name} in --data-dir {data_dir} has {have}, none in "
            f"{start}..{end}; pick dates inside that range"
        )
    return sliced, str(path)


# ---------------------------------------------------------------------------- cache


def cache_path(symbol: str, timeframe: str, cache_dir: Path) -> Path:
    return cache_dir / "ohlcv" / f"{_file_stem(symbol).upper()}_{timeframe}.parquet"


def read_cache(
    symbol: str, start: date, end: date, timeframe: str, cache_dir: Path
) -> tuple[pd.DataFrame, str]:
    path = cache_path(symbol, timeframe, cache_dir)
    if not path.exists():
        raise _NotFound(f"cache: no entry {path.name}")
    try:
        bars = normalize_bars(pd.read_parquet(path), what=f"cache {path}")
    except Exception as exc:  # a corrupt cache entry is a miss, not a failure
        raise _NotFound(f"cache: unreadable {path.name} ({type(exc).__name__})") from exc
    if bars.empty:
        raise _NotFound(f"cache: {path.name} is empty")
    first, last = bars.index[0].date(), bars.index[-1].date()
    if first > start + CACHE_EDGE_SLACK or last < end - CACHE_EDGE_SLACK:
        raise _NotFound(f"cache: {path.name} covers {first}..{last}, not {start}..{end}")
    sliced = _slice(bars, start, end)
    if sliced.empty:
        raise _NotFound(f"cache: {path.name} has no bars in {start}..{end}")
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


# ---------------------------------------------------------------------------- yfinance


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


def _from_yfinance(
    symbol: str,
    start: date,
    end: date,
    timeframe: str,
    cache_dir: Path,
    timeout: float,
    fetcher: Fetcher,
    prices: Prices = "raw",
) -> tuple[pd.DataFrame, str | None]:
    try:
        raw = fetcher(
            symbol, start=start, end=end, interval=timeframe, timeout=timeout, cache_dir=cache_dir
        )
    except Exception as exc:  # network, DNS, parsing: all mean "not available"
        raise _NotFound(f"yfinance: {type(exc).__name__}: {str(exc)[:120]}") from exc
    if raw is None or raw.empty:
        raise _NotFound("yfinance: empty download (offline or unknown symbol)")
    try:
        bars = normalize_bars(raw, what=f"yfinance {symbol}", prices=prices)
    except DataError as exc:
        raise _NotFound(f"yfinance: unusable frame ({exc})") from exc
    if bars.empty:
        raise _NotFound("yfinance: download had no complete bars")
    path: str | None = None
    if prices == "raw":  # the cache holds raw prices only
        with contextlib.suppress(OSError):  # a read-only cache must not lose the download
            path = str(write_cache(symbol, bars, timeframe, cache_dir))
    sliced = _slice(bars, start, end)
    if sliced.empty:
        raise _NotFound(f"yfinance: no bars in {start}..{end}")
    return sliced, path


# ---------------------------------------------------------------------------- synthetic


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


# ---------------------------------------------------------------------------- chain


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
) -> LoadedBars:
    """Load ``symbol`` over [start, end] (inclusive) through the source chain.

    ``auto``: with ``data_dir`` the CSV folder is tried first (the user pointed at
    it on purpose), then the parquet cache, then yfinance; without it, cache then
    yfinance. ``synthetic`` is never a fallback: only used when asked for.
    ``fetcher`` replaces the yfinance download (tests pass a fake).
    ``prices="adjusted"``: total return from ``adj_close`` (a CSV without it is a
    DataError); the parquet cache, which holds raw prices, is skipped; synthetic bars have
    no dividends and are the same either way.
    """
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
    symbol = symbol.strip()
    if not symbol:
        raise DataError("--tickers: empty symbol; pass symbols like AAPL,MSFT")
    data_dir = Path(data_dir).expanduser() if data_dir is not None else None
    cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    fetch = fetcher or yfinance_fetch

    if source == "synthetic":
        bars = synthetic_bars(symbol, start, end, timeframe, seed)
        return _finish(symbol, bars, "synthetic", timeframe, None, [f"synthetic seed={seed}"])
    if source == "csv" and data_dir is None:
        raise DataError("--data-dir: --source csv needs --data-dir DIR holding SYMBOL.csv files")

    steps: list[tuple[str, Callable[[], tuple[pd.DataFrame, str | None]]]] = []
    if data_dir is not None and source in ("auto", "csv"):
        steps.append(("csv", lambda: _from_csv(symbol, start, end, timeframe, data_dir, prices)))
    if source in ("auto", "cache") and prices == "raw":
        steps.append(("cache", lambda: read_cache(symbol, start, end, timeframe, cache_dir)))
    if source in ("auto", "yfinance"):
        steps.append(
            (
                "yfinance",
                lambda: _from_yfinance(
                    symbol, start, end, timeframe, cache_dir, yf_timeout, fetch, prices
                ),
            )
        )

    notes: list[str] = []
    for name, step in steps:
        try:
            bars, path = step()
        except _NotFound as miss:
            notes.append(str(miss))
            continue
        except MissingSymbolError as err:
            # A missing file in an explicit folder may still be found downstream in
            # auto mode; a broken file or an empty range in it is the user's to fix.
            if source != "auto":
                raise
            notes.append(err.short)
            continue
        return _finish(symbol, bars, name, timeframe, path, notes)

    tried = "; ".join(notes) or "nothing"
    hint = (
        f"pass --data-dir DIR with {_file_stem(symbol).upper()}.csv, "
        "or --source synthetic for a seeded synthetic series"
    )
    if source == "cache":
        hint = "run once with --source auto or yfinance while online, or pass --data-dir DIR"
    raise DataError(
        f"--tickers: no data for {symbol} {timeframe} {start}..{end} (tried {tried}); {hint}"
    )


def load_universe(symbols: Iterable[str], **kw: Any) -> dict[str, LoadedBars]:
    """Load every symbol with the same options; the first DataError propagates."""
    return {sym: load_bars(sym, **kw) for sym in symbols}


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
