"""Broken bars are refused (exit 2 naming the file, line, date and fix) or, with --repair,
mended and reported change by change: a negative close and a repeated date once ran to the
end and the failure analysis blamed the strategies."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import bt_strategy_sources as src
import numpy as np
import pandas as pd
import pytest

from backtest.data import load_bars
from backtest.errors import DataError
from backtest.run import main

pytestmark = pytest.mark.integration


def _write(folder: Path, symbol: str = "TEST", n: int = 320, edit=None) -> Path:
    """A clean daily CSV (NYSE days of 2019-2020), optionally edited row by row."""
    days = pd.bdate_range("2019-01-02", periods=n)
    close = 100 * np.exp(np.cumsum(np.random.default_rng(3).normal(0, 0.01, n)))
    frame = pd.DataFrame(
        {
            "date": days.strftime("%Y-%m-%d"),
            "open": close,
            "high": close * 1.01,
            "low": close * 0.99,
            "close": close,
            "volume": 1e6,
        }
    )
    if edit is not None:
        frame = edit(frame)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{symbol}.csv"
    frame.to_csv(path, index=False)
    return path


def _negative_close(f: pd.DataFrame) -> pd.DataFrame:
    f.loc[100, "close"] = -3.0
    return f


def _duplicate_date(f: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([f.iloc[:150], f.iloc[[149]], f.iloc[150:]], ignore_index=True)


def _high_below_close(f: pd.DataFrame) -> pd.DataFrame:
    f.loc[120, "high"] = f.loc[120, "close"] * 0.9
    return f


def _high_below_low(f: pd.DataFrame) -> pd.DataFrame:
    f.loc[130, ["open", "close"]] = 100.0
    f.loc[130, ["high", "low"]] = [99.0, 101.0]
    return f


def _run(capsys, *argv: str) -> tuple[int, dict | None, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, json.loads(out) if out.strip() else None, err


@pytest.mark.parametrize(
    ("edit", "line", "day", "needle"),
    [
        (_negative_close, 102, "2019-05-22", "close -3 not positive"),
        (_duplicate_date, 151, "2019-07-30", "repeated later in the file"),
        (_high_below_close, 122, "2019-06-19", "below max(open, close)"),
        (_high_below_low, 132, "2019-07-03", "below"),
    ],
)
def test_backtest_run_refuses_broken_bars(capsys, tmp_path, edit, line, day, needle) -> None:
    path = _write(tmp_path / "data", edit=edit)
    strategy = tmp_path / "s.py"
    strategy.write_text(src.SMA_CROSS)
    rc, out, err = _run(
        capsys,
        str(strategy),
        "--data-dir",
        str(path.parent),
        "--tickers",
        "TEST",
        "--start",
        "2019-03-01",
        "--end",
        "2020-03-01",
        "--warmup-days",
        "30",
    )
    assert rc == 2 and out is None
    assert len(err.strip().splitlines()) == 1, err
    assert str(path) in err and f"line {line} ({day})" in err and needle in err
    assert "--repair" in err


def test_backtest_run_repair_mends_and_reports_each_change(capsys, tmp_path) -> None:
    path = _write(tmp_path / "data", edit=lambda f: _high_below_close(_negative_close(f)))
    strategy = tmp_path / "s.py"
    strategy.write_text(src.SMA_CROSS)
    rc, out, err = _run(
        capsys,
        str(strategy),
        "--data-dir",
        str(path.parent),
        "--tickers",
        "TEST",
        "--start",
        "2019-03-01",
        "--end",
        "2020-03-01",
        "--warmup-days",
        "30",
        "--repair",
    )
    assert rc == 0 and out["status"] == "ok"
    repaired = [w for w in out["warnings"] if w.startswith("repaired")]
    assert len(repaired) == 2
    assert "line 102 (2019-05-22)" in repaired[0] and "row dropped" in repaired[0]
    assert "line 122 (2019-06-19)" in repaired[1] and "widened" in repaired[1]
    assert all(w in err for w in repaired)


def test_repair_keeps_the_last_copy_and_a_clean_bar_is_untouched(tmp_path) -> None:
    def edit(f: pd.DataFrame) -> pd.DataFrame:
        f = _duplicate_date(f)
        f.loc[150, "close"] = f.loc[150, "close"] * 1.001  # the later copy differs
        f.loc[150, "high"] = f.loc[150, "close"] * 1.01
        return _high_below_close(f)

    path = _write(tmp_path, edit=edit)
    raw = pd.read_csv(path)
    loaded = load_bars(
        "TEST",
        start=date(2019, 1, 1),
        end=date(2020, 12, 31),
        source="csv",
        data_dir=tmp_path,
        repair=True,
    )
    bars = loaded.bars
    assert len(bars) == len(raw) - 1 and bars.index.is_unique
    assert bars.loc["2019-07-30", "close"] == pytest.approx(raw.loc[150, "close"])
    fixed = bars.loc["2019-06-19"]
    assert fixed["high"] == pytest.approx(max(fixed["open"], fixed["close"]))
    assert bars.loc["2019-06-18", "high"] == pytest.approx(raw.loc[119, "high"])
    summary = loaded.summary()
    assert [r["kind"] for r in summary["repairs"]] == ["ohlc", "duplicate"]


def test_a_broken_bar_outside_the_window_is_not_read(tmp_path) -> None:
    _write(tmp_path, edit=_negative_close)  # 2019-05-22
    ok = load_bars(
        "TEST", start=date(2019, 7, 1), end=date(2020, 3, 1), source="csv", data_dir=tmp_path
    )
    assert ok.repairs == () and len(ok.bars) > 100
    with pytest.raises(DataError, match="line 102"):
        load_bars(
            "TEST", start=date(2019, 1, 1), end=date(2020, 3, 1), source="csv", data_dir=tmp_path
        )
