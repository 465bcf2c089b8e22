"""Volatility-target sizing annualises with the data's own bars a year (24/7 daily, hourly)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pandas as pd
import pytest
from lab_runs import printed_run_dir, run_develop

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CRYPTO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ohlcv" / "crypto"


def _declared_bars_per_year(code: str) -> int | None:
    cls = next(n for n in ast.parse(code).body if isinstance(n, ast.ClassDef))
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", "") == "params":
            return dict(ast.literal_eval(stmt.value)).get("bars_per_year")
    return None


@pytest.mark.parametrize(
    ("ticker", "timeframe", "start", "end", "expected"),
    [
        ("BTC-USD", "1d", "2016-01-01", "2021-12-31", 365),
        ("BTCUSDT_binance_1h", "1h", "2020-01-01", "2021-06-01", 24 * 365),
    ],
)
def test_volatility_target_code_declares_the_runs_bars_a_year(
    tmp_path: Path, ticker: str, timeframe: str, start: str, end: str, expected: int
) -> None:
    if not (CRYPTO / f"{ticker}.csv").exists():
        pytest.skip(f"crypto corpus not found at {CRYPTO}")
    args = [
        "--directive",
        "volatility breakout in bitcoin",
        "--data-dir",
        str(CRYPTO),
        "--tickers",
        ticker,
        "--timeframe",
        timeframe,
        "--start",
        start,
        "--end",
        end,
        "--variants",
        "5",
        "--folds",
        "2",
        "--max-iterations",
        "1",
        "--workers",
        "2",
        "--offline",
        "--memory-dir",
        "off",
        # The corpus' alternative data is on stocks (scoring its tweets and headlines is most
        # of a small run's research), and no figure is read here.
        "--alt-data",
        "off",
        "--no-figures",
        "--quiet",
        "--out",
        str(tmp_path / "runs"),
    ]
    run_dir = printed_run_dir(run_develop(args, cache_home=tmp_path / "cache"))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["data"]["periods_per_year"] == expected
    declared = {
        path.name: _declared_bars_per_year(path.read_text())
        for path in (run_dir / "strategies").glob("*.py")
    }
    sized = {name: n for name, n in declared.items() if n is not None}
    assert sized, f"no volatility-target variant among {sorted(declared)}"
    assert set(sized.values()) == {expected}
    # One aggregate observation per bar: hourly returns are not averaged into days (they were,
    # and the gate then annualised daily figures with 8,760 bars a year).
    verdict = json.loads((run_dir / "verdict.json").read_text())
    best = (verdict["figures"].get("in-sample") or {}).get("metrics")
    if best is not None:
        folds = manifest["data"]["folds"]
        days = (pd.Timestamp(folds[-1]["end"]) - pd.Timestamp(folds[0]["start"])).days + 1
        per_day = expected / 365
        assert best["n_obs"] == pytest.approx(days * per_day, rel=0.05)
