"""TUNE through the portfolio screen (``swarm.nodes.strategy.ScreenTuner``, scope "portfolio").

A portfolio parent (cross-sectional momentum or rotation, no regime filter) is tuned on a
Latin-hypercube neighbourhood of its own parameters on the portfolio grid, screened on the
universe's window per in-sample fold (the portfolio jobs' bars, ``job_bars``), ranked by the
Sharpe the gate computes for the variant (its one result per fold, ``gate.aggregate``), and the
top k go to Backtrader. Every screened set is a trial: the ledger, the ``screen`` record and
``screens/iNN-portfolio.npz`` hold the same sets. ``--no-screen`` leaves portfolio tuning as it
was. A small run on real corpus bars (three symbols, two folds), in-process, no Backtrader.
"""

from __future__ import annotations

import random
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import read_real_bars

from backtest.contracts import CostModel, Fold
from backtest.screen import PortfolioWindow, read_batch, screen_portfolio, supported_portfolio
from experiments.records import ScreenRecord
from experiments.runfolder import screen_file
from experiments.tracker import ExperimentTracker, read_records
from gate.aggregate import aggregate_variant
from strategies.families import PARAM_SPACE, reconcile_portfolio
from strategies.mutate import inert_params, neighbourhood
from strategies.param_space import DEFAULT_SPACE
from strategies.portfolio import (
    SCOPE,
    is_portfolio_spec,
    portfolio_spec,
    propose_portfolio_specs,
)
from strategies.regime import INDEX_REGIME
from strategies.spec import PortfolioFamily
from swarm.families.portfolio import PortfolioFamilies
from swarm.memo import RunMemo
from swarm.nodes.screen_tuner import ScreenTuner, screens

pytestmark = pytest.mark.integration

SYMBOLS = ["AAPL", "MSFT", "NVDA"]
FOLDS = [
    Fold(index=0, warmup_start=date(2013, 1, 1), start=date(2014, 1, 1), end=date(2015, 12, 31)),
    Fold(index=1, warmup_start=date(2015, 1, 1), start=date(2016, 1, 1), end=date(2017, 12, 31)),
]
COSTS = CostModel(commission_pct=0.1, slippage_pct=0.05)
PARENT = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1})


def _ctx(tmp: Path, *, seed: int = 7, screen_size: int = 24, min_trades: int = 10):
    bars = {s: read_real_bars(s, "2012-01-01", "2017-12-31") for s in SYMBOLS}
    root = tmp / "run"
    root.mkdir(parents=True, exist_ok=True)
    stages: list[str] = []
    return SimpleNamespace(
        config=SimpleNamespace(
            screen_size=screen_size,
            seed=seed,
            costs=COSTS,
            param_space=DEFAULT_SPACE,
            sampler="random",
            executor="process",
            workers=None,
        ),
        symbols=list(SYMBOLS),
        folds=FOLDS,
        memo=RunMemo(),
        periods_per_year=252,
        criteria=SimpleNamespace(min_trades=min_trades),
        data={s: SimpleNamespace(bars=b) for s, b in bars.items()},
        insample_bars=lambda s: bars[s],
        run=SimpleNamespace(
            root=root,
            path=lambda rel: root / rel,
            tracker=ExperimentTracker(root / "experiments.jsonl"),
        ),
        progress=SimpleNamespace(stage=lambda kind, text: stages.append(text)),
        stages=stages,
    )


def _tuner(ctx, *, iteration: int = 3) -> ScreenTuner:
    return ScreenTuner(
        ctx, {}, ("i02-v01-parent", PARENT), iteration=iteration, route="TUNE", scope=SCOPE
    )


def _screens(ctx) -> list[dict]:
    return [r for r in read_records(ctx.run.root / "experiments.jsonl") if r["kind"] == "screen"]


def test_every_screened_set_is_one_trial_in_the_ledger_the_record_and_the_npz(tmp_path):
    ctx = _ctx(tmp_path)
    tuner = _tuner(ctx)
    top = tuner(PARENT, 3, set())
    more = tuner(PARENT, 2, {s.trial_key() for s in top})  # the rules brain's share
    tuner.flush()
    (rec,) = _screens(ctx)
    ScreenRecord.model_validate(rec)
    keys, dates, matrix = read_batch(ctx.run.path(screen_file(3, SCOPE)))
    assert rec["series_file"] == "screens/i03-portfolio.npz"
    assert rec["scope"] == "portfolio" and rec["n_symbols"] == 3 and rec["n_folds"] == 2
    n = rec["n_sets"]
    assert 0 < n <= 24 and len(rec["trials"]) == n == len(keys) == matrix.shape[0]
    assert set(tuner.ledger.trials) == set(keys) == {t["trial_key"] for t in rec["trials"]}
    assert matrix.shape[1] == len(dates) and np.isfinite(matrix).all()
    # The confirmed sets are the screen's best, in rank order, the second call's next.
    ranked = [t["trial_key"] for t in rec["trials"]]
    assert [s.trial_key() for s in top + more] == ranked[:5] == rec["confirmed"]
    assert all(is_portfolio_spec(s) and " | screen " in s.name for s in top + more)
    assert any("portfolio sets on 3 symbols x 2 folds" in s for s in ctx.stages)
    # One sweep per iteration: another parent gets nothing, and nothing is screened again.
    other = portfolio_spec(PortfolioFamily.ROTATION)
    assert tuner(other, 2, set()) == []
    assert len(tuner.ledger.trials) == n


def test_a_portfolio_sweep_and_a_symbol_sweep_of_one_iteration_are_both_recorded(tmp_path):
    """Two sweeps in one iteration (the portfolio slots' and the rules brain's): two records
    (distinct ids), two npz files, one ledger holding both batches."""
    from strategies.families import spec_from_template
    from strategies.spec import Family

    ctx = _ctx(tmp_path, screen_size=12)
    ptuner = _tuner(ctx)
    ptuner(PARENT, 1, set())
    single = spec_from_template(Family.MOMENTUM, 0)
    stuner = ScreenTuner(
        ctx, {}, ("i02-v02-single", single), iteration=3, route="TUNE", ledger=ptuner.ledger
    )
    stuner(single, 1, set())
    for t in (ptuner, stuner):
        t.flush()
    recs = _screens(ctx)
    assert sorted(r["scope"] for r in recs) == ["portfolio", "symbol"]
    assert len({r["record_id"] for r in recs}) == 2
    assert {r["series_file"] for r in recs} == {"screens/i03-portfolio.npz", "screens/i03.npz"}
    keys = {t["trial_key"] for r in recs for t in r["trials"]}
    assert set(stuner.ledger.trials) == keys and len(keys) == sum(r["n_sets"] for r in recs)


def test_the_ranking_is_the_gates_sharpe_and_sets_under_the_trade_floor_rank_last(tmp_path):
    ctx = _ctx(tmp_path, min_trades=40)
    tuner = _tuner(ctx)
    tuner(PARENT, 1, set())
    sweep = tuner.sweep
    ranked = sweep.top(len(sweep.sets))
    floor = [s.n_trades >= 40 for s in ranked if s.error is None and s.sharpe is not None]
    assert floor == sorted(floor, reverse=True)  # every set at the floor before any under it
    above = [s.sharpe for s in ranked if s.n_trades >= 40 and s.sharpe is not None]
    assert above == sorted(above, reverse=True)
    # The figure ranked on is the gate's: the variant's results per fold (the portfolio
    # screen's, equal to Backtrader's: tests/backtest/test_bt_screen_portfolio.py) aggregated.
    priced = [s for s in ranked if s.sharpe is not None]
    for s in priced[:2] + priced[-1:]:
        results = []
        for fold in FOLDS:
            window = PortfolioWindow.from_frames({k: ctx.insample_bars(k) for k in SYMBOLS}, fold)
            res = screen_portfolio(s.spec, window, costs=COSTS).result
            results.append(res.model_copy(update={"fold": fold.index}))
        metrics, _, _ = aggregate_variant(results, periods_per_year=252)
        assert metrics.sharpe == pytest.approx(s.sharpe, rel=1e-9)
        assert sum(len(r.trade_pnls) for r in results) == s.n_trades


def test_the_screened_sets_are_a_function_of_the_seed(tmp_path):
    def sweep(seed: int, sub: str):
        ctx = _ctx(tmp_path / sub, seed=seed)
        tuner = _tuner(ctx)
        tuner(PARENT, 2, set())
        tuner.flush()
        keys, _, matrix = read_batch(ctx.run.path(screen_file(3, SCOPE)))
        return keys, matrix, _screens(ctx)[0]["confirmed"]

    a, b, c = sweep(7, "a"), sweep(7, "b"), sweep(8, "c")
    assert a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2] == b[2]
    assert a[0] != c[0]


def test_the_portfolio_neighbourhood_stays_on_the_grid_and_off_seen_keys():
    seen = {s.trial_key() for s in neighbourhood(PARENT, 5, seed=(1,), seen=set())}
    sets = neighbourhood(PARENT, 60, seed=(2,), seen=seen, frozen=inert_params(PARENT))
    keys = [s.trial_key() for s in sets]
    assert len(sets) == 60 and len(set(keys)) == 60 and not seen & set(keys)
    assert PARENT.trial_key() not in keys
    for s in sets:
        assert reconcile_portfolio(s).parameters == s.parameters  # on the grid, the family's
        assert s.parameters["target_vol"] == PARENT.parameters["target_vol"]  # inert: frozen
        for name, value in s.parameters.items():
            if isinstance(value, bool):  # a design switch: never moved by tuning
                assert value == PARENT.parameters[name]
                continue
            r = PARAM_SPACE[name]
            assert r.snap(value) == value and r.low <= value <= r.high
    # With the volatility target on, target_vol moves too.
    targeted = reconcile_portfolio(
        PARENT.model_copy(update={"parameters": PARENT.parameters | {"vol_target": True}})
    )
    assert not inert_params(targeted)
    moved = neighbourhood(targeted, 30, seed=(2,), seen=set(), frozen=inert_params(targeted))
    assert any(s.parameters["target_vol"] != targeted.parameters["target_vol"] for s in moved)


def test_only_the_families_the_portfolio_screen_reproduces_are_screened():
    assert supported_portfolio(PARENT)
    assert supported_portfolio(portfolio_spec(PortfolioFamily.ROTATION))
    assert not supported_portfolio(
        portfolio_spec(PortfolioFamily.PAIRS, {"pair_a": 0, "pair_b": 1, "hedge_ratio": 1.0})
    )
    assert not supported_portfolio(
        portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, filters=(INDEX_REGIME,))
    )
    on, off = SimpleNamespace(screen_size=500), SimpleNamespace(screen_size=0)
    assert screens(on, PortfolioFamilies(), ("p", PARENT))
    assert not screens(off, PortfolioFamilies(), ("p", PARENT))  # --no-screen
    assert not screens(on, PortfolioFamilies(), None)


@pytest.mark.unit
@pytest.mark.parametrize("route", ["TUNE", "FIX", "REFINE"])
def test_without_a_tuner_portfolio_tuning_is_as_before(route):
    """``tuner=None`` (``--no-screen``) is the old path; a tuner's sets come first in the
    tuning slots (TUNE: all of them; FIX: after the fix; REFINE: a third, from 2, as the rules
    brain keeps them). A tuner that screens nothing leaves TUNE and FIX as they were."""

    def propose(tuner, n=4):
        return propose_portfolio_specs(
            families=["cross_sectional_momentum"],
            route=route,
            n=n,
            rng=random.Random(3),
            seen=set(),
            best=("p", PARENT),
            tuner=tuner,
        )

    plain = propose(None)
    assert not any(p.why == "screened around the best" for p in plain)
    if route != "REFINE":
        assert [(p.spec, p.why) for p in plain] == [(p.spec, p.why) for p in propose(lambda *a: [])]
    screened = neighbourhood(PARENT, 4, seed=(9,), seen=set())

    def tuner(parent, n, seen):
        assert parent == PARENT
        return [s for s in screened if s.trial_key() not in seen][:n]

    got = propose(tuner)
    tuned = [p.spec for p in got if p.why == "screened around the best"]
    want = {"TUNE": 4, "FIX": 3, "REFINE": 1}[route]
    assert tuned == screened[:want]
    if route == "REFINE":  # without a tuner every slot the switches can fill is a switch
        assert sum(p.why.startswith("refine") for p in plain) == 3
        assert sum(p.why.startswith("refine") for p in got) == 3
        got2 = propose(tuner, n=2)
        assert [p.why.startswith("refine") for p in got2] == [True, False]
        assert [p.why.startswith("refine") for p in propose(None, n=2)] == [True, True]


def test_a_universe_the_screen_cannot_price_falls_back_to_tuning(tmp_path):
    ctx = _ctx(tmp_path)
    bad = ctx.data["MSFT"].bars.copy()
    bad.iloc[-5, bad.columns.get_loc("low")] = 0.0  # a price of 0.0: no backtrader sizes
    ctx.data["MSFT"] = SimpleNamespace(bars=bad)
    frames = dict(ctx.data)
    ctx.insample_bars = lambda s: frames[s].bars
    tuner = _tuner(ctx)
    assert tuner(PARENT, 3, set()) == []
    tuner.flush()
    assert tuner.ledger is None and not _screens(ctx)
    assert any("screen skipped" in s for s in ctx.stages)


# Every slot a portfolio one: the graded ranking may put a block family first otherwise, and the
# repairs of a block best would then take the portfolio family's tuning slot.
XS_ONLY = ("--families", "cross_sectional_momentum")
# Nothing below reads a chart or the tear sheet: not drawing them (QuantStats' pages, the
# winner's folds traced again) saves a third of each run and changes no record or verdict.
NO_FIGURES = "--no-figures"


def _develop(daily_dir: Path, out: Path, *extra: str) -> Path:
    from swarm.develop import build_parser, config_from_args
    from swarm.run import execute, prepare

    argv = [
        "--directive",
        "momentum alpha in tech",
        "--tickers",
        "AAPL,MSFT,NVDA,GOOGL,AMZN",
        "--data-dir",
        str(daily_dir),
        "--start",
        "2012-01-01",
        "--end",
        "2020-12-01",
        "--max-iterations",
        "2",
        "--workers",
        "1",
        "--offline",
        "--memory-dir",
        "off",
        "--out",
        str(out),
        *extra,
    ]
    config, criteria = config_from_args(build_parser().parse_args(argv))
    # No research round: iteration 2 develops iteration 1's families (a first research round
    # would otherwise take it; what research changes is tested elsewhere).
    no_research = config.limits.model_copy(update={"max_research_loops": 0})
    config = config.model_copy(update={"limits": no_research})
    prepared = prepare(config, criteria, argv=argv, quiet=True)
    execute(prepared)
    return prepared.run.root


@pytest.mark.e2e
@pytest.mark.slow
def test_a_run_tunes_its_portfolio_parent_through_the_screen_and_no_screen_never_does(
    tmp_path, daily_dir, monkeypatch
):
    """The README's acceptance directive naming cross-sectional momentum, two iterations
    without research: its best keeps a tuning slot, and it is the portfolio screen's best,
    which Backtrader confirms to the last digit. ``--no-screen``: no sweep, no portfolio
    screen."""
    import json

    run = _develop(daily_dir, tmp_path / "on", "--screen-size", "60", NO_FIGURES, *XS_ONLY)
    records = list(read_records(run / "experiments.jsonl"))
    (rec,) = [r for r in records if r["kind"] == "screen"]
    assert rec["scope"] == "portfolio" and rec["n_sets"] == 60 and rec["n_symbols"] == 5
    assert (run / rec["series_file"]).is_file()
    variants = json.loads((run / "variants.json").read_text())
    by_key = {t["trial_key"]: t for t in rec["trials"]}
    for key in rec["confirmed"]:
        vid = next(
            v
            for v, x in variants.items()
            if x["spec"]["name"].find(" | screen ") > 0 and r_key(records, v) == key
        )
        metrics = variants[vid]["in_sample"]["metrics"]
        assert metrics["sharpe"] == pytest.approx(by_key[key]["sharpe"], rel=1e-9)
        assert metrics["n_trades"] == by_key[key]["n_trades"]
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["n_trials"] == 60 + 10 - len(rec["confirmed"])  # a confirmed set: one trial

    import swarm.nodes.screen_tuner as strategy_node

    def refuse(*a, **k):
        raise AssertionError("--no-screen must not screen")

    monkeypatch.setattr(strategy_node, "neighbourhood", refuse)
    monkeypatch.setattr("backtest.screen.screen_sets", refuse)
    plain = _develop(daily_dir, tmp_path / "off", "--no-screen", NO_FIGURES, *XS_ONLY)
    assert not (plain / "screens").exists()
    assert json.loads((plain / "verdict.json").read_text())["n_trials"] == 10


def r_key(records: list[dict], variant_id: str) -> str | None:
    """A variant's trial key, from its backtest records."""
    return next(
        (
            r["trial_key"]
            for r in records
            if r["kind"] == "backtest" and r["variant_id"] == variant_id
        ),
        None,
    )


def test_the_portfolio_screen_uses_this_machines_cores_as_the_run_allows():
    from swarm.nodes.screen_tuner import screen_workers

    assert screen_workers("process", None, 2) == 2  # every core by default
    assert screen_workers("process", 1, 8) == 1  # --workers 1
    assert screen_workers("process", 16, 2) == 2  # never more than this machine has
    assert screen_workers("ray", 64, 4) == 1  # the Ray driver is not forked
    assert screen_workers("serial", 4, 4) == 1  # in-process means one process
    assert screen_workers("process", None, None) == 1  # the cores unknown
