"""Runtime patches for backtrader, the error hierarchy, and the quiet yfinance wrapper."""

from __future__ import annotations

import collections
import collections.abc
import logging
import threading
from datetime import date
from pathlib import Path

import bt_strategy_sources as src
import pandas as pd
import pytest
from conftest import read_real_bars

from backtest import data
from backtest.compat import import_backtrader, patch_backtrader
from backtest.contracts import JobStatus
from backtest.engine import run_code_on_bars
from backtest.errors import BacktestError, DataError, MissingSymbolError


@pytest.mark.unit
def test_patch_is_idempotent_and_headless() -> None:
    patch_backtrader()
    patch_backtrader()
    assert collections.Iterable is collections.abc.Iterable
    bt = import_backtrader()
    import matplotlib

    assert matplotlib.get_backend().lower() == "agg"
    assert bt.Cerebro is not None


@pytest.mark.unit
def test_error_messages_are_one_line() -> None:
    err = DataError("--tickers: bad\n   symbol")
    assert str(err) == "--tickers: bad symbol"
    assert issubclass(MissingSymbolError, DataError) and issubclass(DataError, BacktestError)


@pytest.mark.unit
def test_yfinance_wrapper_is_quiet_and_keeps_its_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yfinance as yf

    calls: dict = {}

    def fake_download(symbol, **kwargs):
        calls.update(kwargs, symbol=symbol)
        print("1 Failed download: ['AAPL']: DNSError")  # what yfinance does offline
        logging.getLogger("yfinance").error("Could not resolve host")
        return pd.DataFrame()

    monkeypatch.setattr(yf, "download", fake_download)
    monkeypatch.setattr(yf, "set_tz_cache_location", lambda p: calls.setdefault("tz", p))
    out = data.yfinance_fetch(
        "AAPL",
        start=date(2020, 1, 1),
        end=date(2020, 1, 31),
        interval="1d",
        timeout=3.0,
        cache_dir=tmp_path,
    )
    assert out.empty
    assert calls["tz"] == str(tmp_path / "yfinance")
    assert calls["end"] == "2020-02-01"  # yfinance's end is exclusive
    assert calls["auto_adjust"] is False and calls["threads"] is False
    assert calls["timeout"] == 3.0 and calls["progress"] is False
    captured = capsys.readouterr()
    assert captured.out == "" and "DNSError" not in captured.err


@pytest.mark.integration
def test_engine_outside_the_main_thread_runs_without_alarm() -> None:
    bars = read_real_bars("AAPL", "2015-01-01", "2015-12-31")
    box = []
    worker = threading.Thread(target=lambda: box.append(run_code_on_bars(src.SMA_CROSS, bars)))
    worker.start()
    worker.join(30)
    assert box and box[0].status == JobStatus.OK


@pytest.mark.unit
def test_plotting_works_headless_when_enabled(tmp_path) -> None:
    from backtest.compat import enable_plotting

    bt = enable_plotting()
    import matplotlib

    assert matplotlib.get_backend().lower() == "agg"  # backtrader.plot's TkAgg was undone
    cerebro = bt.Cerebro()
    bars = read_real_bars("AAPL", "2015-01-01", "2015-06-30")
    cerebro.adddata(bt.feeds.PandasData(dataname=bars, openinterest=None))
    cerebro.addstrategy(bt.Strategy)
    cerebro.run()
    fig = cerebro.plot(iplot=False)[0][0]
    fig.savefig(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000
