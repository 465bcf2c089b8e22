"""A RESEARCH round reorders the families by this run's gate verdicts."""

from __future__ import annotations

import pytest

from gate.contracts import GateDecision, Route, VariantEvaluation
from swarm.research.feedback import rerank, revise_suggestion, run_outcomes

pytestmark = pytest.mark.unit


def _ev(vid: str, family: str, score: float, passed: bool = False) -> VariantEvaluation:
    return VariantEvaluation(
        variant_id=vid, family=family, trial_key=vid, metrics=None, score=score, passed=passed
    )


def _decision(iteration: int, *evs: VariantEvaluation) -> dict:
    return GateDecision(
        iteration=iteration,
        decision=Route.REFINE,
        best_variant_id=None,
        evaluations=list(evs),
        reasoning="test",
    ).model_dump(mode="json")


def test_run_outcomes_counts_variants_once_and_keeps_the_best_score() -> None:
    decisions = [
        _decision(1, _ev("a", "momentum", 0.4), _ev("b", "trend", 0.7)),
        _decision(2, _ev("c", "momentum", 0.8), _ev("a", "momentum", 0.4)),  # a re-evaluated
    ]
    tracks = run_outcomes(decisions)
    assert set(tracks) == {"momentum", "trend"}
    m = tracks["momentum"]
    assert (m.n_variants, m.n_passed, m.best_score, m.best_variant, m.best_iteration) == (
        2,
        0,
        0.8,
        "c",
        2,
    )
    assert run_outcomes([GateDecision.model_validate(d) for d in decisions]) == tracks


def test_untried_first_then_closest_to_passing() -> None:
    tracks = run_outcomes(
        [_decision(1, _ev("a", "momentum", 0.3), _ev("b", "trend", 0.7), _ev("c", "breakout", 0.5))]
    )
    families, notes = rerank(["momentum", "breakout", "mean_reversion", "trend"], tracks)
    assert families == ["mean_reversion", "trend", "breakout", "momentum"]
    assert notes[0].startswith("trend: 1 variant(s) tried in this run, 0 passed, best score 0.70")
    assert notes[-1] == "not yet tried in this run, so first: mean_reversion"


def test_a_pass_outranks_scores_and_ties_keep_the_research_order() -> None:
    tracks = run_outcomes(
        [
            _decision(
                1,
                _ev("a", "momentum", 0.5),
                _ev("b", "trend", 0.5),
                _ev("c", "breakout", 0.2, passed=True),
            )
        ]
    )
    families, _ = rerank(["trend", "momentum", "breakout"], tracks)
    assert families == ["breakout", "trend", "momentum"]


def test_the_graded_progress_orders_families_the_floored_fuzzy_score_ties() -> None:
    # Every family's best on the fuzzy floor: the graded progress says which is closest.
    near = _ev("a", "momentum", 0.147).model_copy(update={"progress": 0.9})
    far = _ev("b", "trend", 0.147).model_copy(update={"progress": 0.6})
    farther = _ev("c", "trend", 0.147).model_copy(update={"progress": 0.4})
    tracks = run_outcomes([_decision(1, far, near), _decision(2, farther)])
    assert tracks["trend"].best_variant == "b" and tracks["trend"].best_progress == 0.6
    families, notes = rerank(["trend", "momentum"], tracks)
    assert families == ["momentum", "trend"]
    assert "best score 0.15, progress 0.90 (a, iteration 1)" in notes[0]


def test_no_decisions_changes_nothing() -> None:
    families, notes = rerank(["momentum", "trend"], run_outcomes([]))
    assert families == ["momentum", "trend"] and notes == []


SUGGESTED = {
    "family": "momentum",
    "lookback": 50,
    "bollinger_width": 2.0,
    "stop_loss_pct": 4.0,
    "take_profit_pct": 8.0,
    "max_hold_bars": 20,
    "reasoning": "trending-up",
}


def test_first_round_keeps_the_data_briefs_parameters() -> None:
    assert revise_suggestion(SUGGESTED, ["hint:cost_drag"], 1) == (SUGGESTED, None)


@pytest.mark.parametrize(
    ("hints", "lookback", "hold", "stop", "why"),
    [
        (["hint:too_few_trades", "hint:near_threshold"], 35, 20, 4.0, "too few trades"),
        (["hint:zero_trades"], 30, 20, 4.0, "no trades"),
        (["hint:cost_drag"], 75, 30, 4.0, "costs eat the edge"),
        (["hint:deep_drawdown", "hint:regime_mismatch"], 50, 20, 3.0, "drawdowns"),
        (["hint:fold_collapse"], 75, 20, 4.0, "collapses"),
    ],
)
def test_a_failure_moves_the_horizon_or_the_risk(hints, lookback, hold, stop, why) -> None:
    revised, note = revise_suggestion(SUGGESTED, hints, 2)
    assert (revised["lookback"], revised["max_hold_bars"], revised["stop_loss_pct"]) == (
        lookback,
        hold,
        stop,
    )
    assert why in note and why in revised["reasoning"]
    assert revised["reasoning"].startswith("trending-up; revised in round 2")
    assert revised["family"] == "momentum" and SUGGESTED["lookback"] == 50  # input untouched


def test_no_specific_defect_explores_a_longer_then_a_shorter_horizon() -> None:
    second, _ = revise_suggestion(SUGGESTED, ["hint:low_dsr"], 2)
    third, note = revise_suggestion(SUGGESTED, ["hint:low_dsr"], 3)
    assert (second["lookback"], third["lookback"]) == (100, 25)
    assert "another horizon" in note
    assert revise_suggestion(SUGGESTED | {"lookback": 6}, [], 3)[0]["lookback"] == 5  # floor
