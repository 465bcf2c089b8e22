"""The decision pipeline as a backtestable family: causal decisions embedded in linted
Backtrader code, replayed as brackets at the thesis's stop and target with the risk engine's
size; the cache (a second build makes 0 pipeline calls, sizing-only moves make none); the
LLM budget stops cleanly; the directive and ``--families`` select it."""

from __future__ import annotations

import math
import random
import types
from datetime import date
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import read_real_bars
from decision_fakes import DecisionChat

from backtest.compat import import_backtrader
from backtest.data import bars_sha256
from backtest.engine import run_code_on_bars
from backtest.splits import TimeSplit
from strategies.decision_family import (
    CLASS_NAME,
    DecisionRow,
    date_key,
    decision_spec,
    propose_decision_specs,
    render_decision_strategy,
)
from strategies.families import reconcile
from strategies.spec import PipelineFamily, StrategySpec
from strategies.validate import validate_code
from swarm.analyze.contracts import Action, Status
from swarm.analyze.family import decision_slots, pipeline_code
from swarm.analyze.nodes import Brain
from swarm.analyze.pipeline import DecisionCache, cut_at, decide, decision_key
from swarm.analyze.replay import (
    BudgetExhaustedError,
    DecisionReplayer,
    apply_sizing,
    core_config,
    decision_row,
    prefix_sha256,
    rebalance_dates,
    sized_config,
)
from swarm.develop import build_parser, config_from_args, main
from swarm.directive import parse_directive
from swarm.llm.client import LLMClient
from swarm.llm.settings import LLMSettings
from swarm.memo import RunMemo

WINDOW = [(date(2017, 1, 1), date(2017, 12, 31))]
CAPITAL = 100_000.0


@pytest.fixture(scope="module")
def aapl() -> pd.DataFrame:
    return read_real_bars("AAPL", "2015-01-01", "2018-06-30")


@pytest.fixture(scope="module")
def built(aapl, tmp_path_factory):
    """One build of the default spec on 2017, with its replayer and code."""
    cache = DecisionCache(tmp_path_factory.mktemp("decisions"))
    replayer = DecisionReplayer(cache=cache)
    spec = decision_spec()
    table = replayer.table(spec, {"AAPL": aapl}, WINDOW, capital=CAPITAL)
    return SimpleNamespace(
        cache=cache,
        replayer=replayer,
        spec=spec,
        table=table,
        code=render_decision_strategy(spec, table, capital=CAPITAL),
    )


# --------------------------------------------------------------------------- unit


@pytest.mark.unit
def test_rebalance_dates_are_the_last_bar_of_each_week(aapl):
    days = rebalance_dates(aapl.index, WINDOW)
    assert len(days) == 52 and days[0] == pd.Timestamp("2017-01-06")
    assert pd.Timestamp("2017-04-13") in days  # Good Friday: the Thursday ends that week
    for d in days:
        nxt = aapl.index[aapl.index > d]
        assert not len(nxt) or nxt[0].to_period("W") != d.to_period("W")


@pytest.mark.unit
def test_prefix_hashes_equal_hashing_each_cut(aapl):
    days = rebalance_dates(aapl.index, WINDOW)[::7]
    shas = prefix_sha256(aapl, days)
    assert all(shas[d] == bars_sha256(cut_at(aapl, d)) for d in days)


@pytest.mark.unit
def test_the_cache_key_moves_with_the_core_config_only():
    spec = decision_spec()
    p = dict(spec.parameters)
    bars = pd.DataFrame()
    key = decision_key("AAPL", "2017-03-03", bars, core_config(p), "rules", bars_sha="x")
    # Risk % and the horizon only size and time the trade: the same cached decision.
    for sizing in ({"risk_pct": 0.02}, {"horizon_bars": 30}):
        assert core_config(p | sizing) == core_config(p)
    for core in ({"debate_rounds": 3}, {"conviction_floor": 0.5}):
        assert (
            decision_key("AAPL", "2017-03-03", bars, core_config(p | core), "rules", bars_sha="x")
            != key
        )
    assert decision_key("AAPL", "2017-03-03", bars, core_config(p), "llm:x", bars_sha="x") != key
    assert decision_key("MSFT", "2017-03-03", bars, core_config(p), "rules", bars_sha="x") != key
    assert decision_key("AAPL", "2017-03-10", bars, core_config(p), "rules", bars_sha="x") != key


@pytest.mark.unit
def test_a_change_of_the_desks_rules_invalidates_cached_decisions(monkeypatch):
    import swarm.analyze.pipeline as pipeline

    bars = pd.DataFrame()
    p = dict(decision_spec().parameters)
    key = decision_key("AAPL", "2017-03-03", bars, core_config(p), "rules", bars_sha="x")
    monkeypatch.setattr(pipeline, "RULES_VERSION", pipeline.RULES_VERSION + 1)
    assert decision_key("AAPL", "2017-03-03", bars, core_config(p), "rules", bars_sha="x") != key


@pytest.mark.unit
def test_specs_are_trials_and_tune_moves_the_pipeline_parameters():
    spec = decision_spec()
    assert spec.family == PipelineFamily.DECISION_PIPELINE
    assert set(spec.parameters) == {"debate_rounds", "risk_pct", "conviction_floor", "horizon_bars"}
    # Round-trips through the state as JSON and keeps its trial key.
    again = StrategySpec.model_validate(spec.model_dump(mode="json"))
    assert again.trial_key() == spec.trial_key() and reconcile(again) == again
    rng = random.Random(0)
    first = propose_decision_specs(route="INITIAL", n=5, rng=rng, seen=set(), best=None)
    keys = {p.spec.trial_key() for p in first}
    assert len(keys) == 5 and spec.trial_key() in keys
    tuned = propose_decision_specs(route="TUNE", n=4, rng=rng, seen=keys, best=("v1", spec))
    assert len(tuned) == 4 and all(p.parent_id == "v1" for p in tuned)
    assert not keys & {p.spec.trial_key() for p in tuned}
    refined = propose_decision_specs(route="REFINE", n=2, rng=rng, seen=set(), best=("v1", spec))
    assert refined[0].spec.long_short is False  # the other side first
    assert decision_slots(["decision_pipeline"], 5) == 5
    assert decision_slots(["decision_pipeline", "momentum"], 5) == 2
    assert decision_slots([], 5) == 0


@pytest.mark.unit
def test_the_directive_and_families_select_the_pipeline(tmp_path):
    for text in (
        "agents decide on AAPL and MSFT",
        "an analyst debate on NVDA",
        "let the analysts decide",
    ):
        assert parse_directive(text).preferred_families[0] == "decision_pipeline"
    assert "decision_pipeline" not in parse_directive("momentum alpha in tech").preferred_families

    def cfg(*extra):
        args = build_parser().parse_args(["--directive", *extra, "--tickers", "AAPL"])
        return config_from_args(args)[0]

    assert cfg("agents decide").families == ["decision_pipeline"]
    assert cfg("momentum alpha").families == []
    assert cfg("momentum", "--families", "decision_pipeline,Momentum").families == [
        "decision_pipeline",
        "momentum",
    ]


@pytest.mark.unit
def test_an_unknown_family_is_a_one_line_exit_2(capsys):
    code = main(["--directive", "x", "--tickers", "AAPL", "--families", "decision_pipline"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--families: 'decision_pipline' is not a family" in err and "decision_pipeline" in err


# --------------------------------------------------------------------------- integration


@pytest.mark.integration
def test_decisions_are_causal_cutting_the_data_after_the_date_changes_nothing(aapl, built):
    spec = built.spec
    for day in rebalance_dates(aapl.index, WINDOW)[3::12]:
        cut = cut_at(aapl, day)
        alone = DecisionReplayer(cache=None).table(
            spec, {"AAPL": cut}, [(day.date(), day.date())], capital=CAPITAL
        )
        assert alone["AAPL"].get(date_key(day)) == built.table["AAPL"].get(date_key(day))


@pytest.mark.integration
def test_resizing_a_cached_decision_equals_deciding_with_the_sizing(aapl):
    base = dict(decision_spec().parameters)
    core = core_config(base)
    seen = set()
    for day in ("2017-03-03", "2017-06-16", "2017-10-27"):
        decided = decide("AAPL", day, aapl, core)
        for risk, horizon in ((0.005, 5), (0.025, 20), (0.03, 10)):
            sized = sized_config(core, base | {"risk_pct": risk, "horizon_bars": horizon}, CAPITAL)
            direct, resized = decide("AAPL", day, aapl, sized), apply_sizing(decided, sized)
            assert (
                resized.action,
                resized.status,
                resized.risk.size,
                resized.risk.checks,
                resized.risk.rejected_by,
                resized.risk.risk_pct,
            ) == (
                direct.action,
                direct.status,
                direct.risk.size,
                direct.risk.checks,
                direct.risk.rejected_by,
                direct.risk.risk_pct,
            )
            assert resized.trader.horizon_days == horizon == direct.trader.horizon_days
            assert (resized.trader.stop, resized.trader.target) == (
                direct.trader.stop,
                direct.trader.target,
            )
            seen.add(direct.status)
    assert Status.OK in seen


@pytest.mark.integration
def test_a_second_build_hits_the_cache_with_zero_pipeline_calls(aapl, built):
    first = built.replayer.stats
    assert first.pipeline_calls == 52 and first.cache_hits == 0 and first.decisions == 52
    # Same run, sizing moved: reused in memory, no new call.
    built.replayer.table(
        decision_spec({"risk_pct": 0.02, "horizon_bars": 20}),
        {"AAPL": aapl},
        WINDOW,
        capital=CAPITAL,
    )
    assert built.replayer.stats.pipeline_calls == 52 and built.replayer.stats.memo_hits == 52
    # A new run on the same cache: every decision from disk, the same table.
    rerun = DecisionReplayer(cache=built.cache)
    assert rerun.table(built.spec, {"AAPL": aapl}, WINDOW, capital=CAPITAL) == built.table
    assert rerun.stats.pipeline_calls == 0 and rerun.stats.cache_hits == 52
    # A sizing-only variant on a new run: from disk too; a new floor asks the desk again.
    rerun.table(decision_spec({"risk_pct": 0.005}), {"AAPL": aapl}, WINDOW, capital=CAPITAL)
    assert rerun.stats.pipeline_calls == 0
    rerun.table(decision_spec({"conviction_floor": 0.5}), {"AAPL": aapl}, WINDOW, capital=CAPITAL)
    assert rerun.stats.pipeline_calls == 52


@pytest.mark.integration
def test_the_code_embeds_the_decisions_passes_the_lint_and_runs(aapl, built):
    assert validate_code(built.code).ok
    rows = built.table["AAPL"]
    assert len(rows) >= 10 and all(isinstance(r, DecisionRow) for r in rows.values())
    for day, row in list(rows.items())[:3]:
        assert f"{day}: ({row.direction}, {row.stop!r}, {row.target!r}, {row.size})" in built.code
    result = run_code_on_bars(
        built.code, aapl.loc[:"2017-12-31"], start=date(2017, 1, 3), symbol="AAPL"
    )
    assert result.status.value == "ok", result.error
    assert result.metrics.n_trades >= 5


def _replay_orders(code: str, bars: pd.DataFrame, symbol: str) -> list[dict]:
    """Run the generated class under plain backtrader and record every order it placed."""
    bt = import_backtrader()
    module = types.ModuleType("replay_under_test")
    exec(compile(code, "replay_under_test", "exec"), module.__dict__)
    base = getattr(module, CLASS_NAME)
    seen: list[dict] = []

    class Recording(base):
        def notify_order(self, order):
            if order.status == order.Submitted:  # notified on the next bar: use its creation
                seen.append(
                    {
                        "ref": order.ref,
                        "day": bt.num2date(order.created.dt).date(),
                        "buy": order.isbuy(),
                        "type": order.exectype,
                        "price": order.created.price,
                        "size": abs(order.created.size),
                        "parent": order.parent.ref if order.parent else None,
                    }
                )
            if order.status == order.Completed:
                for o in seen:
                    if o["ref"] == order.ref:
                        o["filled"] = (bt.num2date(order.executed.dt).date(), order.executed.price)
            super().notify_order(order)

    cerebro = bt.Cerebro(stdstats=False)
    cerebro.adddata(bt.feeds.PandasData(dataname=bars, openinterest=None), name=symbol)
    cerebro.addstrategy(Recording)
    cerebro.broker.setcash(CAPITAL)
    cerebro.run()
    return seen


@pytest.mark.integration
def test_orders_are_brackets_at_the_thesis_prices_with_the_risk_engine_size(aapl, built):
    bars = aapl.loc["2016-12-01":"2017-12-31"]
    orders = _replay_orders(built.code, bars, "AAPL")
    by_day = {
        date_key(d): r
        for d, r in ((pd.Timestamp(str(k)), r) for k, r in built.table["AAPL"].items())
    }
    bt = import_backtrader()
    entries = [
        o
        for o in orders
        if o["parent"] is None and o["type"] == bt.Order.Market and date_key(o["day"]) in by_day
    ]
    assert entries, "no decision was traded"
    first = entries[0]
    row = by_day[date_key(first["day"])]
    # The first trade: the account is still the capital, so the size is the risk engine's.
    assert first["size"] == row.size and first["buy"] == (row.direction > 0)
    children = [o for o in orders if o["parent"] == first["ref"]]
    assert sorted(o["type"] for o in children) == sorted([bt.Order.Stop, bt.Order.Limit])
    prices = {o["type"]: o["price"] for o in children}
    assert (prices[bt.Order.Stop], prices[bt.Order.Limit]) == (row.stop, row.target)
    # Placed on the decision's bar, filled at the next bar's open: no lookahead.
    nxt = bars.index[bars.index > pd.Timestamp(first["day"])][0]
    assert first["filled"] == (nxt.date(), bars.loc[nxt, "open"])
    # Every decision was sized by the risk engine with the formula of the spec's risk %.
    decided = decide("AAPL", first["day"].isoformat(), aapl, core_config(built.spec.parameters))
    resized = apply_sizing(
        decided, sized_config(core_config(built.spec.parameters), built.spec.parameters, CAPITAL)
    )
    assert decision_row(resized) == row
    assert row.size == math.floor(CAPITAL * 1.0 / 100 / abs(decided.trader.entry - row.stop))


@pytest.mark.unit
def test_an_llm_budget_stops_the_replay_cleanly(aapl, tmp_path):
    settings = LLMSettings(
        provider="openai-compatible",
        quick_model="fake-quick",
        deep_model="fake-deep",
        base_url="http://127.0.0.1:1/v1",
        structured="function_calling",
        max_tokens=2_500,
    )
    chat = DecisionChat(messages=iter([]))
    chat.calls = []
    client = LLMClient(settings, cache_dir=tmp_path / "llm", model_factory=lambda s, m: chat)
    replayer = DecisionReplayer(cache=DecisionCache(tmp_path / "d"), brain=Brain(llm=client))
    with pytest.raises(BudgetExhaustedError, match="token budget exhausted"):
        replayer.table(decision_spec(), {"AAPL": aapl}, WINDOW, capital=CAPITAL)
    stats = replayer.stats
    assert stats.budget_exhausted and 1 <= stats.pipeline_calls < 10
    assert stats.llm_live_calls == len(chat.calls) > 0
    # Inside a run: no variant, one clear line, the counts on disk; the gate's budget stop
    # then ends the loop.
    lines: list[str] = []
    written: dict = {}
    ctx = SimpleNamespace(
        memo=RunMemo(
            decision_replayer=DecisionReplayer(cache=replayer.cache, brain=Brain(llm=client))
        ),
        split=TimeSplit(
            insample_start=date(2015, 1, 2),
            insample_end=date(2017, 6, 30),
            holdout_start=date(2017, 7, 3),
            holdout_end=date(2017, 12, 29),
        ),
        folds=[SimpleNamespace(start=date(2017, 1, 1), end=date(2017, 6, 30))],
        holdout_fold=SimpleNamespace(start=date(2017, 7, 1), end=date(2017, 12, 31)),
        data={"AAPL": SimpleNamespace(bars=aapl)},
        symbols=["AAPL"],
        config=SimpleNamespace(costs=SimpleNamespace(cash=CAPITAL)),
        progress=SimpleNamespace(stage=lambda name, msg: lines.append(msg)),
        run=SimpleNamespace(write_json=lambda name, obj: written.update({name: obj})),
    )
    assert pipeline_code(ctx, decision_spec()) is None
    assert len(lines) == 1 and "LLM token budget exhausted" in lines[0]
    assert written["decision_pipeline.json"]["budget_exhausted"] is True


@pytest.mark.unit
def test_rule_decisions_use_every_action(built):
    actions = {Action.BUY if r.direction > 0 else Action.SELL for r in built.table["AAPL"].values()}
    assert Action.BUY in actions


# --------------------------------------------------------------------------- end to end


def _develop(out, cache, daily_dir, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarm.develop",
            "--directive",
            "agents decide on AAPL",
            "--families",
            "decision_pipeline",
            "--tickers",
            "AAPL",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2016-01-01",
            "--end",
            "2019-12-31",
            "--variants",
            "2",
            "--max-iterations",
            "1",
            "--folds",
            "2",
            "--workers",
            "2",
            "--offline",
            "--memory-dir",
            "off",
            "--no-figures",  # no chart is asserted; the records and verdict are the same
            "--decision-cache",
            str(cache),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ
        | {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "XDG_DATA_HOME": str(tmp_path / "xdg")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = Path(done.stdout.strip().splitlines()[-1])
    records = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    stats = json.loads((run / "decision_pipeline.json").read_text())
    return run, records, stats, done.stderr


@pytest.mark.e2e
@pytest.mark.slow
def test_a_develop_run_reaches_a_verdict_and_a_rerun_makes_no_pipeline_call(daily_dir, tmp_path):
    import hashlib
    import json

    cache = tmp_path / "decisions"
    run, records, stats, err = _develop(tmp_path / "runs", cache, daily_dir, tmp_path)
    backtests = [r for r in records if r.get("kind") == "backtest"]
    assert backtests and all(r["family"] == "decision_pipeline" for r in backtests)
    assert all(f["status"] == "ok" for r in backtests for f in r["folds"])
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["verdict"] in ("SUCCESS", "ABANDON") and verdict["benchmark"]
    assert stats["pipeline_calls"] > 100 and stats["cache_hits"] == 0
    assert "[decisions]" in err and "pipeline calls" in err
    assert "DECISIONS = {" in next((run / "strategies").glob("*.py")).read_text()
    # The in-sample decisions were reviewed (memory off: counted, not stored).
    reviews = stats["reviews"]
    assert reviews["reviewed"] > 0 and reviews["stored"] == 0 and reviews["memory"] != "on"
    states = ("realized", "strengthened", "weakened", "falsified", "unknown")  # seed 002's five
    assert sum(reviews[k] for k in states) == reviews["reviewed"]
    assert "reviews so far" in err
    # The holdout's decisions were made for the winner only, at the holdout.
    holdouts = [r for r in records if r.get("kind") == "holdout"]
    if holdouts:
        (held,) = list((run / "strategies").glob("*.holdout.py"))
        assert held.name == f"{verdict['best_variant']}.holdout.py"
        sha = hashlib.sha256(held.read_bytes()).hexdigest()
        assert all(r["code_sha256"] == sha for r in holdouts)
        assert stats["variants"][-1]["window"].startswith("folds + holdout")

    again, records2, stats2, _ = _develop(tmp_path / "runs2", cache, daily_dir, tmp_path)
    assert stats2["pipeline_calls"] == 0 and stats2["cache_hits"] == stats["pipeline_calls"]

    def figures(recs):
        return [
            [(f["status"], f["metrics"]) for f in r["folds"]]
            for r in recs
            if r.get("kind") == "backtest"
        ]

    assert figures(records2) == figures(records)
