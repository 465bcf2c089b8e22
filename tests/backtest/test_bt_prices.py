"""--prices adjusted: total return from adj_close, OHLC scaled by the same factor; a file
without adj_close is a clear error, never a silent fallback to raw prices."""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest

from backtest.data import load_bars
from backtest.errors import DataError

pytestmark = pytest.mark.unit


def _write(path, *, adj: bool) -> None:
    rows = {
        "date": ["2020-01-02", "2020-01-03", "2020-01-06"],
        "open": [10.0, 10.5, 11.0],
        "high": [11.0, 11.0, 11.5],
        "low": [9.5, 10.0, 10.5],
        "close": [10.0, 10.8, 11.2],
        "volume": [100, 200, 300],
    }
    if adj:
        rows["adj_close"] = [9.0, 9.9, 11.2]  # a dividend went ex between the 2nd and 3rd
    pd.DataFrame(rows).to_csv(path / "TEST.csv", index=False)


def _load(tmp_path, prices):
    return load_bars(
        "TEST",
        start=date(2020, 1, 1),
        end=date(2020, 1, 31),
        source="csv",
        data_dir=tmp_path,
        prices=prices,
    )


def test_adjusted_scales_every_price_by_adj_close_over_close(tmp_path):
    _write(tmp_path, adj=True)
    raw, adjusted = _load(tmp_path, "raw").bars, _load(tmp_path, "adjusted").bars
    factor = np.array([0.9, 9.9 / 10.8, 1.0])
    for col in ("open", "high", "low", "close"):
        assert np.allclose(adjusted[col].to_numpy(), raw[col].to_numpy() * factor), col
    assert np.allclose(adjusted["close"], [9.0, 9.9, 11.2])
    assert (adjusted["volume"] == raw["volume"]).all()  # shares traded stay as traded
    assert _load(tmp_path, "raw").sha256 != _load(tmp_path, "adjusted").sha256


def test_adjusted_without_adj_close_is_an_error_naming_the_fix(tmp_path):
    _write(tmp_path, adj=False)
    with pytest.raises(DataError, match=r"--prices adjusted: .*TEST.csv has no adj_close"):
        _load(tmp_path, "adjusted")
    assert len(_load(tmp_path, "raw").bars) == 3


def test_the_daily_corpus_carries_adj_close(daily_dir):
    aapl = load_bars(
        "AAPL",
        start=date(2015, 1, 1),
        end=date(2015, 12, 31),
        source="csv",
        data_dir=daily_dir,
        prices="adjusted",
    ).bars
    raw = load_bars(
        "AAPL", start=date(2015, 1, 1), end=date(2015, 12, 31), source="csv", data_dir=daily_dir
    ).bars
    # Dividends make the total return larger than the price return.
    assert (
        aapl["close"].iloc[-1] / aapl["close"].iloc[0]
        > raw["close"].iloc[-1] / raw["close"].iloc[0]
    )
