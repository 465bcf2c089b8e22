"""The failure analysis names the criteria the best fails, by how much, and what repairs each."""

from __future__ import annotations

import pytest
from gate_builders import make_eval, make_metrics

from gate.alpha import AlphaStats
from gate.contracts import FailureAnalysis, FailureType, Hint
from gate.criteria import parse_criteria
from gate.failure import analyse_failure, criterion_category

pytestmark = pytest.mark.unit

# The README command's criteria (the default alpha_t rule included).
CRITERIA = parse_criteria("sharpe>=1.0,max_drawdown_pct<=20,alpha_t>=2,min_trades>=30")


def _analyse(evals, criteria=CRITERIA):
    return analyse_failure(
        list(evals),
        criteria=criteria,
        history=[],
        research_confidence=0.8,
        regime="trending-up",
        families=["cross_sectional_momentum"],
    )


def _xs_momentum(drawdown: float = 28.9, **m):
    """The README case: cross-sectional momentum, alpha 25.8 %/yr at HAC t 3.16, SPA p 0.003."""
    e = make_eval(
        "i02-v01-xs",
        "cross_sectional_momentum",
        metrics=make_metrics(sharpe=1.4, max_drawdown_pct=drawdown, **m),
        score=0.55,
        dsr=0.97,
        spa_pvalue=0.003,
    )
    e.alpha = AlphaStats(
        benchmark="buy-and-hold",
        n_obs=750,
        alpha_annual_pct=25.8,
        beta=0.4,
        t_stat=3.16,
        deflated_alpha=0.97,
    )
    return e


@pytest.mark.parametrize(
    ("metric", "hint"),
    [
        ("max_drawdown_pct", Hint.DRAWDOWN),
        ("alpha_t", Hint.LOW_ALPHA),
        ("beta", Hint.LOW_ALPHA),
        ("deflated_alpha", Hint.LOW_ALPHA),
        ("n_trades", Hint.TOO_FEW_TRADES),
        ("turnover_annual", Hint.COST_DRAG),
        ("win_rate_pct", Hint.WEAK_EXITS),
        ("profit_factor", Hint.WEAK_EXITS),
        ("sharpe", None),
        ("cagr_pct", None),
    ],
)
def test_criterion_category(metric, hint) -> None:
    assert criterion_category(metric) == hint


def test_a_best_failing_only_drawdown_lists_exactly_that_criterion_and_the_drawdown_hint() -> None:
    f = _analyse([_xs_momentum()])
    assert [c.label for c in f.failing] == ["max_drawdown_pct<=20"]
    (dd,) = f.failing
    assert dd.value == pytest.approx(28.9) and dd.threshold == 20 and dd.op == "<="
    assert dd.attainment == pytest.approx(2 - 28.9 / 20) and dd.attainment < 1
    assert dd.category == Hint.DRAWDOWN and Hint.DRAWDOWN in f.hints
    assert f.best_variant_id == "i02-v01-xs"
    # Not 1.5x the limit: no structural defect, a near-enough miss is not a deep drawdown.
    assert Hint.DEEP_DRAWDOWN not in f.hints


def test_a_deep_drawdown_keeps_its_design_hint_first_and_adds_the_category_after() -> None:
    f = _analyse([_xs_momentum(drawdown=35.0)])
    assert f.failure_type == FailureType.DESIGN_FLAW
    assert f.hints.index(Hint.DEEP_DRAWDOWN) < f.hints.index(Hint.DRAWDOWN)


def test_failing_criteria_are_worst_first_with_their_categories() -> None:
    criteria = parse_criteria("sharpe>=1.0,max_drawdown_pct<=20,win_rate_pct>=40,min_trades>=30")
    e = make_eval(
        "a",
        metrics=make_metrics(sharpe=0.9, max_drawdown_pct=21, win_rate_pct=25, n_trades=24),
        score=0.3,
        dsr=0.5,
    )
    f = _analyse([e], criteria)
    assert [c.label for c in f.failing] == [
        "win_rate_pct>=40",  # 0.625
        "min_trades>=30",  # 0.8
        "sharpe>=1",  # 0.9
        "max_drawdown_pct<=20",  # 0.95
    ]
    assert [c.category for c in f.failing] == [
        Hint.WEAK_EXITS,
        Hint.TOO_FEW_TRADES,
        None,
        Hint.DRAWDOWN,
    ]
    assert {Hint.WEAK_EXITS, Hint.TOO_FEW_TRADES, Hint.DRAWDOWN} <= set(f.hints)


def test_alpha_t_failing_is_a_low_alpha_hint_and_not_a_market_exposure_route_signal() -> None:
    e = _xs_momentum(drawdown=12.0)
    e.alpha = e.alpha.model_copy(update={"t_stat": 1.5, "beta": 0.1})
    f = _analyse([e])
    assert [c.label for c in f.failing] == ["alpha_t>=2"]
    assert f.failing[0].value == pytest.approx(1.5)
    assert Hint.LOW_ALPHA in f.hints and Hint.MARKET_EXPOSURE not in f.hints


def test_a_best_meeting_every_criterion_lists_none() -> None:
    f = _analyse([_xs_momentum(drawdown=12.0)])
    assert f.failing == []


def test_old_records_without_the_failing_list_still_load() -> None:
    old = {"failure_type": "DESIGN_FLAW", "root_cause": "x", "confidence": 0.5, "hints": []}
    f = FailureAnalysis.model_validate(old)
    assert f.failing == [] and f.best_variant_id is None


def test_a_measured_edge_missing_only_the_drawdown_is_repaired_not_sent_to_research() -> None:
    # Weak research (0.2) alone would blame the premise; the measured alpha (t 3.16) says tune
    # it along what failed.
    f = analyse_failure(
        [_xs_momentum()],
        criteria=CRITERIA,
        history=[],
        research_confidence=0.2,
        regime="range-bound",  # momentum "fights" it: a label, against a measured edge
        families=["momentum"],
    )
    assert f.failure_type == FailureType.PARAMETER_ISSUE
    assert "alpha t 3.16" in f.root_cause and "max_drawdown_pct<=20 at 28.90" in f.root_cause
    assert f.actions[0].startswith("repair i02-v01-xs along what failed")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"t_stat": 1.2}, "no measured edge"),
        ({"benchmark": "cash"}, "alpha over cash is no edge"),
    ],
)
def test_without_a_measured_edge_the_premise_is_still_blamed(change, why) -> None:
    e = _xs_momentum()
    e.alpha = e.alpha.model_copy(update=change)
    e.dsr = 0.5
    f = analyse_failure(
        [e],
        criteria=CRITERIA,
        history=[],
        research_confidence=0.2,
        regime="trending-up",
        families=["cross_sectional_momentum"],
    )
    assert f.failure_type == FailureType.RESEARCH_GAP, why


def test_a_failing_criterion_without_a_repair_is_not_a_repairable_edge() -> None:
    e = _xs_momentum()
    e.metrics = e.metrics.model_copy(update={"sharpe": 0.8})
    f = analyse_failure(
        [e],
        criteria=CRITERIA,
        history=[],
        research_confidence=0.2,
        regime="trending-up",
        families=["cross_sectional_momentum"],
    )
    assert f.failure_type == FailureType.RESEARCH_GAP
    assert {c.label for c in f.failing} == {"sharpe>=1", "max_drawdown_pct<=20"}
