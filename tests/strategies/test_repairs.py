"""Repairs aimed at the failing criterion: each move changes what its category asks, applies
only where it can, and never proposes a trial already made."""

from __future__ import annotations

import random

import pytest

from strategies.codegen import render
from strategies.families import PARAM_SPACE, default_spec
from strategies.mutate import HINT_MOVES, LOOKBACKS
from strategies.portfolio import portfolio_spec
from strategies.regime import INDEX_REGIME, VIX_REGIME
from strategies.repair import PORTFOLIO_MOVES, portfolio_moves, repairs
from strategies.spec import Family, PortfolioFamily
from strategies.validate import validate_code
from swarm.families import registry

pytestmark = pytest.mark.unit

XS = PortfolioFamily.CROSS_SECTIONAL_MOMENTUM


def _repairs(spec, hints, seen=(), regime_filters=()):
    """The repairs the lab makes: with the moves the spec's family plugin names (none for a
    family that is not repairable, or for an LLM's own code)."""
    moves = registry().repair_moves(spec)
    if moves is None:
        return []
    return repairs(
        spec,
        hints,
        moves=moves,
        rng=random.Random(0),
        seen=set(seen),
        regime_filters=regime_filters,
    )


def _notes(specs):
    return [s.name.split(" | ", 1)[1] for s in specs]


def _xs(**params):
    return portfolio_spec(XS, params)


# The README case -------------------------------------------------------------------------------


def test_the_readme_case_is_vol_targeted_first_then_regime_filtered() -> None:
    # Cross-sectional momentum whose only failing criterion is max drawdown 28.9% vs 20%.
    best = _xs()
    out = _repairs(best, ["drawdown"], seen={best.trial_key()}, regime_filters=(INDEX_REGIME,))
    assert out[0].parameters["vol_target"] is True and out[0].filters == []
    assert _notes(out)[0] == "repair drawdown: vol_target on"
    assert out[1].filters == [INDEX_REGIME] and out[1].parameters["vol_target"] is False
    assert _notes(out)[1] == f"repair drawdown: +{INDEX_REGIME}"
    assert all(s.family == XS and s.trial_key() != best.trial_key() for s in out)
    for s in out:
        assert validate_code(render(s)).ok


def test_a_vol_targeted_best_gets_a_lower_target_and_more_names() -> None:
    best = _xs(vol_target=True)
    out = _repairs(best, ["drawdown"])
    assert _notes(out)[:3] == [
        "repair drawdown: vol_target on, target_vol 0.15->0.1",
        "repair drawdown: xs_top_n 2->3",
        "repair drawdown: inverse_vol on",
    ]
    assert out[0].parameters["target_vol"] == pytest.approx(0.10)
    assert out[1].parameters["xs_top_n"] == 3


def test_portfolio_drawdown_moves_stop_at_the_grid_and_without_the_data() -> None:
    best = _xs(vol_target=True, target_vol=0.05, xs_top_n=5, inverse_vol=True)
    assert _repairs(best, ["drawdown"]) == []  # no regime data: nothing left to try
    out = _repairs(best, ["drawdown"], regime_filters=(INDEX_REGIME, VIX_REGIME))
    assert [s.filters for s in out] == [[INDEX_REGIME]]  # the first filter the data has


def test_rotation_drawdown_turns_its_cash_filter_on() -> None:
    best = portfolio_spec(
        PortfolioFamily.ROTATION, {"cash_filter": False, "vol_target": True, "target_vol": 0.05}
    )
    assert _notes(_repairs(best, ["drawdown"])) == ["repair drawdown: cash_filter on"]


@pytest.mark.parametrize("hint", ["low_alpha", "market_exposure"])
def test_alpha_repairs_hedge_cross_sectional_momentum_long_short(hint) -> None:
    out = _repairs(_xs(), [hint])
    assert out[0].long_short is True and _notes(out)[0] == f"repair {hint}: long/short"
    assert validate_code(render(out[0])).ok
    # Already long/short: only the regime filter is left, and without its data nothing.
    assert _repairs(portfolio_spec(XS, long_short=True), [hint]) == []


@pytest.mark.parametrize("hint", ["low_alpha", "market_exposure"])
def test_alpha_repairs_turn_rotation_s_ranking_long_short(hint) -> None:
    # Rotation cannot short: its ranking becomes cross-sectional long/short of one name a side.
    rotation = portfolio_spec(PortfolioFamily.ROTATION, {"xs_lookback": 63, "rebalance_bars": 10})
    out = _repairs(rotation, [hint], regime_filters=(INDEX_REGIME,))
    hedged = out[0]
    assert _notes(out)[0] == f"repair {hint}: cross-sectional long/short of the same ranking"
    assert hedged.family == XS and hedged.long_short is True
    assert hedged.parameters["xs_top_n"] == 1 and hedged.parameters["xs_lookback"] == 63
    assert hedged.parameters["rebalance_bars"] == 10 and "cash_filter" not in hedged.parameters
    assert hedged.approach == portfolio_spec(XS).approach
    assert validate_code(render(hedged)).ok
    assert [s.filters for s in out[1:]] == [[INDEX_REGIME]]  # then the regime filter


def test_portfolio_trade_count_and_cost_moves_go_opposite_ways_on_the_rebalance() -> None:
    (faster,) = _repairs(_xs(), ["too_few_trades"])
    (slower,) = _repairs(_xs(), ["cost_drag"])
    assert faster.parameters["rebalance_bars"] < 21 < slower.parameters["rebalance_bars"]
    for s in (faster, slower):
        assert (
            PARAM_SPACE["rebalance_bars"].snap(s.parameters["rebalance_bars"])
            == (s.parameters["rebalance_bars"])
        )
    low = PARAM_SPACE["rebalance_bars"].low
    assert _repairs(_xs(rebalance_bars=low), ["too_few_trades"]) == []


def test_pairs_trade_count_and_cost_moves_shift_the_entry_z_score() -> None:
    pairs = portfolio_spec(PortfolioFamily.PAIRS)
    (more,) = _repairs(pairs, ["too_few_trades"])
    (fewer,) = _repairs(pairs, ["cost_drag"])
    assert more.parameters["entry_z"] == pytest.approx(1.5)
    assert fewer.parameters["entry_z"] == pytest.approx(2.5)


def test_a_portfolio_has_no_exits_to_repair() -> None:
    assert "weak_exits" not in PORTFOLIO_MOVES
    assert _repairs(_xs(), ["weak_exits"]) == []


# Single-symbol block specs ---------------------------------------------------------------------


def test_block_drawdown_is_vol_targeted_then_regime_filtered_then_stopped() -> None:
    spec = default_spec(Family.MOMENTUM)
    assert spec.sizing != "volatility_target"
    out = _repairs(spec, ["drawdown"], regime_filters=(INDEX_REGIME,))
    assert out[0].sizing == "volatility_target"
    assert INDEX_REGIME in out[1].filters
    assert "atr_stop" in out[2].exits
    for s in out:
        assert validate_code(render(s)).ok


def test_block_weak_exits_add_exits_only() -> None:
    spec = default_spec(Family.MOMENTUM)  # already holds a max_hold exit
    out = _repairs(spec, ["weak_exits"])
    assert [set(s.exits) - set(spec.exits) for s in out] == [{"trailing_stop"}, {"atr_stop"}]
    assert all(s.filters == spec.filters and s.entry == spec.entry for s in out)


def test_block_too_few_trades_shortens_every_lookback() -> None:
    spec = default_spec(Family.MOMENTUM)
    (faster,) = _repairs(spec, ["too_few_trades"])
    looks = [p for p in spec.parameters if p in LOOKBACKS]
    assert looks and all(faster.parameters[p] < spec.parameters[p] for p in looks)
    assert _notes([faster]) == ["repair too_few_trades: faster lookbacks x0.67"]


def test_faster_returns_nothing_at_the_bottom_of_the_grid() -> None:
    spec = default_spec(Family.MOMENTUM)
    params = {p: (PARAM_SPACE[p].low if p in LOOKBACKS else v) for p, v in spec.parameters.items()}
    floor = spec.model_copy(update={"parameters": params})
    assert _repairs(floor, ["too_few_trades"]) == []


def test_block_cost_drag_slows_or_filters() -> None:
    spec = default_spec(Family.MOMENTUM)
    out = _repairs(spec, ["cost_drag"])
    notes = _notes(out)
    assert "repair cost_drag: slower lookbacks x1.5" in notes
    assert "repair cost_drag: +adx" in notes


def test_block_alpha_repairs_put_the_run_s_regime_filter_first() -> None:
    spec = default_spec(Family.MOMENTUM)
    out = _repairs(spec, ["low_alpha"], regime_filters=(INDEX_REGIME,))
    assert out[0].filters[-1] == INDEX_REGIME
    assert any(s.long_short for s in out)


def test_new_hints_have_block_moves() -> None:
    for hint in ("drawdown", "weak_exits", "too_few_trades", "low_alpha"):
        assert HINT_MOVES[hint]


# The ordering and freshness contract -----------------------------------------------------------


def test_categories_take_turns_worst_first() -> None:
    out = _repairs(_xs(), ["drawdown", "too_few_trades"])
    assert _notes(out)[:2] == [
        "repair drawdown: vol_target on",
        "repair too_few_trades: rebalance_bars 21->14",
    ]


def test_never_a_seen_spec_nor_a_duplicate_and_seen_is_not_modified() -> None:
    best = _xs()
    first = _repairs(best, ["drawdown"], regime_filters=(INDEX_REGIME,))
    seen = {first[0].trial_key(), first[1].trial_key()}
    frozen = set(seen)
    out = repairs(
        best,
        ["drawdown", "drawdown"],
        moves=portfolio_moves,
        rng=random.Random(0),
        seen=seen,
        regime_filters=(INDEX_REGIME,),
    )
    assert seen == frozen
    keys = [s.trial_key() for s in out]
    assert not set(keys) & seen and len(keys) == len(set(keys))
    assert keys == [s.trial_key() for s in first[2:]]


def test_the_parent_itself_is_never_a_repair() -> None:
    best = _xs(vol_target=True)
    assert all(s.trial_key() != best.trial_key() for s in _repairs(best, ["drawdown"]))


def test_unknown_categories_and_llm_code_get_no_repairs() -> None:
    assert _repairs(_xs(), ["no_edge"]) == []
    spec = default_spec(Family.MOMENTUM)
    custom = spec.model_copy(update={"source_sha": "0" * 64})  # an LLM's own code
    assert custom.is_custom and _repairs(custom, ["drawdown"]) == []
    assert _repairs(spec, ["drawdown"])  # the same design from the catalogue is repaired


def test_repair_slots_are_half_for_a_near_miss_and_one_otherwise():
    from gate.contracts import FailingCriterion, FailureAnalysis, FailureType, Hint
    from swarm.agents.strategy_dev import repair_slots

    def failing(*attainments: float) -> FailureAnalysis:
        return FailureAnalysis(
            failure_type=FailureType.PARAMETER_ISSUE,
            root_cause="x",
            confidence=0.5,
            failing=[
                FailingCriterion(
                    label=f"c{i}",
                    metric="max_drawdown_pct",
                    op="<=",
                    threshold=20.0,
                    value=20.0 / a,
                    attainment=a,
                    category=Hint.DRAWDOWN,
                )
                for i, a in enumerate(attainments)
            ],
        )

    assert repair_slots(5, failing(0.69)) == 3  # a near miss: half the slots, rounded up
    assert repair_slots(5, failing(0.69, 0.175)) == 1  # a far criterion: one repair
    assert repair_slots(5, failing()) == 0 and repair_slots(5, None) == 0
    assert repair_slots(0, failing(0.9)) == 0
