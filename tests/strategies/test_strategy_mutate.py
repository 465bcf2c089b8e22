"""TUNE / FIX / REFINE produce fresh, valid, explainable specs."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.codegen import render
from strategies.families import PARAM_SPACE, default_spec
from strategies.mutate import (
    FIX_PROBLEMS,
    HINT_MOVES,
    LOOKBACKS,
    LOOSER,
    fix,
    inert_params,
    refine,
    toward_more_trades,
    tune,
)
from strategies.portfolio import portfolio_spec
from strategies.spec import Family, PortfolioFamily
from strategies.validate import validate_code

pytestmark = pytest.mark.unit


def assert_valid(spec) -> None:
    report = validate_code(render(spec))
    assert report.ok, report.errors


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    family=st.sampled_from(list(Family)),
    n=st.integers(1, 12),
    long_short=st.booleans(),
)
def test_tune_never_returns_seen_or_duplicates(
    seed: int, family: Family, n: int, long_short: bool
) -> None:
    spec = default_spec(family, long_short=long_short)
    rng = random.Random(seed)
    first = tune(spec, n, rng=rng, seen=set())
    seen = {spec.trial_key()} | {s.trial_key() for s in first}
    second = tune(spec, n, rng=rng, seen=seen)
    for batch, banned in ((first, {spec.trial_key()}), (second, seen)):
        keys = [s.trial_key() for s in batch]
        assert len(keys) == len(set(keys))
        assert not set(keys) & banned
    assert len(first) == n and len(second) == n
    for s in first + second:
        assert s.entry == spec.entry and s.filters == spec.filters  # only parameters move
        for name, value in s.parameters.items():
            r = PARAM_SPACE[name]
            assert r.low <= value <= r.high


@pytest.mark.parametrize("vol_target", [False, True])
def test_tune_never_moves_a_parameter_the_code_does_not_read(vol_target: bool) -> None:
    """A portfolio spec without its volatility target never reads ``target_vol``: moving it
    would be a new trial key with the parent's very trades (a wasted Backtrader run)."""
    base = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM)
    spec = base.model_copy(update={"parameters": base.parameters | {"vol_target": vol_target}})
    moved = {
        name
        for s in tune(spec, 40, rng=random.Random(1), seen=set())
        for name in s.parameters
        if s.parameters[name] != spec.parameters[name]
    }
    assert ("target_vol" in moved) == vol_target
    assert moved - {"target_vol"}  # the parameters it reads still move
    assert inert_params(spec) == (frozenset() if vol_target else frozenset({"target_vol"}))


def test_tune_is_deterministic_and_named() -> None:
    spec = default_spec(Family.TREND)
    a = tune(spec, 6, rng=random.Random(7), seen=set())
    b = tune(spec, 6, rng=random.Random(7), seen=set())
    assert a == b
    for s in a:
        assert " | tune " in s.name and "->" in s.name
        assert_valid(s)


def test_tune_exhausts_gracefully() -> None:
    spec = default_spec(Family.MOMENTUM)
    out = tune(spec, 5, rng=random.Random(0), seen=set())
    assert len(out) == 5
    assert tune(
        spec.model_copy(update={"parameters": {}, "exits": [], "filters": []}),
        3,
        rng=random.Random(0),
        seen=set(),
    )  # reconcile restores the entry's params


@pytest.mark.parametrize("family", list(Family))
@pytest.mark.parametrize("problem", ["zero_trades", "too_few_trades"])
def test_fix_trade_count_loosens(family: Family, problem: str) -> None:
    spec = default_spec(family)
    fixed = fix(spec, problem, rng=random.Random(0), seen={spec.trial_key()})
    assert fixed.trial_key() != spec.trial_key()
    assert f"fix {problem}" in fixed.name
    assert_valid(fixed)
    lookbacks = [
        p
        for p in ("roc_period", "bb_period", "donchian_period", "fast_period")
        if p in spec.parameters and p in fixed.parameters
    ]
    assert any(fixed.parameters[p] < spec.parameters[p] for p in lookbacks) or (
        len(fixed.filters) < len(spec.filters)
    )


def test_fix_zero_trades_drops_a_filter() -> None:
    spec = default_spec(Family.MOMENTUM)
    fixed = fix(spec, "zero_trades", rng=random.Random(0), seen=set())
    assert "trend_sma" not in fixed.filters and "-trend_sma" in fixed.name


@pytest.mark.parametrize("problem", ["exception", "lookahead"])
def test_fix_rerenders_from_family_defaults(problem: str) -> None:
    spec = default_spec(Family.BREAKOUT)
    broken = spec.model_copy(
        update={"name": "weird", "parameters": {**spec.parameters, "donchian_period": 140}}
    )
    fixed = fix(broken, problem, rng=random.Random(0), seen={broken.trial_key()})
    assert fixed.parameters == spec.parameters and fixed.entry == spec.entry
    assert "family defaults" in fixed.name
    # when the default was already tried, another fresh spec comes back
    again = fix(broken, problem, rng=random.Random(0), seen={spec.trial_key()})
    assert again.trial_key() != spec.trial_key()
    assert_valid(again)


def test_fix_rejects_unknown_problem() -> None:
    with pytest.raises(ValueError):
        fix(default_spec(Family.TREND), "bad_luck", rng=random.Random(0), seen=set())


@pytest.mark.parametrize(
    ("hint", "expect"),
    [
        ("deep_drawdown", lambda s: "atr_stop" in s.exits),
        ("cost_drag", lambda s: "adx" in s.filters),
        ("fold_collapse", lambda s: "vol_regime" in s.filters),
        ("regime_mismatch", lambda s: s.entry == "macd_cross"),
    ],
)
def test_refine_follows_hint(hint: str, expect) -> None:
    spec = default_spec(Family.MOMENTUM)
    refined = refine(spec, failure_hint=hint, rng=random.Random(0), seen=set())
    assert expect(refined), refined
    assert f"refine {hint}" in refined.name
    assert_valid(refined)


@pytest.mark.parametrize("family", list(Family))
@pytest.mark.parametrize("hint", [*HINT_MOVES, "something_else"])
def test_refine_skips_seen_designs(family: Family, hint: str) -> None:
    spec = default_spec(family)
    rng = random.Random(1)
    seen = {spec.trial_key()}
    keys = []
    for _ in range(3):
        refined = refine(spec, failure_hint=hint, rng=rng, seen=seen)
        assert refined.trial_key() not in seen
        seen.add(refined.trial_key())
        keys.append(refined.trial_key())
        assert_valid(refined)
    assert len(set(keys)) == 3


def test_fix_problems_listed() -> None:
    assert set(FIX_PROBLEMS) == {"zero_trades", "too_few_trades", "exception", "lookahead"}


@pytest.mark.parametrize("family", list(Family))
def test_toward_more_trades_moves_only_in_the_signal_direction(family: Family) -> None:
    base = default_spec(family)
    seen = {base.trial_key()}
    out = toward_more_trades(base, 6, rng=random.Random(3), seen=seen)
    assert out, family
    assert len({s.trial_key() for s in out}) == len(out)
    for spec in out:
        assert spec.trial_key() not in seen
        assert "tune toward more trades" in spec.name
        moved = {k for k in base.parameters if spec.parameters[k] != base.parameters[k]}
        assert 1 <= len(moved) <= 2
        for name in moved:
            step = spec.parameters[name] - base.parameters[name]
            want = -1 if name in LOOKBACKS else LOOSER[name]
            assert step * want > 0, (name, base.parameters[name], spec.parameters[name])
            # one grid step (pairs kept ordered may add one more)
            assert abs(step) <= 2 * PARAM_SPACE[name].step + 1e-9
        assert_valid(spec)
    # single moves come first, deterministic for a seed
    assert out == toward_more_trades(base, 6, rng=random.Random(3), seen=seen)
    assert (
        toward_more_trades(
            base,
            100,
            rng=random.Random(3),
            seen=seen
            | {
                s.trial_key()
                for s in toward_more_trades(base, 100, rng=random.Random(3), seen=seen)
            },
        )
        == []
    )
