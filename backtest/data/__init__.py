"""Market data: where bars come from, and what is known about them.

The public face of the data wing. ``load_bars`` is the source chain (``backtest.data.chain``:
CSV folder, parquet cache, yfinance, seeded synthetic); every source returns the canonical
frame of ``backtest.data.bars``; ``backtest.data.integrity`` refuses or repairs broken bars;
``backtest.data.quality`` reports gaps and coverage against the market's trading days
(``backtest.data.trading_days``). Code outside the wing imports from here only.
"""

from backtest.data.bars import Prices
from backtest.data.cache import cache_path, default_cache_dir, write_cache
from backtest.data.chain import (
    PRICES,
    SOURCES,
    TIMEFRAMES,
    LoadedBars,
    load_bars,
    load_universe,
    periods_per_year,
)
from backtest.data.csv import find_csv, read_bars_csv
from backtest.data.integrity import BarDefect
from backtest.data.quality import OHLCV, QualityReport, assess_quality, bars_sha256
from backtest.data.synthetic import synthetic_bars
from backtest.data.trading_days import MarketDays, market_days, xnys_calendar
from backtest.data.yfinance import quiet_yfinance, yfinance_fetch
from backtest.errors import DataError

__all__ = [
    "OHLCV",
    "PRICES",
    "SOURCES",
    "TIMEFRAMES",
    "BarDefect",
    "DataError",
    "LoadedBars",
    "MarketDays",
    "Prices",
    "QualityReport",
    "assess_quality",
    "bars_sha256",
    "cache_path",
    "default_cache_dir",
    "find_csv",
    "load_bars",
    "load_universe",
    "market_days",
    "periods_per_year",
    "quiet_yfinance",
    "read_bars_csv",
    "synthetic_bars",
    "write_cache",
    "xnys_calendar",
    "yfinance_fetch",
]
