"""Analyst-revision drift, a family discovered in ``swarm/families/``: the registry finds it,
and a develop run with ``--families analyst_revision`` proposes it, backtests its code (the
rating actions embedded, cut at the in-sample end) and gates it (issue 26, item 6)."""

from __future__ import annotations

import ast
import json

import pytest

from experiments.runfolder import holdout_code_file
from strategies.analyst_revision import CLASS_NAME, GRID, KIND
from swarm.develop import build_parser, config_from_args
from swarm.families import registry
from swarm.run import execute, prepare


def _events(code: str) -> dict[str, tuple[tuple[int, int, int, int, int], ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "EVENTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no EVENTS table in the code")


@pytest.mark.unit
def test_the_registry_finds_the_family_and_families_accepts_its_name(daily_dir):
    plugin = registry().for_kind(KIND)
    assert plugin.name == KIND and KIND in registry().known()
    argv = [
        "--directive",
        "alpha in tech",
        "--tickers",
        "NVDA",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2012-01-01",
        "--end",
        "2016-12-31",
        "--offline",
        "--families",
        KIND,
    ]
    config, _ = config_from_args(build_parser().parse_args(argv))
    assert config.families == [KIND]


@pytest.mark.e2e
@pytest.mark.slow
def test_analyst_revision_is_proposed_backtested_and_gated(daily_dir, tmp_path):
    argv = [
        "--directive",
        "analyst upgrades in tech",
        "--tickers",
        "NVDA",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2012-01-01",
        "--end",
        "2016-12-31",
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
    assert len(variants) == 6 and all(v["spec"]["family"] == KIND for v in variants.values())
    names = set()
    for v in variants.values():
        params = v["spec"]["parameters"]
        assert set(params) == set(GRID) and all(params[k] in GRID[k] for k in GRID)
        names.add(v["spec"]["name"])
        code = (run / "strategies" / f"{v['variant_id']}.py").read_text()
        assert f"class {CLASS_NAME}" in code
        table = _events(code)
        assert set(table) == {"NVDA"} and len(table["NVDA"]) > 20
        assert max(row[0] for row in table["NVDA"]) <= end_key  # nothing after the search
        assert v["in_sample"]["metrics"]["n_trades"] > 0
    assert len(names) == len(variants)  # distinct proposals
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    backtests = [r for r in records if r["kind"] == "backtest"]
    assert {r["symbol"] for r in backtests} == {"NVDA"} and all(
        r["status"] == "ok" for r in backtests
    )
    assert sum(r["kind"] == "gate" for r in records) == 2
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["n_trials"] == len(variants)
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
    if verdict["verdict"] == "SUCCESS":  # the winner's holdout code carries the later actions
        code = (run / holdout_code_file(verdict["best_variant"])).read_text()
        assert max(row[0] for row in _events(code)["NVDA"]) > end_key
