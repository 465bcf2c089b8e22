"""Portfolio-scope families (``strategies.portfolio``): specs, proposals, code that passes the
lint and runs over a whole universe through the engine and the books."""

from __future__ import annotations

import random
from datetime import date

import pytest
from conftest import read_real_bars
from strategy_bt_helpers import run_exported

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.engine import execute
from strategies.codegen import render
from strategies.families import known_families, reconcile
from strategies.portfolio import (
    LABEL,
    PARAMS,
    TEMPLATES,
    portfolio_slots,
    portfolio_spec,
    propose_portfolio_specs,
)
from strategies.portfolio_code import render_portfolio
from strategies.route import Route
from strategies.spec import PortfolioFamily, StrategySpec
from strategies.validate import validate_code
from swarm.directive import parse_directive

pytestmark = pytest.mark.unit

XS = PortfolioFamily.CROSS_SECTIONAL_MOMENTUM


def test_a_portfolio_spec_carries_its_scope_and_exactly_its_family_s_parameters() -> None:
    spec = portfolio_spec(XS, {"xs_top_n": 3, "unknown": 1})
    assert spec.scope == "portfolio" and spec.entry == XS.value
    assert set(spec.parameters) == set(PARAMS[XS]) and spec.parameters["xs_top_n"] == 3
    back = StrategySpec.model_validate_json(spec.model_dump_json())
    assert back == spec and isinstance(back.family, PortfolioFamily)
    assert reconcile(spec) == spec  # the families' reconcile defers to the portfolio's
    # Rotation holds one symbol: it has no short side, whatever is asked.
    assert portfolio_spec(PortfolioFamily.ROTATION, long_short=True).long_short is False
    assert {"cross_sectional_momentum", "rotation"} <= set(known_families())


def test_every_template_is_a_distinct_trial() -> None:
    keys = {
        portfolio_spec(t.family, t.params, long_short=t.long_short).trial_key() for t in TEMPLATES
    }
    assert len(keys) == len(TEMPLATES)


@pytest.mark.parametrize(
    ("families", "n", "symbols", "slots"),
    [
        (["cross_sectional_momentum"], 5, 5, 5),
        (["cross_sectional_momentum", "momentum"], 5, 5, 2),
        (["rotation", "cross_sectional_momentum"], 4, 3, 4),
        (["cross_sectional_momentum"], 5, 1, 0),  # one symbol cannot be ranked
        (["momentum"], 5, 5, 1),  # a broad universe is ranked even when unnamed
        ([], 5, 4, 1),
        ([], 5, 3, 0),  # a small one only when asked (the calibration's 3-symbol universes)
        ([], 1, 5, 0),
    ],
)
def test_portfolio_slots(families: list[str], n: int, symbols: int, slots: int) -> None:
    assert portfolio_slots(families, n, symbols) == slots


def test_proposals_by_route() -> None:
    rng = random.Random(0)
    first = propose_portfolio_specs(
        families=["cross_sectional_momentum"],
        route=Route.INITIAL,
        n=6,
        rng=rng,
        seen=set(),
        best=None,
    )
    assert len(first) == 6 and len({p.spec.trial_key() for p in first}) == 6
    assert all(p.spec.family == XS for p in first)
    best = ("i01-v01", first[0].spec)
    seen = {p.spec.trial_key() for p in first}
    tuned = propose_portfolio_specs(
        families=["cross_sectional_momentum"], route=Route.TUNE, n=4, rng=rng, seen=seen, best=best
    )
    assert len(tuned) == 4 and all(p.parent_id == "i01-v01" for p in tuned)
    assert not seen & {p.spec.trial_key() for p in tuned}
    refined = propose_portfolio_specs(
        families=["cross_sectional_momentum"],
        route=Route.REFINE,
        n=3,
        rng=rng,
        seen=seen,
        best=best,
    )
    switched = [p for p in refined if p.why.startswith("refine")]
    assert switched and all(" | refine " in p.spec.name for p in switched)
    fixed = propose_portfolio_specs(
        families=["cross_sectional_momentum"], route=Route.FIX, n=1, rng=rng, seen=seen, best=best
    )
    base = best[1].parameters
    assert fixed[0].spec.parameters["rebalance_bars"] < base["rebalance_bars"]
    assert fixed[0].spec.parameters["xs_lookback"] < base["xs_lookback"]


def test_the_code_passes_the_lint_and_reads_only_its_family_s_parameters() -> None:
    spec = portfolio_spec(XS)
    code = render(spec)
    report = validate_code(code)
    assert report.ok, report.errors
    assert "order_target_percent" in code and "self.datas" in code
    # reconcile drops a parameter the family does not read, so render never sees one
    odd = spec.model_copy(update={"parameters": spec.parameters | {"zzz": 1}})
    assert "zzz" not in render_portfolio(odd, class_name="X")


def test_the_directive_names_portfolio_families() -> None:
    assert parse_directive("cross-sectional momentum in tech").preferred_families[:2] == [
        "cross_sectional_momentum",
        "momentum",
    ]
    assert "rotation" in parse_directive("relative strength rotation of indices").preferred_families


@pytest.mark.integration
@pytest.mark.parametrize("k", range(len(TEMPLATES)))
def test_each_template_runs_over_a_universe(k: int) -> None:
    t = TEMPLATES[k]
    spec = portfolio_spec(t.family, t.params, long_short=t.long_short, note=t.note)
    bars = {s: read_real_bars(s, "2012-01-01", "2016-12-30") for s in ("AAPL", "MSFT", "NVDA")}
    fold = Fold(
        index=0, warmup_start=date(2012, 1, 3), start=date(2013, 1, 2), end=date(2016, 12, 30)
    )
    run = execute(
        BacktestJob(
            job_id="p", variant_id="v", code=render(spec), symbol=LABEL, bars=bars, fold=fold
        )
    )
    assert run.result.status == JobStatus.OK, run.result.error
    m = run.result.metrics
    assert m.n_trades > 10 and m.orders_rejected == 0
    assert {f.symbol for f in run.fills} <= {"AAPL", "MSFT", "NVDA"}
    if spec.long_short:
        assert any(f.side == "sell" for f in run.fills)


@pytest.mark.integration
def test_low_volatility_holds_the_calmest_name() -> None:
    """The low-volatility anomaly ranks on realised volatility: of MSFT, NVDA and AMD over
    2013-2016 it holds the calm MSFT (NVDA when it was the calmer), never AMD, the wildest."""
    spec = portfolio_spec(PortfolioFamily.LOW_VOLATILITY, {"xs_top_n": 1})
    bars = {s: read_real_bars(s, "2012-01-01", "2016-12-30") for s in ("MSFT", "NVDA", "AMD")}
    fold = Fold(
        index=0, warmup_start=date(2012, 1, 3), start=date(2013, 1, 2), end=date(2016, 12, 30)
    )
    run = execute(
        BacktestJob(
            job_id="p", variant_id="v", code=render(spec), symbol=LABEL, bars=bars, fold=fold
        )
    )
    assert run.result.status == JobStatus.OK, run.result.error
    bought = [f.symbol for f in run.fills if f.side == "buy"]
    assert "AMD" not in bought and bought.count("MSFT") > bought.count("NVDA")


def test_low_volatility_is_tried_only_when_asked_for() -> None:
    rng = random.Random(0)
    unnamed = propose_portfolio_specs(
        families=[], route="INITIAL", n=12, rng=rng, seen=set(), best=None
    )
    assert all(p.spec.family != PortfolioFamily.LOW_VOLATILITY for p in unnamed)
    named = propose_portfolio_specs(
        families=["low_volatility"], route="INITIAL", n=3, rng=rng, seen=set(), best=None
    )
    assert {p.spec.family for p in named} == {PortfolioFamily.LOW_VOLATILITY}


@pytest.mark.integration
@pytest.mark.parametrize(
    "args",
    [
        ["--directive", "momentum", "--tickers", "AAPL", "--families", "cross_sectional_momentum"],
        ["--directive", "cross-sectional momentum on AAPL"],
    ],
)
def test_a_portfolio_family_on_one_symbol_exits_2_with_the_fix(capsys, tmp_path, args) -> None:
    from swarm.develop import main

    code = main([*args, "--out", str(tmp_path / "runs"), "--offline", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "portfolio family" in err and "give at least 2 tickers" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.e2e
@pytest.mark.slow
def test_a_develop_run_with_portfolio_families(tmp_path, daily_dir) -> None:
    """One job per portfolio variant and fold, labelled PORTFOLIO; the scope is in
    variants.json; the run folder passes the check."""
    import json

    from experiments.check import check_run
    from swarm.develop import main

    code = main(
        [
            "--directive",
            "relative strength rotation",
            "--tickers",
            "AAPL,MSFT,NVDA,QQQ",
            "--data-dir",
            str(daily_dir),
            "--start",
            "2013-01-01",
            "--end",
            "2018-12-31",
            "--families",
            "cross_sectional_momentum,rotation",
            "--variants",
            "2",
            "--max-iterations",
            "1",
            "--folds",
            "2",
            "--out",
            str(tmp_path),
            "--offline",
            "--quiet",
            "--memory-dir",
            "off",
        ]
    )
    assert code == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    variants = json.loads((run / "variants.json").read_text())
    entries = variants if isinstance(variants, list) else list(variants.values())
    assert entries and all(e["spec"]["scope"] == "portfolio" for e in entries)
    backtests = [json.loads(line) for line in (run / "experiments.jsonl").read_text().splitlines()]
    backtests = [r for r in backtests if r.get("kind") == "backtest"]
    assert backtests and {r["symbol"] for r in backtests} == {LABEL}
    assert all(r["status"] == "ok" for r in backtests)
    problem, summary = check_run(run)
    assert problem is None, problem


@pytest.mark.integration
def test_an_exported_portfolio_strategy_reproduces_the_lab_s_final_value(tmp_path, daily_dir):
    """The export's runner takes --data once per symbol, aligns them as the lab does, and
    plain backtrader ends on the lab's final value (to 1e-6)."""

    from backtest.contracts import CostModel
    from experiments.export import standalone_source
    from strategies.codegen import class_name

    spec = portfolio_spec(XS, {"inverse_vol": True}, long_short=True)
    code = render(spec)
    symbols = ("AAPL", "MSFT", "NVDA")
    fold = Fold(
        index=0, warmup_start=date(2012, 1, 3), start=date(2013, 1, 2), end=date(2016, 12, 30)
    )
    bars = {s: read_real_bars(s, "2012-01-01", "2016-12-30") for s in symbols}
    lab = execute(
        BacktestJob(job_id="p", variant_id="v", code=code, symbol=LABEL, bars=bars, fold=fold)
    ).result
    assert lab.status == JobStatus.OK, lab.error
    script = tmp_path / "strategy.py"
    script.write_text(standalone_source(code, class_name(spec.name), costs=CostModel()))
    data = [a for s in symbols for a in ("--data", str(daily_dir / f"{s}.csv"))]
    value = run_exported(
        str(script),
        [*data, "--from", "2012-01-03", "--to", "2016-12-30", "--trade-start", "2013-01-02"],
    )
    assert value == pytest.approx(lab.metrics.final_value, abs=1e-6)


@pytest.mark.e2e
@pytest.mark.slow
def test_a_cross_sectional_edge_is_found_by_a_portfolio_variant_and_exported(tmp_path) -> None:
    """Issue 12's acceptance: a seeded 10-symbol universe whose only edge is each name's rank
    of past returns (``swarm.calibration.synthetic_universe``, kind ``cross_sectional``); the directive
    names no family ("alpha"). The loop ends in SUCCESS with a portfolio-scope winner, and its
    export reproduces the recorded holdout value in plain backtrader."""
    import json
    import subprocess
    import sys

    from swarm.calibration.synthetic_universe import UniverseSpec, write_universe
    from swarm.develop import main

    data = tmp_path / "data"
    spec = UniverseSpec(
        kind="cross_sectional",
        seed=11,
        n_symbols=10,
        years=8,
        drift_annual=0.05,
        start=date(2012, 1, 2),
    )
    write_universe(spec, data)
    tickers = ",".join(spec.symbol_names())
    code = main(
        [
            "--directive",
            "alpha",
            "--tickers",
            tickers,
            "--data-dir",
            str(data),
            "--out",
            str(tmp_path / "runs"),
            "--offline",
            "--quiet",
            "--memory-dir",
            "off",
            "--seed",
            "11",
            "--no-figures",  # the verdict and the export are the same without charts
        ]
    )
    assert code == 0
    (run,) = list((tmp_path / "runs").iterdir())
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["verdict"] == "SUCCESS", verdict.get("reason")
    variants = json.loads((run / "variants.json").read_text())
    entries = variants if isinstance(variants, list) else list(variants.values())
    winner = next(e for e in entries if e["variant_id"] == verdict["best_variant"])
    assert winner["spec"]["scope"] == "portfolio"
    out = tmp_path / "export"
    subprocess.run(
        [sys.executable, "-m", "experiments.export", str(run), "--to", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    line = next(
        ln
        for ln in (out / "README.md").read_text().splitlines()
        if ln.strip().startswith("python strategy.py --data") and "#" in ln
    )
    args, recorded = line.split("#")
    value = run_exported("strategy.py", args.split()[2:], cwd=out, timeout=300)
    assert value == pytest.approx(float(recorded), abs=1e-6)


def test_the_most_cointegrated_pair_is_chosen_with_its_hedge_ratio() -> None:
    import numpy as np
    import pandas as pd

    from strategies.pairs import best_pair

    rng = np.random.default_rng(0)
    n = 800
    idx = pd.bdate_range("2015-01-01", periods=n)
    walk = np.cumsum(rng.normal(0, 0.01, n))
    closes = {
        "X": pd.Series(np.exp(np.cumsum(rng.normal(0, 0.01, n))) * 50, index=idx),
        "A": pd.Series(np.exp(1.5 * walk + rng.normal(0, 0.005, n)) * 100, index=idx),
        "B": pd.Series(np.exp(walk) * 20, index=idx),
        "Y": pd.Series(np.exp(np.cumsum(rng.normal(0, 0.01, n))) * 80, index=idx),
    }
    pair = best_pair(closes)
    assert pair is not None and pair.names == ("A", "B") and (pair.a, pair.b) == (1, 2)
    assert pair.pvalue < 0.01 and pair.hedge_ratio == pytest.approx(1.5, abs=0.05)
    assert best_pair({"A": closes["A"]}) is None
    assert best_pair({k: v.iloc[:100] for k, v in closes.items()}) is None  # too short


def test_pairs_are_proposed_only_with_a_pair() -> None:
    from strategies.pairs import PairChoice

    rng = random.Random(1)
    none = propose_portfolio_specs(
        families=["pairs"], route=Route.INITIAL, n=2, rng=rng, seen=set(), best=None
    )
    assert all(p.spec.family != PortfolioFamily.PAIRS for p in none)
    pair = PairChoice(0, 2, 0.8, 0.01, ("AAPL", "NVDA"))
    some = propose_portfolio_specs(
        families=["pairs"], route=Route.INITIAL, n=2, rng=rng, seen=set(), best=None, pair=pair
    )
    spec = some[0].spec
    assert spec.family == PortfolioFamily.PAIRS and "AAPL/NVDA" in spec.name
    assert (spec.parameters["pair_a"], spec.parameters["pair_b"]) == (0, 2)
    assert spec.parameters["hedge_ratio"] == pytest.approx(0.8)
    assert parse_directive("pairs trading in semis").preferred_families[0] == "pairs"


@pytest.mark.integration
def test_a_pairs_spec_trades_both_legs_of_its_spread() -> None:
    spec = portfolio_spec(
        PortfolioFamily.PAIRS, {"pair_a": 0, "pair_b": 1, "hedge_ratio": 1.0, "entry_z": 1.5}
    )
    code = render(spec)
    assert validate_code(code).ok
    bars = {s: read_real_bars(s, "2012-01-01", "2016-12-30") for s in ("SPY", "QQQ", "DIA")}
    fold = Fold(
        index=0, warmup_start=date(2012, 1, 3), start=date(2013, 1, 2), end=date(2016, 12, 30)
    )
    run = execute(
        BacktestJob(job_id="p", variant_id="v", code=code, symbol=LABEL, bars=bars, fold=fold)
    )
    assert run.result.status == JobStatus.OK, run.result.error
    assert {f.symbol for f in run.fills} == {"SPY", "QQQ"}  # never the third feed
    assert run.result.metrics.n_trades > 5
