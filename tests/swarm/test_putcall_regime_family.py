"""The contrarian put/call regime, a family discovered in ``swarm/families/``: a develop run
with ``--families putcall_regime`` proposes it, backtests its code (the CBOE ratios embedded,
cut at the in-sample end) and gates it (issue 26, item 6)."""

from __future__ import annotations

import ast
import json

import pytest

from experiments.runfolder import holdout_code_file
from strategies.putcall_regime import CLASS_NAME, KIND
from swarm.develop import build_parser, config_from_args
from swarm.families import registry
from swarm.run import execute, prepare

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _series(code: str) -> tuple[tuple[int, float], ...]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SERIES":
            return ast.literal_eval(node.value)
    raise AssertionError("no SERIES in the code")


def test_the_registry_finds_it():
    plugin = registry().for_kind(KIND)
    assert plugin.name == KIND and KIND in registry().known()


def test_putcall_regime_is_proposed_backtested_and_gated(daily_dir, tmp_path):
    argv = [
        "--directive",
        "contrarian put/call regime",
        "--tickers",
        "SPY",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2010-01-01",
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
    assert len(variants) >= 3 and all(v["spec"]["family"] == KIND for v in variants.values())
    for v in variants.values():
        code = (run / "strategies" / f"{v['variant_id']}.py").read_text()
        assert f"class {CLASS_NAME}" in code
        keys = [day for day, _ in _series(code)]
        assert keys[0] == 20061102 and keys[-1] <= end_key  # nothing after the in-sample end
        assert v["in_sample"]["metrics"]["n_trades"] > 0
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    assert {r["symbol"] for r in records if r["kind"] == "backtest"} == {"SPY"}
    assert any(r["kind"] == "gate" for r in records)
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["n_trials"] == len(variants)
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
    if verdict["verdict"] == "SUCCESS":  # the winner's holdout code carries the later ratios
        code = (run / holdout_code_file(verdict["best_variant"])).read_text()
        assert _series(code)[-1][0] > end_key
