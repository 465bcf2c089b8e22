"""A RESEARCH round reorders the families by this run's gate verdicts."""

from __future__ import annotations

import pytest

from gate.contracts import GateDecision, Route, VariantEvaluation
from swarm.research.feedback import rerank, run_outcomes

pytestmark = pytest.mark.unit


def _ev(vid: str, family: str, score: float, passed: bool = False) -> VariantEvaluation:
    return VariantEvaluation(
        variant_id=vid, family=family, trial_key=vid, metrics=None, score=score, passed=passed
    )


def _decision(iteration: int, *evs: VariantEvaluation) -> dict:
    return GateDecision(
        iteration=iteration, decision=Route.REFINE, best_variant_id=None,
        evaluations=list(evs), reasoning="test",
    ).model_dump(mode="json")  # fmt: skip


def test_run_outcomes_counts_variants_once_and_keeps_the_best_score() -> None:
    decisions = [
        _decision(1, _ev("a", "momentum", 0.4), _ev("b", "trend", 0.7)),
        _decision(2, _ev("c", "momentum", 0.8), _ev("a", "momentum", 0.4)),  # a re-evaluated
    ]
    tracks = run_outcomes(decisions)
    assert set(tracks) == {"momentum", "trend"}
    m = tracks["momentum"]
    assert (m.n_variants, m.n_passed, m.best_score, m.best_variant, m.best_iteration) == (
        2, 0, 0.8, "c", 2,
    )  # fmt: skip
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
        ]  # fmt: skip
    )
    families, _ = rerank(["trend", "momentum", "breakout"], tracks)
    assert families == ["breakout", "trend", "momentum"]


def test_no_decisions_changes_nothing() -> None:
    families, notes = rerank(["momentum", "trend"], run_outcomes([]))
    assert families == ["momentum", "trend"] and notes == []
