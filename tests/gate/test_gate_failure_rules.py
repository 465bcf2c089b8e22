"""Each rule of the failure analysis on its own: it classifies its case and passes (None) on
the nearest case that is not its own. ``test_gate_failure.py`` tests the rules in order."""

from __future__ import annotations

import pytest
from gate_builders import ABSOLUTE_CRITERIA_TEXT, make_eval, make_metrics

from gate.alpha import AlphaStats
from gate.contracts import FailingCriterion, FailureType, Hint, IterationSummary, Route
from gate.criteria import parse_criteria
from gate.failure import (
    RULES,
    Findings,
    Situation,
    broken_code,
    far_from_everything,
    hedgeable_edge,
    market_exposure,
    met_but_not_beyond_benchmark,
    met_but_not_deflated,
    near_miss,
    no_edge_anywhere,
    structural_defects,
    weak_premise,
)

pytestmark = pytest.mark.unit

CRITERIA = parse_criteria(ABSOLUTE_CRITERIA_TEXT)


def _eval(vid: str = "a", *, score: float = 0.3, dsr: float | None = 0.5, alpha=None, **m):
    e = make_eval(vid, "momentum", metrics=make_metrics(**m), score=score, dsr=dsr)
    e.alpha = alpha
    return e


def _situation(best=None, **kw) -> Situation:
    best = best or _eval()
    base = dict(
        evaluations=[best],
        clean=[best],
        best=best,
        failing={},
        design_hits=0,
        best_dsr=best.dsr or 0.0,
        mismatch=False,
        all_far=False,
        criteria=CRITERIA,
        history=[],
        research_confidence=0.8,
        regime="trending-up",
        families=["momentum"],
    )
    return Situation(**{**base, **kw})


def _alpha(beta: float = 0.6, t: float = 0.4, da: float = 0.2, benchmark: str = "buy-and-hold"):
    return AlphaStats(
        benchmark=benchmark,
        n_obs=750,
        alpha_annual_pct=1.0,
        beta=beta,
        t_stat=t,
        deflated_alpha=da,
    )


def test_rules_run_in_the_documented_order() -> None:
    names = [r.__name__ for r in RULES]
    assert names == [
        "no_edge_anywhere",
        "market_exposure",
        "hedgeable_edge",
        "near_miss",
        "repairable_edge",
        "met_but_not_deflated",
        "met_but_not_beyond_benchmark",
        "weak_premise",
        "structural_defects",
    ]


def test_broken_code() -> None:
    e = _eval()
    f = Findings()
    bugs = {"a": [(Hint.ZERO_TRADES, "a: zero trades over 750 bars")]}
    out = broken_code([e], bugs, [], f)
    assert out is not None and out.failure_type == FailureType.ALGORITHM_BUG
    assert out.hints == [Hint.ZERO_TRADES] and "a: zero trades" in out.evidence[0]
    assert broken_code([e], {"a": []}, [e], Findings()) is None
    assert broken_code([], {}, [], Findings()).root_cause == "no variant was evaluated"


def test_no_edge_anywhere() -> None:
    history = [
        IterationSummary(
            iteration=i, route=Route.REFINE, best_score=0.1, best_variant_id=f"v{i}", family="trend"
        )
        for i in (1, 2)
    ]
    s = _situation(_eval(score=0.1, dsr=0.01), history=history, all_far=True)
    out = no_edge_anywhere(s, Findings())
    assert out is not None and out.failure_type == FailureType.FUNDAMENTAL_IMPOSSIBILITY
    assert Hint.NO_EDGE in out.hints
    assert no_edge_anywhere(s.__class__(**{**s.__dict__, "all_far": False}), Findings()) is None
    assert (
        no_edge_anywhere(_situation(_eval(score=0.1, dsr=0.01), all_far=True), Findings()) is None
    )


def test_market_exposure() -> None:
    out = market_exposure(_situation(_eval(alpha=_alpha())), Findings())
    assert out is not None and out.failure_type == FailureType.DESIGN_FLAW
    assert "beta 0.60" in out.root_cause and Hint.MARKET_EXPOSURE in out.hints
    assert market_exposure(_situation(_eval(alpha=_alpha(t=2.5))), Findings()) is None
    assert market_exposure(_situation(_eval(alpha=_alpha(benchmark="cash"))), Findings()) is None


def test_near_miss() -> None:
    s = _situation(failing={"sharpe>=1": 0.9})
    out = near_miss(s, Findings())
    assert out is not None and out.failure_type == FailureType.PARAMETER_ISSUE
    assert "within 10.0%" in out.root_cause
    assert near_miss(_situation(failing={"sharpe>=1": 0.6}), Findings()) is None
    assert near_miss(_situation(failing={"sharpe>=1": 0.9}, design_hits=1), Findings()) is None
    assert near_miss(_situation(), Findings()) is None  # nothing fails


def test_met_but_not_deflated() -> None:
    out = met_but_not_deflated(_situation(_eval(dsr=0.5)), Findings())
    assert out is not None and Hint.LOW_DSR in out.hints
    assert met_but_not_deflated(_situation(_eval(dsr=0.97)), Findings()) is None
    assert met_but_not_deflated(_situation(_eval(dsr=0.5), failing={"x": 0.9}), Findings()) is None


def test_met_but_not_beyond_benchmark() -> None:
    low_alpha = _situation(_eval(dsr=0.97, alpha=_alpha(beta=0.1, t=1.0, da=0.5)))
    out = met_but_not_beyond_benchmark(low_alpha, Findings())
    assert out is not None and Hint.LOW_ALPHA in out.hints
    luck = _eval(dsr=0.97, alpha=_alpha(beta=0.1, t=3.0, da=0.99))
    luck.spa_pvalue = 0.3
    out = met_but_not_beyond_benchmark(_situation(luck), Findings())
    assert out is not None and Hint.REALITY_CHECK in out.hints
    luck.spa_pvalue = 0.01
    assert met_but_not_beyond_benchmark(_situation(luck), Findings()) is None
    assert met_but_not_beyond_benchmark(_situation(_eval(dsr=0.5)), Findings()) is None


def test_weak_premise() -> None:
    out = weak_premise(_situation(_eval(score=0.3), research_confidence=0.3), Findings())
    assert out is not None and out.failure_type == FailureType.RESEARCH_GAP
    assert Hint.LOW_RESEARCH_CONFIDENCE in out.hints
    above_bar = _situation(_eval(score=0.66), research_confidence=0.3)
    assert weak_premise(above_bar, Findings()) is None
    mismatch = weak_premise(_situation(mismatch=True), Findings())
    assert mismatch is not None and mismatch.confidence == 0.75


def test_structural_defects() -> None:
    f = Findings(hints=[Hint.DEEP_DRAWDOWN])
    out = structural_defects(_situation(design_hits=1), f)
    assert out is not None and out.root_cause.endswith("deep_drawdown")
    assert structural_defects(_situation(), Findings()) is None


def test_far_from_everything_is_the_rest() -> None:
    out = far_from_everything(_situation(), Findings())
    assert out.failure_type == FailureType.DESIGN_FLAW and Hint.FAR_FROM_THRESHOLDS in out.hints


def _deflated_edge(beta: float = 0.5, da: float = 0.99, appraisal: float = 2.5) -> AlphaStats:
    return AlphaStats(
        benchmark="buy-and-hold",
        n_obs=1400,
        alpha_annual_pct=15.0,
        beta=beta,
        t_stat=5.0,
        deflated_alpha=da,
        appraisal_ratio=appraisal,
    )


def test_hedgeable_edge() -> None:
    best = _eval(dsr=0.8, alpha=_deflated_edge(), sharpe=0.9)
    failing = FailingCriterion(
        label="sharpe>=1", metric="sharpe", op=">=", threshold=1.0, value=0.9, attainment=0.9
    )
    f = Findings(failing=[failing])
    out = hedgeable_edge(_situation(best, failing={"sharpe>=1": 0.9}), f)
    assert out is not None and out.failure_type == FailureType.DESIGN_FLAW
    assert Hint.MARKET_EXPOSURE in out.hints and "beta 0.50" in out.root_cause
    # The Sharpe and the DSR both get the hedge repairs, worst first.
    assert [(c.metric, c.category) for c in out.failing] == [
        ("dsr", Hint.MARKET_EXPOSURE),
        ("sharpe", Hint.MARKET_EXPOSURE),
    ]
    assert out.failing[0].attainment == pytest.approx(0.8 / 0.95)
    # Every criterion met but the DSR: the same hedge.
    only_dsr = hedgeable_edge(_situation(_eval(dsr=0.8, alpha=_deflated_edge())), Findings())
    assert only_dsr is not None and [c.metric for c in only_dsr.failing] == ["dsr"]


@pytest.mark.parametrize(
    "alpha",
    [
        _deflated_edge(beta=0.1),  # no market noise in the raw returns
        _deflated_edge(da=0.6),  # the alpha does not survive deflation
        _deflated_edge(appraisal=0.5),  # hedging would not raise the Sharpe
        None,
    ],
)
def test_hedgeable_edge_passes_without_a_deflated_edge_to_hedge(alpha) -> None:
    assert hedgeable_edge(_situation(_eval(dsr=0.8, alpha=alpha)), Findings()) is None


def test_hedgeable_edge_passes_when_a_non_structural_criterion_fails() -> None:
    other = FailingCriterion(
        label="cagr_pct>=10", metric="cagr_pct", op=">=", threshold=10, value=5, attainment=0.5
    )
    s = _situation(_eval(dsr=0.8, alpha=_deflated_edge()), failing={"cagr_pct>=10": 0.5})
    assert hedgeable_edge(s, Findings(failing=[other])) is None
    # Nothing of the raw returns fails: nothing to hedge.
    assert hedgeable_edge(_situation(_eval(dsr=0.97, alpha=_deflated_edge())), Findings()) is None
