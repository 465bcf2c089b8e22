"""``gate.judge``: any Backtrader class through the lab's gate, from the CLI and from Python.

Small seeded synthetic CSVs (two tickers, 2.5 years), two folds, few lookahead cuts, the
serial executor: each judged run takes a few seconds.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from backtest.contracts import CostModel
from backtest.data import synthetic_bars
from experiments.check import check_run
from experiments.export import embedded_strategy, standalone_source
from gate.judge import JudgeResult, JudgeStatus, judge, main
from gate.judge_input import JudgeInputError, detect_scope
from strategies.validate import validate_code

TICKERS = ("AAA", "BBB")
WINDOW = ("--start", "2018-01-01", "--end", "2020-06-30")
FAST = ("--folds", "2", "--warmup-bars", "30", "--cuts", "4", "--executor", "serial")
API_FAST = {"folds": 2, "warmup_bars": 30, "cuts": 4, "executor": "serial"}

# A user's class as people write it: no params, Backtrader's defaults.
NO_PARAMS = """
import backtrader as bt


class MyCross(bt.Strategy):
    def __init__(self):
        self.cross = bt.ind.CrossOver(bt.ind.SMA(period=5), bt.ind.SMA(period=20))

    def next(self):
        if not self.position and self.cross[0] > 0:
            self.order_target_percent(target=0.95)
        elif self.position and self.cross[0] < 0:
            self.close()
"""

# Reads tomorrow's close through a variable index, which the static lint cannot refuse
# (only a constant positive index is visible); it stops peeking on the last bar it is fed, so
# it never crashes: only the truncated re-runs can see it.
PEEKS_AHEAD = """
import backtrader as bt


class Cheat(bt.Strategy):
    def __init__(self):
        self.ahead = 1

    def next(self):
        if len(self.data) >= self.data.buflen():
            return
        up = self.data.close[self.ahead] > self.data.close[0]
        if not self.position and up:
            self.order_target_percent(target=0.95)
        elif self.position and not up:
            self.close()
"""

# Reads every feed: one run over all tickers at once.
ROTATION = """
import backtrader as bt


class Rotate(bt.Strategy):
    params = dict(lookback=20)

    def __init__(self):
        self.roc = {d: bt.ind.ROC(d.close, period=self.p.lookback) for d in self.datas}

    def next(self):
        best = max(self.datas, key=lambda d: self.roc[d][0])
        for d in self.datas:
            self.order_target_percent(data=d, target=0.45 if d is best else 0.0)
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("judge-data")
    for sym in TICKERS:
        bars = synthetic_bars(sym, date(2018, 1, 1), date(2020, 6, 30), seed=1)
        bars.index.name = "date"
        bars.to_csv(folder / f"{sym}.csv", date_format="%Y-%m-%d")
    return folder


def _write(folder: Path, name: str, code: str) -> Path:
    path = folder / name
    path.write_text(code, encoding="utf-8")
    return path


def _cli(capsys, files: list[Path], data_dir: Path, out: Path, *extra: str):
    argv = [*map(str, files), "--data-dir", str(data_dir), *WINDOW, *FAST, "--out", str(out)]
    rc = main([*argv, *extra])
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.strip()]
    return rc, (json.loads(lines[-1]) if lines else None), captured.err


@pytest.mark.integration
def test_a_class_without_params_is_judged_ok_with_its_table(capsys, tmp_path, data_dir) -> None:
    path = _write(tmp_path, "my_cross.py", NO_PARAMS)
    rc, out, err = _cli(capsys, [path], data_dir, tmp_path / "runs", "--tickers", "AAA")
    assert rc == 0 and out["status"] == "ok" and out["exit_code"] == 0
    (verdict,) = out["files"]
    assert verdict["status"] == "ok" and verdict["lookahead"]["checked"]
    assert not verdict["lookahead"]["biased"]
    names = [c["name"] for c in verdict["criteria"]]
    assert {"fuzzy score", "deflated Sharpe", "deflated alpha"} <= set(names)
    assert "only as honest as the declared trial count" in err
    run = Path(out["run_dir"])
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "| criterion | value | threshold | pass | margin | attainment |" in report
    assert out["holdout"]["variant_id"] == "my_cross"  # opened once, for the best clean file
    kinds = [json.loads(line)["kind"] for line in (run / "experiments.jsonl").open()]
    assert kinds.count("holdout") == 1 and "backtest" in kinds
    assert check_run(run)[0] is None


@pytest.mark.integration
def test_a_class_peeking_at_the_future_fails_with_exit_1(capsys, tmp_path, data_dir) -> None:
    assert validate_code(PEEKS_AHEAD, require_params=False).ok  # the lint cannot see it
    path = _write(tmp_path, "cheat.py", PEEKS_AHEAD)
    rc, out, _ = _cli(capsys, [path], data_dir, tmp_path / "runs", "--tickers", "AAA")
    assert rc == 1 and out["status"] == "failed" and out["exit_code"] == 1
    (verdict,) = out["files"]
    assert verdict["status"] == "failed" and not verdict["passed"]
    assert "lookahead" in verdict["veto_kinds"] and verdict["lookahead"]["biased"]
    assert out["holdout"] is None  # a biased file never opens the holdout


@pytest.mark.integration
def test_a_portfolio_class_runs_on_every_ticker_at_once(capsys, tmp_path, data_dir) -> None:
    path = _write(tmp_path, "rotation.py", ROTATION)
    rc, out, _ = _cli(capsys, [path], data_dir, tmp_path / "runs", "--tickers", "AAA,BBB")
    assert rc == 0, out
    (verdict,) = out["files"]
    assert verdict["scope"] == "portfolio" and verdict["metrics"]["n_trades"] > 0
    results = list((Path(out["run_dir"]) / "backtests" / "rotation").glob("*.json"))
    assert sorted(p.name for p in results) == [
        "PORTFOLIO-f0.json",
        "PORTFOLIO-f1.json",
        "PORTFOLIO-f99.json",
    ]


@pytest.mark.integration
def test_the_labs_exported_winner_is_accepted(capsys, tmp_path, data_dir) -> None:
    code = NO_PARAMS.replace("(bt.Strategy):\n", "(bt.Strategy):\n    params = dict(fast=5)\n")
    exported = standalone_source(
        code, "MyCross", costs=CostModel(cash=100_000.0), banner=["NOT A WINNER: for the test"]
    )
    assert not validate_code(exported).ok  # the runner (csv, datetime) is what the lint refuses
    assert embedded_strategy(exported) is not None and embedded_strategy(code) is None
    path = _write(tmp_path, "strategy.py", exported)
    rc, out, _ = _cli(capsys, [path], data_dir, tmp_path / "runs", "--tickers", "AAA")
    assert rc == 0 and out["status"] == "ok"
    (verdict,) = out["files"]
    assert verdict["exported"] and verdict["class_name"] == "MyCross"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "code", "tickers", "expected"),
    [
        ("missing.py", None, "AAA", "is not a file"),
        ("empty.py", "import backtrader as bt\n\nx = 1\n", "AAA", "no class deriving bt.Strategy"),
        ("my_cross.py", NO_PARAMS, "ZZZ", "--tickers: no usable data for ZZZ"),
    ],
    ids=["missing-file", "no-strategy-class", "no-data-for-ticker"],
)
def test_bad_input_exits_2_with_one_line(
    capsys, tmp_path, data_dir, name, code, tickers, expected
) -> None:
    path = tmp_path / name if code is None else _write(tmp_path, name, code)
    rc, out, err = _cli(capsys, [path], data_dir, tmp_path / "runs", "--tickers", tickers)
    assert rc == 2 and out is None
    assert expected in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # nothing ran, no run folder


@pytest.mark.integration
def test_the_python_api_returns_the_typed_result_and_never_exits(tmp_path, data_dir) -> None:
    files = [_write(tmp_path, "a.py", NO_PARAMS), _write(tmp_path, "b.py", ROTATION)]
    result = judge(
        files,
        data_dir=data_dir,
        tickers=["AAA", "BBB"],
        start="2018-01-01",
        end=date(2020, 6, 30),
        trials=7,
        out=tmp_path / "runs",
        **API_FAST,
    )
    assert isinstance(result, JudgeResult) and result.status == JudgeStatus.OK
    assert [v.variant_id for v in result.files] == ["a", "b"]
    assert [v.scope for v in result.files] == ["symbol", "portfolio"]
    assert result.trials_declared == 7 and result.trials_counted == 7
    assert result.spa_trials == 2 and result.spa_pvalue is not None  # several files: SPA
    with pytest.raises(JudgeInputError, match="--trials"):
        judge(
            files[0],
            data_dir=data_dir,
            tickers="AAA",
            start="2018-01-01",
            end="2020-06-30",
            trials=0,
        )


@pytest.mark.unit
def test_params_are_optional_only_when_asked() -> None:
    """Generated variants must declare params (tuners set them); a user's class need not."""
    assert not validate_code(NO_PARAMS).ok
    assert validate_code(NO_PARAMS, require_params=False).ok


@pytest.mark.unit
def test_scope_is_portfolio_only_when_feeds_beyond_the_first_are_read() -> None:
    assert detect_scope(NO_PARAMS) == "symbol"
    assert detect_scope(NO_PARAMS.replace("self.cross[0] > 0", "self.datas[0].close[0] > 0")) == (
        "symbol"
    )
    assert detect_scope(ROTATION) == "portfolio"
    assert detect_scope(NO_PARAMS.replace("period=5)", "self.data1.close, period=5)")) == (
        "portfolio"
    )
