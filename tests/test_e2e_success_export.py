"""A run that reaches SUCCESS (loose criteria, judged against cash: on 2012-2020 tech no
rule of the catalogue beats holding the names, so the absolute test is what lets this run
reach the SUCCESS path): the holdout is opened once, the winner is exported, and the exported
file reproduces the recorded holdout values in plain backtrader."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.check import check_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("e2e_success_export")]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, daily_dir) -> Path:
    out = tmp_path_factory.mktemp("runs")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "momentum alpha in tech",
            "--tickers",
            "AAPL,MSFT",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2012-01-01",
            "--end",
            "2020-12-01",
            "--variants",
            "3",
            "--max-iterations",
            "2",
            "--workers",
            "2",
            "--criteria",
            "sharpe>=0.5,min_trades>=10,dsr>=0.3,spa_p<=0.5",
            "--criteria-replace",
            "--benchmark",
            "cash",
            "--offline",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        # Its own user cache (research memory, data cache): nothing written to the user's home.
        env=os.environ | {"XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


def test_success_opens_the_holdout_once_and_exports_a_winner(run_dir):
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["verdict"] == "SUCCESS", verdict["reason"]
    records = [json.loads(x) for x in (run_dir / "experiments.jsonl").read_text().splitlines()]
    holdout = [r for r in records if r["kind"] == "holdout"]
    assert {r["symbol"] for r in holdout} == {"AAPL", "MSFT"} and len(holdout) == 2
    assert all(r["variant_id"] == verdict["best_variant"] for r in holdout)
    # Holdout records come last: nothing was decided after the holdout was opened.
    assert records[-1]["kind"] == "holdout" and records[-3]["kind"] == "gate"
    for rel in (
        "winner/strategy.py",
        "winner/params.json",
        "winner/README.md",
        "charts/equity.png",
    ):
        assert (run_dir / rel).exists(), rel
    assert "holdout" in verdict["figures"] and "in-sample" in verdict["figures"]
    # The benchmark stands beside every figure, the holdout's too.
    assert verdict["benchmark"]["name"] == "cash" and verdict["benchmark"]["holdout"] is not None
    assert verdict["holdout_alpha"]["benchmark"] == "cash"
    assert verdict["spa_pvalue"] is not None and verdict["spa_pvalue"] <= 0.5
    report = (run_dir / "report.md").read_text()
    assert "The benchmark is cash" in report and "Reality check" in report


def test_exported_winner_reproduces_recorded_holdout_values_in_plain_backtrader(run_dir, tmp_path):
    export = subprocess.run(
        [sys.executable, "-m", "experiments.export", str(run_dir), "--to", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert export.returncode == 0, export.stderr
    strategy = tmp_path / "w" / "strategy.py"
    repro = json.loads((run_dir / "verdict.json").read_text())["figures"]["holdout"]["reproduce"]
    for symbol, run in repro["runs"].items():
        # -I: isolated mode, so the file runs on backtrader alone, not on this project's code.
        done = subprocess.run(
            [
                sys.executable,
                "-I",
                str(strategy),
                "--data",
                run["data"],
                "--from",
                repro["from"],
                "--to",
                repro["to"],
                "--trade-start",
                repro["trade_start"],
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        final = float(done.stdout.strip().split("=")[1])
        assert final == pytest.approx(run["final_value"], rel=1e-6), symbol


def test_export_refuses_a_folder_that_is_not_a_run(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "experiments.export", str(tmp_path), "--to", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "RUN_DIR" in done.stderr and "Traceback" not in done.stderr


def test_run_folder_validates_against_its_models(run_dir):
    problem, _ = check_run(run_dir)  # what `python -m experiments.check RUN_DIR` runs
    assert problem is None, str(problem)
