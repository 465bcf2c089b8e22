from __future__ import annotations

import pytest
from gate_builders import ABSOLUTE_CRITERIA_TEXT, make_eval, make_metrics

from gate.contracts import FailureType, Hint, IterationSummary, Route
from gate.criteria import parse_criteria
from gate.failure import analyse_failure

pytestmark = pytest.mark.unit

CRITERIA = parse_criteria(ABSOLUTE_CRITERIA_TEXT)


def _analyse(evals, *, history=(), confidence=0.8, regime="trending-up", families=("momentum",)):
    return analyse_failure(
        list(evals),
        criteria=CRITERIA,
        history=list(history),
        research_confidence=confidence,
        regime=regime,
        families=list(families),
    )


def _ok(vid: str, score: float = 0.3, dsr: float = 0.5, family: str = "momentum", **m):
    return make_eval(vid, family, metrics=make_metrics(**m), score=score, dsr=dsr)


def test_errors_are_algorithm_bug() -> None:
    evals = [
        make_eval("a", n_jobs=4, n_errors=4, errors=["A/fold0 error: NameError: sma"]),
        make_eval("b", n_jobs=4, n_errors=3),
        _ok("c", sharpe=0.9),
    ]
    f = _analyse(evals)
    assert f.failure_type == FailureType.ALGORITHM_BUG
    assert Hint.EXCEPTIONS in f.hints and any("NameError" in x for x in f.evidence)


def test_zero_trades_is_algorithm_bug() -> None:
    evals = [_ok("a", n_trades=0, sharpe=None, win_rate_pct=None, profit_factor=None)]
    f = _analyse(evals)
    assert f.failure_type == FailureType.ALGORITHM_BUG and Hint.ZERO_TRADES in f.hints
    assert any("zero trades over 750 bars" in x for x in f.evidence)


def test_lookahead_is_algorithm_bug() -> None:
    from gate.contracts import Veto

    evals = [
        make_eval(
            "a",
            metrics=make_metrics(sharpe=4.0),
            vetoes=["lookahead detected: x"],
            veto_kinds=[Veto.LOOKAHEAD],
        )
    ]
    f = _analyse(evals)
    assert f.failure_type == FailureType.ALGORITHM_BUG and Hint.LOOKAHEAD in f.hints


def test_near_thresholds_is_parameter_issue() -> None:
    evals = [_ok("a", sharpe=0.85, win_rate_pct=36.0), _ok("b", sharpe=0.2, score=0.1)]
    f = _analyse(evals)
    assert f.failure_type == FailureType.PARAMETER_ISSUE
    assert Hint.NEAR_THRESHOLD in f.hints
    assert any("sharpe>=1 at 0.85" in x for x in f.evidence)


def test_deep_drawdown_is_design_flaw() -> None:
    f = _analyse([_ok("a", sharpe=0.6, max_drawdown_pct=35.0)])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.DEEP_DRAWDOWN in f.hints
    assert any("35.0%" in x for x in f.evidence)


def test_fold_collapse_is_design_flaw() -> None:
    e = _ok("a", sharpe=0.85)
    e.fold_sharpes = [1.8, 1.2, -0.4, -0.9]
    f = _analyse([e])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.FOLD_COLLAPSE in f.hints


def test_cost_drag_is_design_flaw() -> None:
    f = _analyse([_ok("a", sharpe=0.3, n_trades=400, profit_factor=1.02)])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.COST_DRAG in f.hints


def test_criteria_met_but_low_dsr_is_design_flaw() -> None:
    f = _analyse([_ok("a", score=0.85, dsr=0.7)])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.LOW_DSR in f.hints


def test_low_research_confidence_is_research_gap() -> None:
    f = _analyse([_ok("a", sharpe=0.2)], confidence=0.3)
    assert f.failure_type == FailureType.RESEARCH_GAP
    assert any("0.30" in x for x in f.evidence)


def test_regime_mismatch_is_research_gap() -> None:
    f = _analyse(
        [_ok("a", sharpe=0.2, family="mean reversion")],
        regime="trending-up",
        families=["mean-reversion", "Mean_Reversion_RSI"],
    )
    assert f.failure_type == FailureType.RESEARCH_GAP and Hint.REGIME_MISMATCH in f.hints


def test_far_without_signal_falls_back_to_design_flaw() -> None:
    f = _analyse([_ok("a", sharpe=0.2, profit_factor=0.6)])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.FAR_FROM_THRESHOLDS in f.hints


def _hist(i: int, score: float, family: str) -> IterationSummary:
    return IterationSummary(
        iteration=i, route=Route.REFINE, best_variant_id=f"v{i}", family=family, best_score=score
    )


def test_fundamental_impossibility_after_three_iterations() -> None:
    evals = [
        _ok("a", sharpe=0.1, score=0.15, dsr=0.02, family="breakout"),
        _ok("b", sharpe=-0.2, score=0.15, dsr=0.01, family="trend"),
    ]
    hist = [_hist(1, 0.15, "momentum"), _hist(2, 0.16, "mean_reversion")]
    f = _analyse(evals, history=hist)
    assert f.failure_type == FailureType.FUNDAMENTAL_IMPOSSIBILITY
    assert any("best DSR 0.020" in x for x in f.evidence)
    # Two iterations are not enough to give up.
    assert _analyse(evals, history=hist[1:]).failure_type != FailureType.FUNDAMENTAL_IMPOSSIBILITY
    # A meaningful deflated Sharpe is not "impossible" either.
    evals[0].dsr = 0.6
    assert _analyse(evals, history=hist).failure_type != FailureType.FUNDAMENTAL_IMPOSSIBILITY


def test_confidence_in_range_and_actions_present() -> None:
    for evals in ([_ok("a", sharpe=0.85)], [_ok("a", sharpe=0.2)], [make_eval("x", n_errors=4)]):
        f = _analyse(evals)
        assert 0 <= f.confidence <= 1 and f.actions and f.evidence and f.root_cause


def test_far_too_few_trades_is_algorithm_bug_and_few_is_tuning() -> None:
    f = _analyse([_ok("a", n_trades=5)])
    assert f.failure_type == FailureType.ALGORITHM_BUG and Hint.TOO_FEW_TRADES in f.hints
    f = _analyse([_ok("a", n_trades=25, score=0.0)])  # vetoed (25 < 30) but close
    assert f.failure_type == FailureType.PARAMETER_ISSUE and Hint.TOO_FEW_TRADES in f.hints
    assert any("min_trades>=30 at 0.83" in x for x in f.evidence)


def _exposed(vid: str = "a", *, beta: float = 0.6, t: float = 0.4, da: float = 0.2, **kw):
    from gate.alpha import AlphaStats

    e = _ok(vid, **kw)
    e.alpha = AlphaStats(
        benchmark="buy-and-hold",
        n_obs=750,
        alpha_annual_pct=1.0,
        beta=beta,
        t_stat=t,
        deflated_alpha=da,
    )
    return e


def test_market_exposure_is_a_design_flaw_naming_beta_alpha_t_and_deflated_alpha() -> None:
    # A near miss that tuning would chase: the returns are the market's, so REFINE, not TUNE.
    f = _analyse([_exposed(sharpe=0.9)])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.MARKET_EXPOSURE in f.hints
    assert "market exposure" in f.root_cause
    for needle in ("beta 0.60", "HAC t 0.40", "deflated alpha 0.20"):
        assert needle in f.root_cause


@pytest.mark.parametrize(
    ("beta", "t", "da"),
    [(0.1, 0.4, 0.2), (0.8, 2.5, 0.2), (0.8, 0.4, 0.97)],
    ids=["low beta", "significant alpha", "deflated alpha clears"],
)
def test_no_market_exposure_when_beta_low_or_alpha_real(beta, t, da) -> None:
    f = _analyse([_exposed(beta=beta, t=t, da=da, sharpe=0.9)])
    assert Hint.MARKET_EXPOSURE not in f.hints


def test_against_cash_exposure_is_not_judged() -> None:
    e = _exposed(sharpe=0.9)
    e.alpha = e.alpha.model_copy(update={"benchmark": "cash"})
    assert Hint.MARKET_EXPOSURE not in _analyse([e]).hints


def test_criteria_and_dsr_met_but_no_deflated_alpha_is_low_alpha() -> None:
    f = _analyse([_exposed(beta=0.1, t=1.0, da=0.5, score=0.85, dsr=0.97)])
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.LOW_ALPHA in f.hints
    assert "0.50 < 0.95" in " ".join(f.evidence)


def test_everything_met_but_the_reality_check_is_named() -> None:
    e = _exposed(beta=0.1, t=3.0, da=0.99, score=0.85, dsr=0.97)
    e.spa_pvalue = 0.3
    f = _analyse([e])
    assert Hint.REALITY_CHECK in f.hints and "0.300 > 0.05" in " ".join(f.evidence)


def test_low_research_confidence_does_not_blame_a_design_that_scores_above_the_bar() -> None:
    # Regression: planted-edge calibration runs went RESEARCH, RESEARCH, ABANDON in three
    # iterations while their best variant scored 0.66 (> 0.6) with alpha t 2.96.
    f = _analyse([_ok("a", score=0.66, sharpe=0.6, win_rate_pct=30)], confidence=0.3)
    assert f.failure_type == FailureType.DESIGN_FLAW and Hint.LOW_RESEARCH_CONFIDENCE not in f.hints
    weak = _analyse([_ok("a", score=0.3, sharpe=0.6, win_rate_pct=30)], confidence=0.3)
    assert weak.failure_type == FailureType.RESEARCH_GAP


def test_an_unchecked_lookahead_is_not_reported_as_bias() -> None:
    from gate.contracts import Veto

    e = _ok("a", sharpe=0.9)
    e.veto(Veto.LOOKAHEAD_UNCHECKED, "lookahead check could not run: timeout")
    assert Hint.LOOKAHEAD not in _analyse([e]).hints
    biased = _ok("b", sharpe=0.9)
    biased.veto(Veto.LOOKAHEAD, "lookahead detected on AAPL: order 3 differs")
    f = _analyse([biased])
    assert f.failure_type == FailureType.ALGORITHM_BUG and Hint.LOOKAHEAD in f.hints


def test_hints_come_from_the_signals_not_from_words_in_error_messages() -> None:
    # An error text that mentions lookahead or zero trades is an exception, nothing more.
    e = make_eval("a", n_jobs=2, n_errors=2, errors=["A/fold0 error: lookahead; zero trades"])
    f = _analyse([e])
    assert f.hints == [Hint.EXCEPTIONS]
    assert not any(a.startswith("hint:") for a in f.actions)  # prose only, for people
