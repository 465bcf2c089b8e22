"""The value/quality cross-section, a family discovered in ``swarm/families/``: a develop run
whose directive says "value and quality" proposes it, backtests its code (the statements
embedded, cut at the in-sample end) on the whole universe at once and gates it, its lookahead
check run on the universe (issue 26, item 6)."""

from __future__ import annotations

import ast
import json
from datetime import date

import pytest
from conftest import corpus_bars

from altdata.corpus import AltData
from backtest.contracts import CostModel, Fold
from backtest.lookahead import check_lookahead
from experiments.runfolder import holdout_code_file
from strategies.family_api import PORTFOLIO_LABEL
from strategies.value_quality import CLASS_NAME, KIND, render, snapshots, vq_spec
from swarm.develop import build_parser, config_from_args
from swarm.run import execute, prepare

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _snapshots(code: str) -> dict[str, tuple[tuple, ...]]:
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "SNAPSHOTS":
            return ast.literal_eval(node.value)
    raise AssertionError("no SNAPSHOTS table in the code")


def test_value_quality_is_proposed_backtested_on_the_universe_and_gated(daily_dir, tmp_path):
    argv = [
        "--directive",
        "value and quality in tech",
        "--tickers",
        "AAPL,MSFT,NVDA,INTC",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2013-01-01",
        "--end",
        "2017-12-31",
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
        "--out",
        str(tmp_path),
    ]
    config, criteria = config_from_args(build_parser().parse_args(argv))
    assert config.families == [KIND]
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    run = prepared.run.root
    split = prepared.context_kwargs["split"]
    end_key = int(split.insample_end.strftime("%Y%m%d"))

    variants = json.loads((run / "variants.json").read_text())
    ours = [v for v in variants.values() if v["spec"]["family"] == KIND]
    assert ours and all(v["spec"]["scope"] == "portfolio" for v in ours)
    for v in ours:
        code = (run / "strategies" / f"{v['variant_id']}.py").read_text()
        assert f"class {CLASS_NAME}" in code
        table = _snapshots(code)
        assert set(table) == {"AAPL", "MSFT", "NVDA", "INTC"} and all(table.values())
        assert max(row[0] for rows in table.values() for row in rows) <= end_key
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    ids = {v["variant_id"] for v in ours}
    mine = [r for r in records if r["kind"] == "backtest" and r.get("variant_id") in ids]
    assert mine and {r["symbol"] for r in mine} == {PORTFOLIO_LABEL}
    assert any(v["in_sample"]["metrics"]["n_trades"] > 0 for v in ours)
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["verdict"] in ("SUCCESS", "ABANDON")
    if verdict["verdict"] == "SUCCESS" and verdict["best_variant"] in ids:
        code = (run / holdout_code_file(verdict["best_variant"])).read_text()
        assert max(row[0] for rows in _snapshots(code).values() for row in rows) > end_key


def test_the_lookahead_check_on_the_universe_finds_the_honest_code_clean(shared_data):
    # The statements known by 2016-12-30 embedded; the universe's feeds cut together at
    # each cut: the ranks a bar acts on use no later bar.
    symbols = ["AAPL", "MSFT", "NVDA", "INTC"]
    table = snapshots(AltData(shared_data).table("statements"), symbols, through=date(2016, 12, 30))
    code = render(vq_spec({"rebalance_bars": 5, "top_n": 1}, long_short=True), table)
    bars = {s: corpus_bars(s).loc["2014-01-02":"2016-12-30"] for s in symbols}
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30)
    )
    report = check_lookahead(code, bars, fold=fold, costs=CostModel(), n_cuts=6, symbol="PORTFOLIO")
    assert report.checked and not report.biased, report
