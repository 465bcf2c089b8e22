"""Family defaults, the parameter space and first-iteration seeding."""

from __future__ import annotations

import random

import pytest

from strategies.blocks import ENTRIES, EXITS, FILTERS, SIZINGS
from strategies.families import (
    ORDERED_PAIRS,
    PARAM_SPACE,
    TEMPLATES,
    default_spec,
    family_order,
    initial_specs,
    reconcile,
    snap_params,
)
from strategies.spec import Family

pytestmark = pytest.mark.unit

FAMILY_DEFAULT_ENTRY = {
    Family.MOMENTUM: "roc_momentum",
    Family.MEAN_REVERSION: "bollinger_reversion",
    Family.BREAKOUT: "donchian_breakout",
    Family.TREND: "sma_cross",
    Family.VOLATILITY: "bollinger_breakout",
}


def test_every_block_parameter_has_a_range_containing_its_default() -> None:
    blocks = [*ENTRIES.values(), *FILTERS.values(), *EXITS.values(), *SIZINGS.values()]
    for block in blocks:
        for name, default in block.params.items():
            r = PARAM_SPACE[name]
            assert r.low <= default <= r.high, name
            assert r.snap(default) == default, name


@pytest.mark.parametrize("family", list(Family))
def test_default_spec_shape(family: Family) -> None:
    spec = default_spec(family)
    assert spec.family is family
    assert spec.entry == FAMILY_DEFAULT_ENTRY[family]
    assert reconcile(spec) == spec  # already complete and on the grid
    for t in TEMPLATES[family]:
        assert set(t.params) <= set(PARAM_SPACE)


def test_family_defaults_follow_the_design() -> None:
    assert "trend_sma" in default_spec(Family.MOMENTUM).filters
    assert {"stop_loss", "max_hold"} <= set(default_spec(Family.MOMENTUM).exits)
    assert {"atr_stop", "trailing_stop"} <= set(default_spec(Family.BREAKOUT).exits)
    assert "adx" in default_spec(Family.TREND).filters
    assert "volume_confirm" in default_spec(Family.VOLATILITY).filters


def test_snap_clips_rounds_and_orders() -> None:
    params = snap_params({"fast_period": 73, "slow_period": 12, "bb_width": 2.04, "x": 3})
    assert params["fast_period"] == 60 and params["slow_period"] == 70
    assert params["bb_width"] == 2.0 and params["x"] == 3
    for a, b in ORDERED_PAIRS:
        p = snap_params({a: PARAM_SPACE[a].high, b: PARAM_SPACE[b].low})
        assert p[a] < p[b]


def test_reconcile_adds_defaults_and_drops_unused() -> None:
    spec = default_spec(Family.MOMENTUM)
    swapped = reconcile(spec.model_copy(update={"entry": "macd_cross"}))
    assert "roc_period" not in swapped.parameters
    assert {"macd_fast", "macd_slow", "macd_signal"} <= set(swapped.parameters)


def test_initial_specs_diverse_unique_and_preferred_first() -> None:
    specs = initial_specs(5, preferred_families=["breakout"], suggested=None, rng=random.Random(0))
    assert len(specs) == 5
    assert len({s.family for s in specs}) >= 3
    assert len({s.trial_key() for s in specs}) == 5
    assert specs[0].family is Family.BREAKOUT


def test_initial_specs_more_than_families_stay_unique() -> None:
    specs = initial_specs(
        17,
        preferred_families=["Mean Reversion", "nonsense"],
        suggested=None,
        rng=random.Random(3),
    )
    assert specs[0].family is Family.MEAN_REVERSION
    assert len({s.trial_key() for s in specs}) == 17


def test_initial_specs_seeded_from_suggestions() -> None:
    suggested = {
        "lookback": 30,
        "bollinger_width": 2.5,
        "stop_loss_pct": 5,  # percent
        "take_profit_pct": 0.2,
        "max_hold_bars": 12,
    }
    specs = initial_specs(
        5, preferred_families=["mean_reversion"], suggested=suggested, rng=random.Random(1)
    )
    mr = specs[0]
    assert mr.parameters["bb_period"] == 30
    assert mr.parameters["bb_width"] == 2.5
    assert mr.parameters["stop_loss_pct"] == 0.05
    assert mr.parameters["max_hold_bars"] == 12
    assert "take_profit_pct" not in mr.parameters  # suggestions never add blocks
    momentum = next(s for s in specs if s.family is Family.MOMENTUM)
    assert momentum.parameters["roc_period"] == 30


def test_family_order() -> None:
    assert family_order(["trend", "trend", "momentum"])[:2] == [Family.TREND, Family.MOMENTUM]
    assert len(family_order([])) == len(Family)


def test_initial_specs_deterministic() -> None:
    a = initial_specs(8, preferred_families=[], suggested=None, rng=random.Random(5))
    b = initial_specs(8, preferred_families=[], suggested=None, rng=random.Random(5))
    assert a == b
