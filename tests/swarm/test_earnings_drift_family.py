"""Post-earnings-announcement drift, a family discovered in ``swarm/families/``: a develop run
with ``--families earnings_drift`` proposes it, backtests its code (the reports embedded,
cut at the in-sample end) on each symbol and gates it (issue 26, item 6)."""

from __future__ import annotations

import ast
import json

import pytest

from experiments.runfolder import holdout_code_file
from strategies.earnings_drift import CLASS_NAME, KIND
from swarm.develop import build_parser, config_from_args
from swarm.run import execute, prepare

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _events(code: str) -> dict[str, tuple[tuple[int, float], ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EVENTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no EVENTS table in the code")


def test_earnings_drift_is_proposed_backtested_and_gated(daily_dir, tmp_path):
    argv = [
        "--directive",
        "post-earnings drift in tech",
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
        "--folds",
        "2",
        "--max-iterations",
        "2",
        "--workers",
        "1",
        "--seed",
        "3",
        "--criteria",
        "sharpe>=0.1,min_trades>=2",
        "--criteria-replace",
        "--offline",
        "--memory-dir",
        "off",
        "--families",
        KIND,
        "--out",
        str(tmp_path),
    ]
    config, criteria = config_from_args(build_parser().parse_args(argv))
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    run = prepared.run.root
    split = prepared.context_kwargs["split"]
    end_key = int(split.insample_end.strftime("%Y%m%d"))

    variants = json.loads((run / "variants.json").read_text())
    assert variants and all(v["spec"]["family"] == KIND for v in variants.values())
    for v in variants.values():
        code = (run / "strategies" / f"{v['variant_id']}.py").read_text()
        assert f"class {CLASS_NAME}" in code
        table = _events(code)
        assert set(table) == {"AAPL", "MSFT"} and all(table.values())
        assert max(day for rows in table.values() for day, _ in rows) <= end_key
        assert v["in_sample"]["metrics"]["n_trades"] > 0
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    assert {r["symbol"] for r in records if r["kind"] == "backtest"} == {"AAPL", "MSFT"}
    assert any(r["kind"] == "gate" for r in records)
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["n_trials"] == len(variants)
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
    if verdict["verdict"] == "SUCCESS":  # the winner's holdout code carries the later reports
        winner = verdict["best_variant"]
        code = (run / holdout_code_file(winner)).read_text()
        assert max(day for rows in _events(code).values() for day, _ in rows) > end_key
