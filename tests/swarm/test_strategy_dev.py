import random

import pytest

from backtest.contracts import Metrics
from gate.contracts import FailureAnalysis, FailureType, Hint, VariantEvaluation
from strategies.codegen import render
from strategies.families import default_spec
from strategies.spec import Family
from strategies.validate import validate_code
from swarm.agents.strategy_dev import preferred_order, problem_of, propose

pytestmark = pytest.mark.unit


def _metrics(n_trades: int, sharpe: float = 0.5) -> Metrics:
    return Metrics(
        sharpe=sharpe,
        sharpe_per_period=sharpe / 15.87,
        sortino=None,
        cagr_pct=5,
        total_return_pct=10,
        max_drawdown_pct=10,
        win_rate_pct=50,
        profit_factor=1.1,
        n_trades=n_trades,
        exposure_pct=50,
        final_value=110_000,
        n_obs=500,
        skew=0,
        kurtosis=3,
    )


def _ev(vid, family, n_trades=40, score=0.3, errors=0, vetoes=()):
    from gate.contracts import Veto

    kinds = [Veto.LOOKAHEAD for v in vetoes if v.startswith("lookahead detected")]
    return VariantEvaluation(
        variant_id=vid,
        family=family,
        trial_key=vid,
        metrics=_metrics(n_trades),
        n_jobs=4,
        n_errors=errors,
        vetoes=list(vetoes),
        veto_kinds=kinds,
        score=score,
    )


def _common(**kw):
    base = dict(
        n=5,
        rng=random.Random(1),
        seen=set(),
        families=preferred_order(["momentum"], []),
        suggested=None,
        best=None,
        last=[],
        failure=None,
        min_trades=30,
    )
    return base | kw


def test_initial_route_gives_diverse_valid_code_with_the_directive_family_first():
    props = propose(route="INITIAL", **_common())
    assert len(props) == 5
    families = [p.spec.family.value for p in props]
    assert families[0] == "momentum" and len(set(families)) >= 3
    assert len({p.spec.trial_key() for p in props}) == 5
    assert all(validate_code(render(p.spec)).ok for p in props)
    assert all(p.parent_id is None for p in props)


def test_tune_moves_parameters_around_the_best_and_never_repeats_a_trial():
    best = default_spec(Family.MOMENTUM)
    seen = {best.trial_key()}
    props = propose(route="TUNE", **_common(best=("v-best", best), seen=seen))
    assert len(props) == 5
    assert all(p.parent_id == "v-best" for p in props)
    assert all(p.spec.family == Family.MOMENTUM for p in props)
    assert all(p.spec.trial_key() not in seen for p in props)


def test_fix_repairs_the_broken_variants_first():
    broken = default_spec(Family.BREAKOUT)
    healthy = default_spec(Family.TREND)
    last = [(_ev("b", "breakout", n_trades=0), broken), (_ev("h", "trend", score=0.5), healthy)]
    props = propose(route="FIX", **_common(best=("h", healthy), last=last))
    assert props[0].parent_id == "b" and props[0].why == "fix zero_trades"
    assert all(p.parent_id in {"b", "h"} for p in props)


def test_refine_follows_the_failure_hint():
    spec = default_spec(Family.MOMENTUM)
    failure = FailureAnalysis(
        failure_type=FailureType.DESIGN_FLAW,
        root_cause="deep drawdowns",
        confidence=0.7,
        actions=["add stops"],
        hints=[Hint.DEEP_DRAWDOWN],
    )
    props = propose(
        route="REFINE",
        **_common(best=("m", spec), last=[(_ev("m", "momentum"), spec)], failure=failure),
    )
    assert props[0].why == "refine: deep_drawdown"
    assert props[0].spec.trial_key() != spec.trial_key()


@pytest.mark.parametrize(
    ("ev", "problem"),
    [
        (_ev("a", "momentum", vetoes=["lookahead detected"]), "lookahead"),
        (_ev("a", "momentum", errors=3), "exception"),
        (_ev("a", "momentum", n_trades=0), "zero_trades"),
        (_ev("a", "momentum", n_trades=10), "too_few_trades"),
        (_ev("a", "momentum", n_trades=100), None),
    ],
)
def test_problem_of(ev, problem):
    assert problem_of(ev, 30) == problem


def test_research_route_with_every_template_tried_still_spreads_over_families():
    from strategies.families import TEMPLATES, spec_from_template

    seen = {
        spec_from_template(family, i).trial_key()
        for family, templates in TEMPLATES.items()
        for i in range(len(templates))
    }
    props = propose(route="RESEARCH", **_common(seen=seen))
    assert len(props) == 5
    assert len({p.spec.family for p in props}) >= 3
    assert all(p.spec.trial_key() not in seen for p in props)


def test_tune_after_a_trade_floor_near_miss_moves_half_the_slots_toward_more_trades():
    best = default_spec(Family.MOMENTUM)
    failure = FailureAnalysis(
        failure_type=FailureType.PARAMETER_ISSUE,
        root_cause="29 < 30 trades",
        confidence=0.8,
        hints=[Hint.TOO_FEW_TRADES, Hint.NEAR_THRESHOLD],
    )
    props = propose(
        route="TUNE", **_common(best=("v-best", best), seen={best.trial_key()}, failure=failure)
    )
    directed = [p for p in props if p.why.startswith("tune toward more trades")]
    assert len(directed) == 2 and props[:2] == directed
    assert all(p.parent_id == "v-best" for p in props)
    plain = propose(route="TUNE", **_common(best=("v-best", best), seen={best.trial_key()}))
    assert not any(p.why.startswith("tune toward more trades") for p in plain)


def test_problem_of_reads_the_veto_kind_not_the_sentence() -> None:
    # Regression: "lookahead check could not run" was read as lookahead bias (a FIX for it).
    from gate.contracts import VariantEvaluation, Veto
    from swarm.agents.strategy_dev import problem_of

    e = VariantEvaluation(variant_id="v", family="momentum", trial_key="k", metrics=None, n_jobs=4)
    e.veto(Veto.LOOKAHEAD_UNCHECKED, "lookahead check could not run: worker crashed")
    assert problem_of(e, 30) == "zero_trades"
    e.veto(Veto.LOOKAHEAD, "lookahead detected on AAPL")
    assert problem_of(e, 30) == "lookahead"


@pytest.mark.parametrize("named", [["mean_reversion"], ["breakout", "trend"]])
def test_the_directive_families_fill_at_least_half_of_the_first_iteration(named):
    fams = preferred_order(named, ["momentum"])
    for n in (3, 5, 8):
        props = propose(route="INITIAL", **_common(n=n, families=fams), directive_families=named)
        got = [p.spec.family.value for p in props]
        assert len(got) == n
        assert sum(f in named for f in got) * 2 >= n, got
        assert len(set(got)) >= min(n // 2 + 1, 3)  # the rest stay diverse


def test_later_rounds_follow_the_research_order_not_the_directive_quota():
    fams = preferred_order(["mean_reversion"], ["momentum"])
    props = propose(route="RESEARCH", **_common(n=5, families=fams), directive_families=["trend"])
    assert len({p.spec.family.value for p in props}) == 5  # one of each family


def test_refine_keeps_a_third_of_the_slots_for_tuning_the_best():
    # Regression: planted-edge calibration runs refined every family's best each round, the
    # refinements lost the edge, and the near-passing best was never tuned.
    failure = FailureAnalysis(
        failure_type=FailureType.DESIGN_FLAW,
        root_cause="low DSR",
        confidence=0.6,
        actions=["strengthen"],
        hints=[Hint.LOW_DSR],
    )
    fams = [
        Family.MOMENTUM,
        Family.MEAN_REVERSION,
        Family.BREAKOUT,
        Family.TREND,
        Family.VOLATILITY,
    ]
    last = [
        (_ev(f.value, f.value, score=0.8 - 0.1 * i), default_spec(f)) for i, f in enumerate(fams)
    ]
    best = ("mean_reversion", last[1][1])
    props = propose(route="REFINE", **_common(n=5, best=best, last=last, failure=failure))
    whys = [p.why for p in props]
    assert sum(w.startswith("refine") for w in whys) == 3
    assert sum(w == "tune around the best so far" for w in whys) == 2
    assert all(p.parent_id == "mean_reversion" for p in props if p.why.startswith("tune"))


def _failing_drawdown(best_id: str = "xs", attainment: float = 0.555) -> FailureAnalysis:
    from gate.contracts import FailingCriterion

    return FailureAnalysis(
        failure_type=FailureType.PARAMETER_ISSUE,
        root_cause="near miss",
        confidence=0.7,
        hints=[Hint.DRAWDOWN],
        best_variant_id=best_id,
        failing=[
            FailingCriterion(
                label="max_drawdown_pct<=20",
                metric="max_drawdown_pct",
                op="<=",
                threshold=20,
                value=28.9,
                attainment=attainment,
                category=Hint.DRAWDOWN,
            )
        ],
    )


@pytest.mark.parametrize("route", ["TUNE", "REFINE"])
def test_a_drawdown_near_miss_is_repaired_along_the_drawdown_first(route):
    from strategies.portfolio import portfolio_spec
    from strategies.regime import INDEX_REGIME
    from strategies.repair import portfolio_moves
    from swarm.agents.strategy_dev import repair_proposals

    best = portfolio_spec("cross_sectional_momentum")
    out = repair_proposals(
        route=route,
        failure=_failing_drawdown(),
        parent=("xs", best),
        moves=portfolio_moves,
        n=3,
        rng=random.Random(1),
        seen={best.trial_key()},
        regime_filters=(INDEX_REGIME,),
    )
    assert [p.why for p in out] == [
        "repair drawdown: vol_target on",
        f"repair drawdown: +{INDEX_REGIME}",
        "repair drawdown: vol_target on, target_vol 0.15->0.1",
    ]
    assert all(p.parent_id == "xs" for p in out)
    assert out[0].spec.parameters["vol_target"] is True


@pytest.mark.parametrize("route", ["INITIAL", "FIX", "RESEARCH"])
def test_no_repairs_off_the_tune_and_refine_routes_or_without_failing_criteria(route):
    from strategies.portfolio import portfolio_spec
    from strategies.repair import portfolio_moves
    from swarm.agents.strategy_dev import repair_proposals

    best = portfolio_spec("cross_sectional_momentum")
    common = dict(parent=("xs", best), moves=portfolio_moves, n=3, rng=random.Random(1), seen=set())
    assert repair_proposals(route=route, failure=_failing_drawdown(), **common) == []
    no_list = _failing_drawdown().model_copy(update={"failing": []})
    assert repair_proposals(route="TUNE", failure=no_list, **common) == []
    assert repair_proposals(route="TUNE", failure=None, **common) == []
