"""The screen's TPE sampler (``--sampler tpe``, ``backtest.screen.tpe``) on a synthetic
objective: the same seed draws the same sets, every set is inside the space and the box, every
drawn set is a row of the sweep (a trial), and the draws lean toward the better region."""

from __future__ import annotations

import numpy as np
import pytest

from backtest.screen import ScreenedSet, Sweep, tpe_sweep
from backtest.screen.tpe import FAILED, UNDER_FLOOR, objective
from strategies.families import spec_from_template
from strategies.param_space import parse_param_space
from strategies.spec import Family, StrategySpec
from swarm.families import registry

pytest.importorskip("optuna")
pytestmark = pytest.mark.unit

PARENT = spec_from_template(Family.MOMENTUM, 0)
SPACE = parse_param_space(
    {"momentum": {"roc_period": {"low": 10, "high": 60}, "trend_period": {"low": 80, "high": 150}}},
    source="s.toml",
    grid=registry().grid_parameters(),
)


def _evaluate(calls: list[int], calls_seen: frozenset[str] = frozenset()):
    """A fake screen: Sharpe peaks at roc_period 45, trend_period 120."""

    def evaluate(specs: list[StrategySpec]) -> Sweep:
        # a call of sets tried before the sweep (re-screened for TPE alone) counts negative
        calls.append(-len(specs) if {s.trial_key() for s in specs} & calls_seen else len(specs))
        sets = [
            ScreenedSet(
                spec=s,
                trial_key=s.trial_key(),
                sharpe=2.0
                - abs(s.parameters["roc_period"] - 45) / 20
                - abs(s.parameters["trend_period"] - 120) / 100,
                sharpe_per_period=0.1,
                n_obs=3,
                n_trades=20,
            )
            for s in specs
        ]
        return Sweep(
            sets=sets,
            dates=["a", "b", "c"],
            returns=np.zeros((len(sets), 3)),
            n_symbols=1,
            n_folds=1,
            ranked=sorted(range(len(sets)), key=lambda i: -(sets[i].sharpe or 0)),
        )

    return evaluate


def _sweep(seed, n=60, seen=(), calls=None):
    return tpe_sweep(
        PARENT,
        n,
        seed=seed,
        seen=set(seen),
        evaluate=_evaluate(
            calls if calls is not None else [], frozenset(seen) | {PARENT.trial_key()}
        ),
        min_trades=10,
        space=SPACE,
    )


def test_the_same_seed_draws_the_same_sets_and_another_seed_others():
    a, b, c = _sweep((0, 1, 1)), _sweep((0, 1, 1)), _sweep((0, 2, 1))
    keys = [s.trial_key for s in a.sets]
    assert keys == [s.trial_key for s in b.sets]
    assert keys != [s.trial_key for s in c.sets]


def test_every_drawn_set_is_a_fresh_trial_inside_the_space():
    calls: list[int] = []
    seen = {s.trial_key for s in _sweep((5, 1, 1), n=10).sets}
    sweep = _sweep((0, 1, 1), n=60, seen=seen, calls=calls)
    keys = [s.trial_key for s in sweep.sets]
    assert len(keys) == 60 == sum(n for n in calls if n > 0)  # every fresh set is a row
    assert len(set(keys)) == 60 and not set(keys) & (seen | {PARENT.trial_key()})
    assert sweep.returns.shape == (60, 3) and sorted(sweep.ranked) == list(range(60))
    for s in sweep.sets:
        p = s.spec.parameters
        assert 10 <= p["roc_period"] <= 60 and p["roc_period"] % 5 == 0
        assert 80 <= p["trend_period"] <= 150 and p["trend_period"] % 10 == 0
        assert SPACE.contains(s.spec)
        assert " | screen tpe " in s.spec.name


def test_tpe_leans_toward_the_better_region():
    sweep = _sweep((0, 1, 1), n=80)
    sharpes = [s.sharpe for s in sweep.sets]
    assert np.mean(sharpes[-30:]) > np.mean(sharpes[:10])  # after the random start-up draws
    assert sweep.top(1)[0].sharpe == max(sharpes)


def test_the_objective_keeps_the_sweeps_order():
    def s(sharpe, trades, error=None):
        return ScreenedSet(PARENT, "k", sharpe, None, 1, trades, error)

    assert objective(s(1.5, 20), 10) == 1.5
    assert objective(s(3.0, 5), 10) == 3.0 - UNDER_FLOOR < objective(s(-5.0, 20), 10)
    assert objective(s(None, 20), 10) == FAILED < objective(s(-99.0, 0), 10)
    assert objective(s(1.0, 20, "boom"), 10) == FAILED
    assert objective(s(1e9, 20), 10) == 100.0  # capped


def _tiny(roc: tuple[int, int], trend: tuple[int, int]):
    """A small box: the two periods' ranges, the other three knobs two values each."""
    return parse_param_space(
        {
            "momentum": {
                "roc_period": {"low": roc[0], "high": roc[1]},
                "trend_period": {"low": trend[0], "high": trend[1]},
                "roc_threshold": {"low": 0.02, "high": 0.025},
                "stop_loss_pct": {"low": 0.05, "high": 0.055},
                "max_hold_bars": {"low": 30, "high": 31},
            }
        },
        source="tiny.toml",
        grid=registry().grid_parameters(),
    )


def test_a_set_tried_before_the_sweep_is_told_its_value_and_is_no_trial():
    """TPE re-drawing a set an earlier sweep tried (or the parent) learns its real value, not
    a failure, so the model is not pushed away from where the search found its best."""
    tiny = _tiny((40, 50), (110, 130))  # 3 x 3 x 2 x 2 x 2 = 72 sets in the box
    first = tpe_sweep(
        PARENT, 40, seed=(5, 1, 1), seen=set(), evaluate=_evaluate([]), min_trades=10, space=tiny
    )
    seen = {s.trial_key for s in first.sets}
    calls: list[int] = []
    told: list[tuple[str, float]] = []
    evaluate = _evaluate(calls, frozenset(seen) | {PARENT.trial_key()})

    def spying(specs: list[StrategySpec]) -> Sweep:
        sweep = evaluate(specs)
        told.extend((s.trial_key, s.sharpe) for s in sweep.sets)
        return sweep

    sweep = tpe_sweep(
        PARENT, 20, seed=(0, 1, 1), seen=seen, evaluate=spying, min_trades=10, space=tiny
    )
    assert len(sweep.sets) == 20
    again = {k for k, _ in told} & (seen | {PARENT.trial_key()})
    assert again  # the small box is crowded with earlier sets: TPE re-drew some
    assert not again & {s.trial_key for s in sweep.sets}  # ... and none is a row (a trial)
    assert all(v is not None and v > FAILED for k, v in told if k in again)


def test_a_set_re_drawn_twice_in_a_batch_is_screened_once():
    """Re-drawn sets are screened for TPE's sake alone: one screen each, every draw told."""
    tiny = _tiny((45, 50), (110, 120))  # 2 x 2 x 2 x 2 x 2 = 32 sets: re-draws are the rule
    first = tpe_sweep(
        PARENT, 24, seed=(5, 1, 1), seen=set(), evaluate=_evaluate([]), min_trades=10, space=tiny
    )
    seen = {s.trial_key for s in first.sets}
    screened: list[list[str]] = []
    evaluate = _evaluate([])

    def spying(specs: list[StrategySpec]) -> Sweep:
        screened.append([s.trial_key() for s in specs])
        return evaluate(specs)

    sweep = tpe_sweep(
        PARENT, 6, seed=(0, 1, 1), seen=seen, evaluate=spying, min_trades=10, space=tiny
    )
    assert sweep.sets  # the sets left in the box
    assert any(set(call) & seen for call in screened)  # re-draws were screened...
    assert all(len(call) == len(set(call)) for call in screened)  # ...each once a call
