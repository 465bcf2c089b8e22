"""The CSV folder source: ``SYMBOL.csv`` (or ``SYMBOL_1h.csv``) files in the corpus format."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

from backtest.data.bars import Prices, day_range, file_stem, normalize_bars
from backtest.data.integrity import BarDefect, check_bars
from backtest.errors import DataError, MissingSymbolError

__all__ = [
    "DATE_COLUMNS",
    "find_csv",
    "from_csv",
    "read_bars_csv",
    "read_checked_csv",
]

DATE_COLUMNS = ("date", "datetime", "timestamp", "time")


def _available(data_dir: Path) -> list[str]:
    return sorted(p.stem for p in data_dir.glob("*.csv"))


def _describe_available(names: list[str]) -> str:
    if not names:
        return "no .csv files there"
    shown = ", ".join(names[:8])
    return f"available: {shown}{', ...' if len(names) > 8 else ''} {len(names)} files"


def find_csv(symbol: str, data_dir: Path, timeframe: str = "1d") -> Path:
    """Locate ``SYMBOL.csv`` (or ``SYMBOL_1h.csv``...) case-insensitively; DataError if absent."""
    if not data_dir.is_dir():
        raise DataError(
            f"--data-dir: {data_dir} does not exist or is not a folder; "
            "pass a folder that holds SYMBOL.csv files (date,open,high,low,close,volume)"
        )
    stem = file_stem(symbol).lower()
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
    sym = file_stem(symbol).upper()
    hint = f"{sym}.csv" if timeframe == "1d" else f"{sym}_{timeframe}.csv or {sym}.csv"
    available = _available(data_dir)
    where = f"in --data-dir {data_dir} ({_describe_available(available)})"
    raise MissingSymbolError(
        f"--tickers: {symbol} has no file {hint} {where}; pick one of those or add {hint}",
        symbol=symbol,
        available=available,
        short=f"csv: no {hint} {where}",
    )


def _read_raw(path: Path) -> pd.DataFrame:
    """The file's rows as written (DatetimeIndex, duplicates and broken bars kept) with their
    line numbers in ``line``; DataError naming the file and the problem."""
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
    frame["line"] = np.arange(2, len(frame) + 2)  # the header is line 1
    return frame


def _checked_1h(bars: pd.DataFrame, path: Path, timeframe: str) -> pd.DataFrame:
    if timeframe == "1h" and len(bars) and (bars.index == bars.index.normalize()).all():
        raise DataError(
            f"--timeframe: {path} holds daily bars (no times of day), not 1h bars; "
            "use --timeframe 1d or provide SYMBOL_1h.csv with timestamps"
        )
    return bars


def read_bars_csv(path: Path, timeframe: str = "1d", *, prices: Prices = "raw") -> pd.DataFrame:
    """Read one corpus-format CSV into canonical bars; DataError naming the file and problem.

    Lenient: a re-read of a file a run already accepted (or repaired). The chain's reader,
    which refuses broken bars, is ``read_checked_csv``.
    """
    bars = normalize_bars(_read_raw(path), what=f"--data-dir: {path}", prices=prices)
    return _checked_1h(bars, path, timeframe)


def read_checked_csv(
    path: Path,
    start: date,
    end: date,
    timeframe: str = "1d",
    *,
    prices: Prices = "raw",
    repair: bool = False,
) -> tuple[pd.DataFrame, list[BarDefect]]:
    """The file's bars in [start, end] and what ``repair`` mended there; broken bars in the
    window are a DataError without it (``backtest.data.integrity``)."""
    raw = _read_raw(path)
    if raw.index.tz is not None:  # the window is naive UTC, like the canonical frame
        raw.index = raw.index.tz_convert("UTC").tz_localize(None)
    lo, hi = day_range(start, end)
    raw = raw.loc[(raw.index >= lo) & (raw.index <= hi)]
    raw, defects = check_bars(
        raw, what=f"--data-dir: {path}", repair=repair, lines=raw["line"].to_numpy()
    )
    bars = normalize_bars(raw, what=f"--data-dir: {path}", prices=prices)
    return _checked_1h(bars, path, timeframe), defects


def from_csv(
    symbol: str,
    start: date,
    end: date,
    timeframe: str,
    data_dir: Path,
    prices: Prices = "raw",
    repair: bool = False,
) -> tuple[pd.DataFrame, str, list[BarDefect]]:
    """The bars of ``symbol`` from its CSV in ``data_dir``, their source, and the defects found."""
    path = find_csv(symbol, data_dir, timeframe)
    sliced, defects = read_checked_csv(path, start, end, timeframe, prices=prices, repair=repair)
    if sliced.empty:
        bars = read_bars_csv(path, timeframe, prices=prices)
        have = "no bars"
        if len(bars):
            have = f"bars from {bars.index[0].date()} to {bars.index[-1].date()}"
        raise DataError(
            f"--start/--end: {path.name} in --data-dir {data_dir} has {have}, none in "
            f"{start}..{end}; pick dates inside that range"
        )
    return sliced, str(path), defects
