"""The run's tear sheet (``experiments.tearsheet``): one offline HTML file beside report.md."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from experiments.tearsheet import (
    INPUTS,
    TEARSHEET,
    TearsheetError,
    main,
    tearsheet_inputs,
    write_tearsheet,
)
from swarm.nodes import finalize

pytestmark = pytest.mark.integration  # QuantStats and matplotlib draw the pages (a few seconds)

BEST = "i02-v01-momentum-abc123"
TRADES = [
    {
        "symbol": "AAPL",
        "entry_date": "2021-02-01",
        "exit_date": "2021-03-01",
        "size": 10.0,
        "entry_price": 100.0,
        "exit_price": 110.0,
    },
    {
        "symbol": "MSFT",
        "entry_date": "2021-04-01",
        "exit_date": None,
        "size": -5.0,
        "entry_price": 200.0,
        "exit_price": None,
    },
]
METRICS = {"exposure_pct": 81.5, "turnover_annual": 4.25, "avg_holding_bars": 12.0, "n_trades": 2}


def _windows() -> dict[str, tuple[pd.Series, pd.Series]]:
    rng = np.random.default_rng(7)
    idx = pd.bdate_range("2021-01-04", periods=420)
    bench = pd.Series(rng.normal(0.0004, 0.01, len(idx)), index=idx)
    strat = 0.8 * bench + pd.Series(rng.normal(0.0003, 0.006, len(idx)), index=idx)
    cut = 320
    return {
        "in-sample": (strat.iloc[:cut], bench.iloc[:cut]),
        "holdout": (strat.iloc[cut:], bench.iloc[cut:]),
    }


def _run_folder(root: Path, *, inputs: bool = True) -> Path:
    root.mkdir(parents=True)
    verdict = {
        "verdict": "ABANDON",
        "best_variant": BEST,
        "benchmark": {"name": "buy-and-hold"},
        "figures": {"in-sample": {"metrics": METRICS, "buy_and_hold": {"exposure_pct": 100.0}}},
    }
    (root / "verdict.json").write_text(json.dumps(verdict), encoding="utf-8")
    (root / "report.md").write_text("# report\n", encoding="utf-8")
    if inputs:
        data = tearsheet_inputs(
            _windows(), variant_id=BEST, benchmark="buy-and-hold", trades=TRADES
        )
        assert data["periods_per_year"] == 252
        (root / INPUTS).write_text(json.dumps(data), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def sheet(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = _run_folder(tmp_path_factory.mktemp("runs") / "20261125-000000-test")
    real_connect = socket.socket.connect

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the tear sheet touched the network")

    socket.socket.connect = no_network  # type: ignore[method-assign]
    try:
        path = write_tearsheet(root)
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
    assert path == root / TEARSHEET
    return path.read_text(encoding="utf-8")


def test_sheet_has_the_sections(sheet: str) -> None:
    # QuantStats' figures are inline SVG; their titles are kept as SVG comments.
    for title in (
        "Rolling Sharpe",
        "Rolling Beta to Benchmark",
        "Monthly Returns",
        "EOY Returns",
        "Underwater Plot",
        "Worst 10 Drawdowns",
        "Distribution of Monthly Returns",
        "Exposure and turnover",
        "Trade list, in-sample folds (2 trades)",
    ):
        assert title in sheet, title
    assert "buy-and-hold" in sheet
    assert "in-sample 2021-01-04 to" in sheet and "holdout" in sheet


def test_trade_rows_carry_dates_and_prices(sheet: str) -> None:
    rows = re.findall(r"<tr><td>(AAPL|MSFT)</td><td>([0-9-]+)</td><td>([^<]+)</td>", sheet)
    assert rows == [("AAPL", "2021-02-01", "100.00"), ("MSFT", "2021-04-01", "200.00")]
    assert "<td>2021-03-01</td><td>110.00</td>" in sheet
    assert "<td>open</td>" in sheet  # still open at the end of the window
    assert "<td>81.50</td><td>4.25</td>" in sheet  # exposure %, turnover a year


def test_sheet_is_readable_offline(sheet: str) -> None:
    external = re.findall(
        r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=[\"']https?://", sheet, re.I
    )
    assert not external
    assert "@import url(http" not in sheet


def test_old_run_without_inputs_draws_from_backtests(tmp_path: Path) -> None:
    root = _run_folder(tmp_path / "run", inputs=False)
    strat, _ = _windows()["in-sample"]
    folder = root / "backtests" / BEST
    folder.mkdir(parents=True)
    record = {
        "returns": strat.tolist(),
        "return_dates": [d.date().isoformat() for d in strat.index],
        "metrics": METRICS,
    }
    (folder / "PORTFOLIO-f0.json").write_text(json.dumps(record), encoding="utf-8")
    text = write_tearsheet(root).read_text(encoding="utf-8")
    assert "No benchmark series" in text
    assert "Trade list, in-sample folds</h3><p>Not recorded" in text
    assert "in-sample PORTFOLIO-f0" in text


def test_missing_returns_is_a_clear_error(tmp_path: Path) -> None:
    root = _run_folder(tmp_path / "run", inputs=False)
    with pytest.raises(TearsheetError, match=rf"no returns for {BEST}.*{INPUTS}"):
        write_tearsheet(root)


def test_cli_exits_2_on_a_folder_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main([]) == 2


def test_finalize_keeps_the_run_when_the_sheet_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from experiments.runfolder import RunFolder

    stages: list[tuple[str, str]] = []
    ctx = SimpleNamespace(
        run=RunFolder(tmp_path / "run"),
        benchmark=SimpleNamespace(name="buy-and-hold"),
        periods_per_year=252,
        progress=SimpleNamespace(stage=lambda name, msg: stages.append((name, msg))),
    )
    # No verdict.json in the folder: the sheet fails, finalize logs a line and goes on.
    finalize._tearsheet(ctx, BEST, None, _windows())  # type: ignore[arg-type]
    assert (tmp_path / "run" / INPUTS).is_file()
    assert not (tmp_path / "run" / TEARSHEET).exists()
    assert stages and stages[0][0] == "warning" and "TearsheetError" in stages[0][1]
    assert "tear sheet not written" in caplog.text


def test_finalize_traces_the_winners_trades() -> None:
    """The stored results keep trade pnls only: finalize re-runs the winner's folds with the
    trace, and each fold's flat-to-flat trades are backtrader's closed trades (plus any open)."""
    from datetime import date

    from conftest import read_real_bars

    from backtest.contracts import CostModel, Fold
    from backtest.executors import SerialBackend
    from strategies.codegen import render
    from strategies.portfolio import portfolio_spec
    from strategies.spec import PortfolioFamily

    symbols = ("AAPL", "MSFT", "NVDA")
    data = {s: SimpleNamespace(bars=read_real_bars(s, "2012-01-01", "2014-12-31")) for s in symbols}
    folds = [
        Fold(
            index=0, warmup_start=date(2012, 1, 3), start=date(2012, 10, 1), end=date(2013, 9, 30)
        ),
        Fold(
            index=1, warmup_start=date(2012, 10, 1), start=date(2013, 10, 1), end=date(2014, 9, 30)
        ),
    ]
    spec = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1})
    ctx = SimpleNamespace(
        symbols=symbols,
        data=data,
        insample_bars=lambda s: data[s].bars,
        memo=SimpleNamespace(insample_frames={}),
        folds=folds,
        config=SimpleNamespace(costs=CostModel()),
        periods_per_year=252,
        executor=SerialBackend(),  # sandboxed: the trace comes from the child
    )
    variant = {"variant_id": "v1", "code": render(spec), "spec": spec.model_dump(mode="json")}
    trades = finalize._best_trades(ctx, variant)  # type: ignore[arg-type]
    assert trades and {t["symbol"] for t in trades} <= set(symbols)
    assert [t["entry_date"] for t in trades] == sorted(t["entry_date"] for t in trades)
    assert trades[0]["entry_date"] >= "2012-10-01"
    closed = [t for t in trades if t["exit_date"] is not None]
    assert closed and all(t["exit_date"] >= t["entry_date"] for t in closed)
    assert all(t["entry_price"] > 0 and t["exit_price"] > 0 for t in closed)
