"""Rounds that matter (issue 28 item 5): two debate rounds by default; a rebuttal at least as
strong as the point it answers rebuts it and moves its analyst's stance, so the verdict can
move; from round 2 the risk team reacts to the last round, so a round can move a vote."""

from __future__ import annotations

import math

import pytest

from strategies.families import DECISION_PARAMS
from swarm.analyze.__main__ import build_parser
from swarm.analyze.contracts import (
    Action,
    AnalysisConfig,
    AnalystNote,
    AnalystRole,
    DebateVerdict,
    Direction,
    Point,
    RiskStance,
    Side,
    TraderThesis,
)
from swarm.analyze.debate import debate_rounds, debated_stance, manage, rebuts, rebutted_points
from swarm.analyze.risk import judge, majority, team
from swarm.analyze.trader import validate

pytestmark = pytest.mark.unit


def pt(name: str, stance: float, conf: float) -> Point:
    return Point(name=name, stance=stance, confidence=conf, text=name)


def note(role: AnalystRole, stance: float, conf: float, *points: Point) -> AnalystNote:
    return AnalystNote(
        role=role,
        ticker="XYZ",
        as_of="2020-01-02",
        stance=stance,
        confidence=conf,
        summary="s",
        points=list(points),
    )


def test_two_debate_rounds_by_default():
    assert AnalysisConfig().debate_rounds == 2
    assert build_parser().parse_args([]).debate_rounds == 2
    assert DECISION_PARAMS["debate_rounds"] == 2


@pytest.mark.parametrize(
    ("reply", "target", "won"),
    [
        (pt("a", 0.8, 0.6), pt("b", -0.5, 0.5), True),
        (pt("a", 0.5, 0.5), pt("b", -0.5, 0.5), True),  # as strong: rebutted
        (pt("a", 0.4, 0.5), pt("b", -0.8, 0.5), False),
        (pt("a", 0.9, 0.1), pt("b", -0.2, 0.5), False),  # |stance| x confidence, not stance
    ],
)
def test_rebuts_table(reply, target, won):
    assert rebuts(reply, target) is won


def test_a_rebutted_point_moves_its_analyst_s_stance():
    n = note(AnalystRole.MARKET, 0.3, 0.5, pt("trend", 0.8, 0.6), pt("rsi", -0.4, 0.4))
    assert debated_stance(n) == 0.3
    # The bearish point (40% of the confidence) falls: half its pull leaves the stance.
    assert math.isclose(debated_stance(n, frozenset({"market/rsi"})), 0.3 + 0.5 * 0.4 * 0.4)
    assert math.isclose(debated_stance(n, frozenset({"market/trend"})), 0.3 - 0.5 * 0.8 * 0.6)


def test_a_rebuttal_round_can_move_the_verdict():
    notes = [
        note(AnalystRole.MARKET, 0.3, 0.5, pt("trend", 0.8, 0.6)),
        note(AnalystRole.SENTIMENT, -0.35, 0.5, pt("ratings", -0.5, 0.5)),
    ]
    one = debate_rounds(notes, 1)
    two = debate_rounds(notes, 2)
    assert manage(notes, rounds=one).winner == Side.NONE  # 0.15 vs 0.175: too close
    bull, bear = two[1].bull, two[1].bear
    assert (bull.answered, bull.rebutted) == ("sentiment/ratings", True)
    assert (bear.answered, bear.rebutted) == ("market/trend", False)  # weaker: it stands
    assert rebutted_points(two) == {"sentiment/ratings"}
    verdict = manage(notes, rounds=two)
    assert verdict.winner == Side.BULL and "sentiment/ratings" in verdict.rationale
    # Round 3 answers the next point still standing; none is left on the bear's side.
    assert "no point left standing" in debate_rounds(notes, 3)[2].bull.argument


def _case(conviction: float, opposition: float, natr: float):
    t = TraderThesis(
        direction=Direction.LONG,
        entry=100.0,
        stop=96.0,
        target=108.0,
        atr=2.0,
        atr_period=14,
        horizon_days=10,
        rationale="r",
    )
    v = DebateVerdict(
        winner=Side.BULL,
        rationale="r",
        conviction_proposed=conviction,
        conviction=conviction,
        opposition=opposition,
    )
    return validate(t, max_stop_atr=4.0), v, {"NATR_14": natr, "ADX_14": 20.0}


@pytest.mark.parametrize(
    ("conviction", "opposition", "natr", "one", "two", "risky_two"),
    [
        # Split and volatile, but sure: the risky side answers both concerns, the safe side
        # drops them, the neutral one follows: HOLD -> BUY.
        (0.5, 0.4, 5.0, Action.HOLD, Action.BUY, Action.BUY),
        # Unsure and volatile: the risky side cannot answer the conviction and concedes.
        (0.3, 0.0, 5.0, Action.HOLD, Action.HOLD, Action.HOLD),
        # Unsure only: round 1 already acts, round 2 keeps it (the risky side won the round).
        (0.3, 0.0, 2.0, Action.BUY, Action.BUY, Action.BUY),
        # Sure and calm: nothing to discuss.
        (0.6, 0.0, 2.0, Action.BUY, Action.BUY, Action.BUY),
    ],
)
def test_the_risk_team_reacts_to_the_last_round(conviction, opposition, natr, one, two, risky_two):
    t, v, ev = _case(conviction, opposition, natr)
    r1 = team(t, v, ev, AnalysisConfig(risk_rounds=1))
    r2 = team(t, v, ev, AnalysisConfig(risk_rounds=2))
    assert r2[0] == r1[0]  # round 1 is the same case either way
    assert judge(t, v, r1, AnalysisConfig()).action == one
    assert judge(t, v, r2, AnalysisConfig()).action == two
    assert next(x for x in r2[1].turns if x.stance == RiskStance.RISKY).favours == risky_two


def test_majority_of_a_round():
    t, v, ev = _case(0.5, 0.4, 5.0)
    first = team(t, v, ev, AnalysisConfig(risk_rounds=1))[0]
    assert [x.favours for x in first.turns] == [Action.BUY, Action.HOLD, Action.HOLD]
    assert majority(first) == Action.HOLD
