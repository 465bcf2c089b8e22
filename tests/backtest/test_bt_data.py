"""Source chain: CSV corpus, error messages, cache, injected yfinance fetcher, synthetic.

The real yfinance is never called: an autouse fixture replaces the default fetcher
with one that fails the test.
"""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars

from backtest import data
from backtest.data import cache_path, chain, load_bars, load_universe, synthetic_bars, write_cache
from backtest.errors import DataError

START, END = date(2015, 1, 1), date(2016, 12, 31)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args, **kwargs):
        raise AssertionError("a test reached the real yfinance")

    monkeypatch.setattr(chain, "yfinance_fetch", forbidden)  # the chain's default fetcher


class FakeFetcher:
    """Stands in for yfinance: returns a canned frame and counts calls."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.calls: list[dict] = []

    def __call__(self, symbol: str, **kwargs) -> pd.DataFrame:
        self.calls.append({"symbol": symbol, **kwargs})
        return self.frame


def _yf_style(bars: pd.DataFrame, symbol: str) -> pd.DataFrame:
    """A frame shaped like yfinance 0.2.48+: (Price, Ticker) MultiIndex columns."""
    df = bars.rename(columns=str.title).assign(**{"Adj Close": bars["close"]})
    df.columns = pd.MultiIndex.from_product([df.columns, [symbol]], names=["Price", "Ticker"])
    df.index.name = "Date"
    return df


@pytest.mark.integration
def test_csv_loads_real_corpus(daily_dir: Path, tmp_path: Path) -> None:
    lb = load_bars("aapl", start=START, end=END, data_dir=daily_dir, cache_dir=tmp_path)
    assert lb.source_used == "csv" and lb.path.endswith("AAPL.csv")
    bars = lb.bars
    assert list(bars.columns) == ["open", "high", "low", "close", "volume"]
    assert (bars.dtypes == "float64").all() and bars.index.name == "date"
    assert bars.index.is_monotonic_increasing and bars.index.is_unique
    assert len(bars) == 504
    assert bars.index[0] == pd.Timestamp("2015-01-02")
    assert bars.index[-1] == pd.Timestamp("2016-12-30")
    expected = read_real_bars("AAPL", "2015-01-01", "2016-12-31")
    assert bars.index.dtype == "datetime64[ns]"  # one unit whatever the source
    expected.index = expected.index.as_unit("ns")
    pd.testing.assert_frame_equal(bars, expected, check_freq=False)
    assert lb.quality.n_bars == 504 and len(lb.sha256) == 64
    # an index symbol with a caret maps to the corpus file without it
    gspc = load_bars("^GSPC", start=START, end=END, source="csv", data_dir=daily_dir)
    assert gspc.path.endswith("GSPC.csv")


@pytest.mark.unit
def test_missing_data_dir(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"--data-dir: .*nope does not exist"):
        load_bars("AAPL", start=START, end=END, data_dir=tmp_path / "nope", cache_dir=tmp_path)
    with pytest.raises(DataError, match="--source csv needs --data-dir"):
        load_bars("AAPL", start=START, end=END, source="csv", cache_dir=tmp_path)


@pytest.mark.integration
def test_missing_symbol_lists_available(daily_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load_bars("XYZ", start=START, end=END, source="csv", data_dir=daily_dir)
    msg = str(err.value)
    assert msg.startswith("--tickers: XYZ has no file XYZ.csv in --data-dir")
    assert "available: AAPL, ADBE" in msg and "32 files" in msg and "\n" not in msg


def _write(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "csvs"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("date,open,high,close\n2015-01-02,1,2,1.5\n", r"missing column\(s\) low"),
        ("day,open,high,low,close\n2015-01-02,1,2,0.5,1.5\n", r"missing column\(s\) date"),
        (
            "date,open,high,low,close,volume\n2015-01-02,1,2,0.5,1.5,10\nnot-a-date,1,2,0.5,1.5,10\n",
            r"unparsable date 'not-a-date' on line 3",
        ),
        (
            "date,open,high,low,close,volume\n2015-01-02,1,2,0.5,abc,10\n",
            r"non-numeric close value 'abc' on line 2",
        ),
        ("", r"cannot read .*BAD.csv"),
    ],
)
def test_malformed_csv(tmp_path: Path, text: str, pattern: str) -> None:
    folder = _write(tmp_path, "BAD.csv", text)
    with pytest.raises(DataError, match=pattern) as err:
        load_bars("BAD", start=START, end=END, data_dir=folder, cache_dir=tmp_path)
    assert "BAD.csv" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.integration
def test_range_without_data_names_available_range(daily_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        load_bars(
            "AAPL",
            start=date(2021, 1, 1),
            end=date(2021, 6, 30),
            data_dir=daily_dir,
            cache_dir=tmp_path,
        )
    msg = str(err.value)
    assert msg.startswith("--start/--end:")
    assert "1980-12-12 to 2020-12-11" in msg and "2021-01-01..2021-06-30" in msg


@pytest.mark.unit
def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="--start/--end: start 2016"):
        load_bars("AAPL", start=END, end=START, cache_dir=tmp_path)
    with pytest.raises(DataError, match="--source"):
        load_bars("AAPL", start=START, end=END, source="web", cache_dir=tmp_path)
    with pytest.raises(DataError, match="--timeframe"):
        load_bars("AAPL", start=START, end=END, timeframe="5m", cache_dir=tmp_path)


@pytest.mark.integration
def test_chain_yfinance_then_cache_round_trip(tmp_path: Path) -> None:
    real = read_real_bars("AAPL", "2014-12-01", "2017-01-31")
    fetch = FakeFetcher(_yf_style(real, "AAPL"))
    first = load_bars("AAPL", start=START, end=END, cache_dir=tmp_path, fetcher=fetch)
    assert first.source_used == "yfinance" and len(fetch.calls) == 1
    call = fetch.calls[0]
    assert (call["start"], call["end"], call["interval"]) == (START, END, "1d")
    assert call["cache_dir"] == tmp_path
    assert "cache: no entry AAPL_1d.parquet" in first.notes
    assert cache_path("AAPL", "1d", tmp_path).exists()
    assert len(first.bars) == 504

    second = load_bars("AAPL", start=START, end=END, cache_dir=tmp_path, fetcher=fetch)
    assert second.source_used == "cache" and len(fetch.calls) == 1
    assert second.sha256 == first.sha256
    pd.testing.assert_frame_equal(second.bars, first.bars)

    # a range the cache does not cover goes back to the fetcher
    load_bars("AAPL", start=date(2010, 1, 1), end=END, cache_dir=tmp_path, fetcher=fetch)
    assert len(fetch.calls) == 2


@pytest.mark.unit
def test_cache_edge_slack(tmp_path: Path) -> None:
    bars = synthetic_bars("ABC", date(2015, 1, 5), date(2015, 12, 30))
    write_cache("ABC", bars, "1d", tmp_path)
    hit = load_bars(
        "ABC", start=date(2015, 1, 1), end=date(2015, 12, 31), source="cache", cache_dir=tmp_path
    )
    assert hit.source_used == "cache" and len(hit.bars) == len(bars)
    with pytest.raises(DataError, match="covers 2015-01-05..2015-12-30"):
        load_bars(
            "ABC",
            start=date(2014, 6, 1),
            end=date(2015, 12, 31),
            source="cache",
            cache_dir=tmp_path,
        )


@pytest.mark.integration
def test_chain_order_with_data_dir(daily_dir: Path, tmp_path: Path) -> None:
    fetch = FakeFetcher(_yf_style(read_real_bars("MSFT", "2015-01-01", "2016-12-31"), "AAPL"))
    # explicit folder wins over cache and network
    lb = load_bars(
        "AAPL", start=START, end=END, data_dir=daily_dir, cache_dir=tmp_path, fetcher=fetch
    )
    assert lb.source_used == "csv" and fetch.calls == []
    # a symbol missing from the folder falls through to yfinance in auto mode
    lb = load_bars(
        "ZZZZ", start=START, end=END, data_dir=daily_dir, cache_dir=tmp_path, fetcher=fetch
    )
    assert lb.source_used == "yfinance" and len(fetch.calls) == 1
    assert lb.notes[0].startswith("csv: no ZZZZ.csv")


@pytest.mark.unit
def test_empty_download_falls_through_to_a_clear_error(tmp_path: Path) -> None:
    empty = FakeFetcher(pd.DataFrame())
    with pytest.raises(DataError) as err:
        load_bars("AAPL", start=START, end=END, cache_dir=tmp_path, fetcher=empty)
    msg = str(err.value)
    assert len(empty.calls) == 1
    assert msg.startswith("--tickers: no data for AAPL")
    assert "yfinance: empty download" in msg and "cache: no entry" in msg
    assert "--data-dir DIR with AAPL.csv" in msg and "--source synthetic" in msg
    assert not cache_path("AAPL", "1d", tmp_path).exists()

    def boom(symbol: str, **kwargs) -> pd.DataFrame:
        raise ConnectionError("DNS failure")

    with pytest.raises(DataError, match="yfinance: ConnectionError: DNS failure"):
        load_bars("AAPL", start=START, end=END, cache_dir=tmp_path, fetcher=boom)


@pytest.mark.unit
def test_synthetic_is_deterministic_and_realistic(tmp_path: Path) -> None:
    kw = {"start": date(2015, 1, 1), "end": date(2018, 12, 31), "source": "synthetic"}
    a = load_bars("TECH", seed=7, cache_dir=tmp_path, **kw)
    b = load_bars("TECH", seed=7, cache_dir=tmp_path, **kw)
    assert a.source_used == "synthetic" and a.sha256 == b.sha256
    pd.testing.assert_frame_equal(a.bars, b.bars)
    assert load_bars("TECH", seed=8, **kw).sha256 != a.sha256
    assert load_bars("OTHER", seed=7, **kw).sha256 != a.sha256

    bars = a.bars
    assert bars.index.equals(pd.bdate_range("2015-01-01", "2018-12-31", name="date"))
    assert (bars["high"] >= bars[["open", "close"]].max(axis=1)).all()
    assert (bars["low"] <= bars[["open", "close"]].min(axis=1)).all()
    assert (bars["volume"] > 0).all() and (bars["volume"] == bars["volume"].round()).all()
    vol = np.log(bars["close"]).diff().std() * np.sqrt(252)
    assert 0.2 < vol < 0.45
    gaps = (bars["open"] / bars["close"].shift(1) - 1).abs().dropna()
    assert gaps.median() < 0.01  # opens near the previous close
    assert a.quality.ohlc_violations == 0


@pytest.mark.integration
def test_load_universe(daily_dir: Path, tmp_path: Path) -> None:
    got = load_universe(
        ["AAPL", "MSFT"], start=START, end=END, data_dir=daily_dir, cache_dir=tmp_path
    )
    assert list(got) == ["AAPL", "MSFT"] and all(v.source_used == "csv" for v in got.values())
    with pytest.raises(DataError, match="XYZ"):
        load_universe(["AAPL", "XYZ"], start=START, end=END, source="csv", data_dir=daily_dir)


@pytest.mark.integration
def test_two_tickers_that_read_one_file_are_refused(daily_dir: Path, tmp_path: Path) -> None:
    """``SYN[`` and ``SYN_`` (or ``aapl`` beside ``AAPL``) name one file: trading it twice
    under two names would be one series counted as two, so the load says so."""
    shutil.copy(daily_dir / "AAPL.csv", tmp_path / "SYN_.csv")
    with pytest.raises(DataError, match=r"SYN\[ and SYN_ both read .*SYN_\.csv"):
        load_universe(["SYN[", "SYN_"], start=START, end=END, source="csv", data_dir=tmp_path)
    with pytest.raises(DataError, match="AAPL and aapl both read"):
        load_universe(["AAPL", "aapl"], start=START, end=END, source="csv", data_dir=daily_dir)
    assert list(load_universe(["SYN_"], start=START, end=END, source="csv", data_dir=tmp_path))


@pytest.mark.integration
def test_hourly_csv(shared_data: Path) -> None:
    lb = load_bars(
        "BTCUSDT",
        start=date(2019, 1, 1),
        end=date(2019, 1, 31),
        timeframe="1h",
        source="csv",
        data_dir=shared_data / "ohlcv" / "crypto",
    )
    assert lb.path.endswith("BTCUSDT_binance_1h.csv")
    assert lb.bars.index[0] == pd.Timestamp("2019-01-01 00:00") and len(lb.bars) > 700
    assert lb.bars.index[-1] <= pd.Timestamp("2019-01-31 23:00")
    assert data.periods_per_year(lb.bars, "1h") == 365 * 24
