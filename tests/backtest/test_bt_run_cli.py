"""``python -m backtest.run``: one JSON object on stdout, exit 0 when judged, 2 on bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import bt_strategy_sources as src
import pytest
from conftest import REPO_ROOT

from backtest.run import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) <= 1, "more than one line on stdout"
    return rc, json.loads(lines[0]) if lines else None, err


@pytest.fixture()
def strategy(tmp_path: Path) -> Path:
    path = tmp_path / "my_cross.py"
    path.write_text(src.SMA_CROSS)
    return path


COMMON = ("--start", "2015-01-01", "--end", "2016-12-31")


@pytest.mark.integration
def test_one_ticker_with_lookahead(capsys, strategy: Path, daily_dir: Path) -> None:
    rc, out, _ = _run(
        capsys,
        str(strategy),
        "--data-dir",
        str(daily_dir),
        "--tickers",
        "AAPL",
        *COMMON,
        "--check-lookahead",
        "--cuts",
        "4",
        "--commission",
        "0.1",
        "--slippage",
        "0.05",
    )
    assert rc == 0 and out["status"] == "ok" and out["error"] is None
    assert out["metrics"]["n_trades"] > 0
    assert out["lookahead"]["biased"] is False and out["lookahead"]["mismatches"] == []


@pytest.mark.integration
def test_several_tickers_and_a_rejected_file(capsys, tmp_path: Path, daily_dir: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(src.SMA_CROSS)
    rc, out, _ = _run(
        capsys, str(good), "--data-dir", str(daily_dir), "--tickers", "AAPL,MSFT", *COMMON
    )
    assert rc == 0 and out["status"] == "ok" and set(out["per_ticker"]) == {"AAPL", "MSFT"}
    assert out["metrics"]["n_obs"] == out["per_ticker"]["AAPL"]["metrics"]["n_obs"]
    bad = tmp_path / "peek.py"
    bad.write_text(src.SMA_CROSS.replace("self.cross[0] > 0", "self.data.close[1] > 0"))
    rc, out, _ = _run(capsys, str(bad), "--data-dir", str(daily_dir), "--tickers", "AAPL", *COMMON)
    assert rc == 0 and out["status"] == "rejected" and "positive index" in out["error"]


@pytest.mark.integration
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--tickers", "NOPE"], "--tickers"),
        (["--tickers", "AAPL", "--start", "2015-13-01"], "--start"),
        (["--tickers", "AAPL", "--commission", "9"], "--commission"),
        (["--tickers", "AAPL", "--borrow-cost", "-2"], "--borrow-cost"),
        (["--tickers", "AAPL", "--borrow-cost", "lots"], "--borrow-cost"),
        (["--tickers", ""], "--tickers"),
    ],
)
def test_bad_arguments_exit_2(capsys, strategy: Path, daily_dir: Path, argv, fragment) -> None:
    base = ["--start", "2015-01-01", "--end", "2016-12-31"]
    rc, out, err = _run(capsys, str(strategy), "--data-dir", str(daily_dir), *base, *argv)
    assert rc == 2 and out is None
    assert fragment in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
def test_as_a_module_stdout_is_pure_json(strategy: Path, daily_dir: Path) -> None:
    noisy = strategy.with_name("noisy.py")
    noisy.write_text(
        src.SMA_CROSS.replace("def next(self):", "def next(self):\n        print('bar')")
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "backtest.run",
            str(noisy),
            "--data-dir",
            str(daily_dir),
            "--tickers",
            "AAPL",
            *COMMON,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-1000:]
    assert json.loads(proc.stdout)["status"] == "ok" and proc.stdout.count("\n") == 1
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "backtest.run",
            "nope.py",
            "--data-dir",
            str(daily_dir),
            "--tickers",
            "AAPL",
            *COMMON,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and missing.stdout == "" and "STRATEGY" in missing.stderr


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


EAGER = """
import backtrader as bt


class Eager(bt.Strategy):
    params = dict(size=10)

    def next(self):
        if not self.position:
            self.buy(size=self.p.size)
"""


@pytest.mark.integration
def test_json_is_strict_nan_becomes_null(tmp_path: Path, daily_dir: Path) -> None:
    """Issue 13 item 7: a 3-bar run printed ``"kurtosis": NaN``."""
    path = tmp_path / "eager.py"
    path.write_text(EAGER)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "backtest.run",
            str(path),
            "--data-dir",
            str(daily_dir),
            "--tickers",
            "AAPL",
            "--start",
            "2015-01-02",
            "--end",
            "2015-01-06",
            "--warmup-days",
            "5",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-1000:]
    out = _strict(proc.stdout)
    assert out["status"] == "ok" and out["metrics"]["n_obs"] == 3
    assert out["metrics"]["kurtosis"] is None


@pytest.mark.integration
def test_skip_validation_hands_the_file_to_the_sandbox(capsys, tmp_path: Path, daily_dir):
    path = tmp_path / "linted.py"  # the lint refuses the import; the sandbox runs it
    path.write_text("import os\n" + src.SMA_CROSS)
    argv = (str(path), "--data-dir", str(daily_dir), "--tickers", "AAPL", *COMMON)
    rc, out, _ = _run(capsys, *argv)
    assert rc == 0 and out["status"] == "rejected"
    rc, out, _ = _run(capsys, *argv, "--skip-validation")
    assert rc == 0 and out["status"] == "ok" and out["metrics"]["n_trades"] > 0


ALL_IN = """
import backtrader as bt


class AllIn(bt.Strategy):
    params = dict(n=5)

    def __init__(self):
        self.roc = bt.ind.ROC(period=self.p.n)

    def next(self):
        if not self.position and self.roc[0] > 0:
            self.buy(size=int(self.broker.getvalue() / self.data.close[0]))
        elif self.position and self.roc[0] < 0:
            self.close()
"""


@pytest.mark.integration
def test_orders_the_broker_refused_are_counted_and_warned(capsys, tmp_path: Path, daily_dir):
    """Issue 16 item 7: entries sized at 100% of equity are refused whenever the next open
    gaps up; the count is in the metrics and a warning says what it means."""
    path = tmp_path / "all_in.py"
    path.write_text(ALL_IN)
    rc, out, err = _run(
        capsys, str(path), "--data-dir", str(daily_dir), "--tickers", "AAPL", *COMMON
    )
    assert rc == 0 and out["status"] == "ok"
    refused = out["metrics"]["orders_rejected"]
    assert refused > 0
    assert len(out["warnings"]) == 1 and f"refused {refused} order(s)" in out["warnings"][0]
    assert "warning: AAPL: the broker refused" in err


@pytest.mark.integration
def test_a_regime_strategy_gets_its_index_file_from_the_data_dir(
    capsys, tmp_path: Path, daily_dir: Path
) -> None:
    """A strategy reading ``getdatabyname("index:SPY")`` gets SPY.csv from --data-dir as an
    extra feed (never traded); without the file, exit 2 naming it (was a KeyError)."""
    import shutil

    from strategies.codegen import render
    from strategies.families import default_spec, with_regime_filter
    from strategies.spec import Family

    regime = tmp_path / "regime.py"
    regime.write_text(render(with_regime_filter(default_spec(Family.TREND))))
    plain = tmp_path / "plain.py"
    plain.write_text(render(default_spec(Family.TREND)))
    window = ("--tickers", "AAPL", "--start", "2008-01-01", "--end", "2010-12-31")
    rc, out, err = _run(
        capsys,
        str(regime),
        "--data-dir",
        str(daily_dir),
        *window,
        "--check-lookahead",
        "--cuts",
        "3",
    )
    assert rc == 0 and out["status"] == "ok", (out, err)
    assert out["lookahead"]["biased"] is False and out["lookahead"]["checked"] is True
    rc, bare, _ = _run(capsys, str(plain), "--data-dir", str(daily_dir), *window)
    assert rc == 0 and 0 < out["metrics"]["n_trades"] < bare["metrics"]["n_trades"]

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(daily_dir / "AAPL.csv", data / "AAPL.csv")
    rc, out, err = _run(capsys, str(regime), "--data-dir", str(data), *window)
    assert rc == 2 and out is None and len(err.strip().splitlines()) == 1, err
    assert err.startswith("backtest.run: --data-dir: the strategy reads the index SPY")
    assert f"add SPY.csv to {data}" in err and "Traceback" not in err
    rc, out, _ = _run(capsys, str(plain), "--data-dir", str(data), *window)
    assert rc == 0 and out["status"] == "ok"  # no index read: none needed
