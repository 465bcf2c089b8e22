"""The whole develop loop, offline, on a small slice of the real corpus."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_DATA

from experiments.check import check_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("e2e_develop")]

REQUIRED = [
    "manifest.json",
    "experiments.jsonl",
    "research/data_brief.md",
    "research/findings.json",
    "research/fact_sheets.json",
    "research/synthesis.json",
    "report.md",
    "verdict.json",
    "variants.json",
    "charts/trajectory.png",
]


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
            "2013-01-01",
            "--end",
            "2018-12-31",
            "--variants",
            "3",
            "--max-iterations",
            "3",
            "--folds",
            "2",
            "--workers",
            "2",
            "--seed",
            "7",
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
    last = done.stdout.strip().splitlines()[-1]
    path = Path(last)
    assert path.is_dir() and path.parent == out
    assert "[strategy]" in done.stderr and "[backtest]" in done.stderr  # progress is shown
    return path


def test_run_folder_holds_every_artefact(run_dir):
    for rel in REQUIRED:
        assert (run_dir / rel).exists(), rel
    strategies = list((run_dir / "strategies").glob("*.py"))
    assert len(strategies) >= 3


def test_verdict_is_consistent_with_the_log(run_dir):
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["verdict"] in {"SUCCESS", "ABANDON"}
    assert verdict["iterations"] >= 1 and verdict["reason"]
    records = [json.loads(x) for x in (run_dir / "experiments.jsonl").read_text().splitlines()]
    backtests = [r for r in records if r["kind"] == "backtest"]
    gates = [r for r in records if r["kind"] == "gate"]
    assert len(gates) == verdict["iterations"]
    assert verdict["route_history"] == [g["gate_decision"] for g in gates]
    # Every fold of every variant × symbol ran: n_backtests counts jobs, records aggregate folds.
    n_jobs = sum(len(r["folds"]) for r in backtests)
    n_holdout = sum(r["kind"] == "holdout" for r in records)
    assert verdict["n_backtests"] == n_jobs + n_holdout
    assert verdict["n_trials"] >= len({r["trial_key"] for r in backtests})
    if verdict["verdict"] == "SUCCESS":
        assert (run_dir / "winner" / "strategy.py").exists()
        assert n_holdout == 2
    else:
        assert n_holdout == 0  # the holdout stays sealed without a winner


def test_every_jsonl_line_names_variant_symbols_iteration_metrics_score_route(run_dir):
    for line in (run_dir / "experiments.jsonl").read_text().splitlines():
        rec = json.loads(line)
        for key in ("variant_id", "symbols", "iteration", "metrics", "gate_score", "route"):
            assert key in rec, (key, rec["kind"])
        if rec["kind"] == "backtest":
            assert rec["symbol"] in ("AAPL", "MSFT")
            assert rec["code_sha256"] and rec["data_sha256"]
            if rec["status"] == "ok":
                assert rec["metrics"]["n_obs"] > 100


def test_manifest_records_config_versions_and_data_hashes(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["seed"] == 7
    assert manifest["config"]["tickers"] == ["AAPL", "MSFT"]
    assert set(manifest["data"]["symbols"]) == {"AAPL", "MSFT"}
    assert all(len(d["sha256"]) == 64 for d in manifest["data"]["symbols"].values())
    assert manifest["packages"]["backtrader"] == "1.9.78.123"
    split = manifest["data"]["split"]
    # The loop's folds end before the sealed holdout starts.
    assert all(f["end"] < split["holdout_start"] for f in manifest["data"]["folds"])


def test_research_cites_numbers_and_abstains_honestly(run_dir):
    findings = json.loads((run_dir / "research" / "findings.json").read_text())
    assert len(findings) == 15 * 2
    technical = [f for f in findings if f["type"] == "technical"]
    assert technical and all(f["evidence"] and f["as_of"] for f in technical)
    # The corpus's alternative data is read by default (../shared/data above --data-dir): the
    # fundamental subagents speak from the statements known by as_of, or say why not.
    fundamental = [f for f in findings if f["type"] == "fundamental"]
    assert any(not f["abstained"] and f["evidence"] for f in fundamental)
    assert all(f["reason"] for f in fundamental if f["abstained"])
    config = json.loads((run_dir / "manifest.json").read_text())["config"]
    assert config["alt_data"] == str(SHARED_DATA.resolve()) and config["alt_data_found"] is True
    # Research never reads the holdout: as_of is the in-sample end.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert all(f["as_of"] <= manifest["data"]["split"]["insample_end"] for f in technical)


def test_report_states_trials_and_dsr(run_dir):
    report = (run_dir / "report.md").read_text()
    assert "Trials counted" in report and "Deflated Sharpe" in report
    assert "Route history" in report


def test_every_figure_stands_beside_the_default_benchmark(run_dir):
    """The default benchmark is the universe's equal-weight buy & hold; the gate records carry
    the best variant's alpha against it and the SPA p-value; the verdict repeats them, and the
    best variant's alpha can be recomputed from the run folder's own files."""
    import numpy as np
    import pandas as pd

    from backtest.contracts import BacktestResult
    from gate.aggregate import portfolio_series
    from gate.alpha import aligned_stats

    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["benchmark"]["name"] == "buy-and-hold"
    assert "AAPL" in verdict["benchmark"]["description"]
    assert verdict["benchmark"]["in_sample"]["sharpe"] is not None
    records = [json.loads(x) for x in (run_dir / "experiments.jsonl").read_text().splitlines()]
    gates = [r for r in records if r["kind"] == "gate"]
    assert all(g["benchmark"] == "buy-and-hold" for g in gates)
    assert all(0.0 <= g["spa_pvalue"] <= 1.0 for g in gates)
    assert verdict["spa_pvalue"] == gates[-1]["spa_pvalue"]
    best = verdict["best_alpha"]
    assert best and {"alpha_annual_pct", "beta", "t_stat", "deflated_alpha"} <= set(best)
    files = sorted((run_dir / "backtests" / verdict["best_variant"]).glob("*.json"))
    results = [BacktestResult.model_validate_json(f.read_text()) for f in files]
    strategy = portfolio_series(results)
    # The benchmark, rebuilt independently: each fold bought at the previous close, one entry.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    cost = (0.1 + 0.05) / 100
    parts = []
    for fold in manifest["data"]["folds"]:
        per = []
        for sym, meta in manifest["data"]["symbols"].items():
            close = pd.read_csv(meta["path"], index_col=0, parse_dates=True)["close"]
            r = close.pct_change().loc[fold["start"] : fold["end"]].dropna()
            r.iloc[0] = (1 + r.iloc[0]) * (1 - cost) - 1
            per.append(r.rename(sym))
        parts.append(pd.concat(per, axis=1).mean(axis=1))
    bench = pd.concat(parts)
    bench = {d.date().isoformat(): float(v) for d, v in bench.items()}
    again = aligned_stats(strategy, bench, name="buy-and-hold", periods_per_year=252)
    assert again.beta == pytest.approx(best["beta"], abs=1e-9)
    assert again.t_stat == pytest.approx(best["t_stat"], abs=1e-6)
    assert np.isfinite(best["deflated_alpha"])
    assert (run_dir / "charts" / "equity.png").exists()


def test_run_folder_validates_against_its_models(run_dir):
    problem, _ = check_run(run_dir)  # what `python -m experiments.check RUN_DIR` runs
    assert problem is None, str(problem)
