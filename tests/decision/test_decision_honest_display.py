"""Issue 28, item 6: honest grading and display. A HOLD is never graded as a trade and never
shows trade levels; the quorum says how many analysts took a side; a legend defines every
unit; reviews carry P&L in currency, thesis vs outcome and all five signal-evolution states;
abstentions carry seed 002's confidence; expectation gaps are filled where one exists."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import corpus_bars

from swarm.analyze.analysts import expectation_gap, forecast_gap, quorum
from swarm.analyze.contracts import (
    ABSTAIN_CONFIDENCE,
    ABSTAIN_MODEL,
    Action,
    AnalysisConfig,
    AnalystNote,
    AnalystRole,
    Direction,
    Outcome,
    OutcomeTag,
    Status,
    TraderThesis,
)
from swarm.analyze.pipeline import decide
from swarm.analyze.report import LEGEND, render_report, render_review
from swarm.analyze.review import (
    classify,
    review_decision,
    stand_aside_state,
    trade_state,
)
from swarm.analyze.trader import validate
from swarm.research.features import FeatureBundle

M, S, N, F = AnalystRole.MARKET, AnalystRole.SENTIMENT, AnalystRole.NEWS, AnalystRole.FUNDAMENTALS


def note(role, stance=0.0, conf=0.5, abstained=False):
    return AnalystNote(
        role=role,
        ticker="XYZ",
        as_of="2020-01-02",
        stance=stance,
        confidence=ABSTAIN_CONFIDENCE if abstained else conf,
        summary="s",
        abstained=abstained,
    )


# --------------------------------------------------------------------------- pure rules


@pytest.mark.unit
@pytest.mark.parametrize(
    ("outcome", "r_end", "tag"),
    [
        (Outcome.WIN, 2.0, OutcomeTag.REALIZED),
        (Outcome.LOSS, -1.0, OutcomeTag.FALSIFIED),
        (Outcome.SCRATCH, 0.4, OutcomeTag.STRENGTHENED),
        (Outcome.SCRATCH, 0.0, OutcomeTag.WEAKENED),
        (Outcome.SCRATCH, -0.4, OutcomeTag.WEAKENED),
        (Outcome.SCRATCH, float("nan"), OutcomeTag.UNKNOWN),
    ],
)
def test_trade_state_table(outcome, r_end, tag):
    assert trade_state(outcome, r_end) == tag


@pytest.mark.unit
@pytest.mark.parametrize(
    ("move_atr", "lean", "tag"),
    [
        (1.5, Direction.LONG, OutcomeTag.REALIZED),  # within 2 ATR: standing aside cost nothing
        (-2.0, Direction.FLAT, OutcomeTag.REALIZED),
        (3.0, Direction.LONG, OutcomeTag.FALSIFIED),  # the hold missed the move it leaned to
        (-3.0, Direction.SHORT, OutcomeTag.FALSIFIED),
        (-3.0, Direction.LONG, OutcomeTag.STRENGTHENED),  # the hold avoided a move against it
        (3.0, Direction.FLAT, OutcomeTag.WEAKENED),  # a move nobody called
        (float("nan"), Direction.LONG, OutcomeTag.UNKNOWN),
    ],
)
def test_stand_aside_state_table(move_atr, lean, tag):
    assert stand_aside_state(move_atr, lean) == tag


@pytest.mark.unit
def test_every_state_is_reachable():
    states = {
        trade_state(o, r)
        for o, r in [
            (Outcome.WIN, 2),
            (Outcome.LOSS, -1),
            (Outcome.SCRATCH, 0.5),
            (Outcome.SCRATCH, -0.5),
            (Outcome.SCRATCH, math.nan),
        ]
    }
    assert states == set(OutcomeTag)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("notes", "answered", "sided", "met"),
    [
        # Three abstentions around one technical call: 4/4 answered, 1 took a side.
        (
            [
                note(M, -0.5),
                note(S, abstained=True),
                note(N, abstained=True),
                note(F, abstained=True),
            ],
            4,
            1,
            True,
        ),
        ([note(M, 0.5), note(S, -0.3), note(N, 0.02), note(F, abstained=True)], 4, 2, True),
        ([note(M, 0.5, conf=0.0), note(N, abstained=True)], 2, 0, False),
    ],
)
def test_quorum_counts_the_analysts_that_took_a_side(notes, answered, sided, met):
    q = quorum(notes)
    assert (q.notes, q.sided, q.met) == (answered, sided, met)


@pytest.mark.unit
def test_expectation_gap_is_the_eps_surprise_when_one_exists():
    assert expectation_gap({"surprises_latest_pct": 0.042, "RSI_14": 50.0}) == 0.042
    assert expectation_gap({"RSI_14": 50.0}) is None


@pytest.mark.unit
def test_forecast_gap_is_the_close_vs_the_forecast_made_for_today():
    n = 30
    idx = pd.bdate_range("2020-01-01", periods=n)
    mid = np.full(n, np.nan)
    mid[n - 11] = 100.0  # the band's mid made 10 bars ago, for today
    close = np.full(n, 103.0)
    bundle = FeatureBundle("XYZ", idx, {"CLOSE": close, "FORECAST_MID_60_10": mid})
    assert forecast_gap(bundle) == pytest.approx(0.03)
    mid[n - 11] = np.nan  # no forecast that old: no expectation
    assert forecast_gap(bundle) is None


# --------------------------------------------------------------------------- on the corpus


@pytest.fixture(scope="module")
def nvda() -> pd.DataFrame:
    return corpus_bars("NVDA")


@pytest.fixture(scope="module")
def sell(nvda):
    return decide("NVDA", "2019-06-03", nvda, AnalysisConfig())


def _after(rows):
    idx = pd.bdate_range("2019-06-04", periods=len(rows), name="date")
    return pd.DataFrame(rows, columns=["open", "high", "low", "close", "volume"], index=idx)


def _long(entry=100.0, atr=2.0, horizon=3):
    t = TraderThesis(
        direction=Direction.LONG,
        entry=entry,
        stop=entry - 2 * atr,
        target=entry + 4 * atr,
        atr=atr,
        atr_period=14,
        horizon_days=horizon,
        rationale="long at 100.00, stop 96.00, target 108.00",
    )
    return validate(t, max_stop_atr=4)


@pytest.mark.integration
def test_abstentions_and_expectation_gaps_on_a_real_decision(sell, nvda):
    abstained = [n for n in sell.analysts if n.abstained]
    assert abstained and all(
        n.confidence == ABSTAIN_CONFIDENCE == 0.15 and n.model_used == ABSTAIN_MODEL
        for n in abstained
    )
    market = sell.analysts[0]
    assert market.role == M and market.expectation_gap is not None
    cut = nvda.loc[:"2019-06-03"]
    drift = np.log(cut["close"]).diff().iloc[-70:-10].mean()  # the 60-bar drift then
    expected = cut["close"].iloc[-11] * math.exp(drift * 10)
    assert market.expectation_gap == pytest.approx(cut["close"].iloc[-1] / expected - 1, abs=1e-5)


@pytest.mark.integration
def test_a_hold_is_never_graded_as_a_trade(sell, nvda):
    # A judged HOLD that kept a valid long thesis; the stop is hit on the first bar.
    hold = sell.model_copy(
        update={
            "action": Action.HOLD,
            "trader": _long(),
            "reason": "Only 1 of 3 risk analysts favour BUY.",
        }
    )
    rows = [(100, 101, 95.5, 96, 1), (96, 97, 95, 96, 1), (96, 97, 95, 96, 1)]
    po = classify(hold, _after(rows))
    assert po.outcome == Outcome.STOOD_ASIDE and po.r_multiple is None and po.pnl == 0
    assert po.tag == OutcomeTag.REALIZED  # -2 ATR: within the stand-aside band
    rv = review_decision(hold, pd.concat([nvda.loc[:"2019-06-03"], _after(rows)]))
    assert rv.direction == Direction.FLAT and rv.size == 0 and rv.pnl == 0
    assert rv.r_multiple is None and rv.outcome != Outcome.LOSS
    assert "untraded long would have ended a loss (-1.00R)" in rv.result
    text = render_review(rv)
    assert "R multiple" not in text and "| P&L | 0.00 (no trade) |" in text
    assert "96.00" not in rv.thesis and "108.00" not in rv.thesis


@pytest.mark.integration
def test_a_hold_shows_no_levels_and_the_quorum_says_who_took_a_side(sell):
    hold = sell.model_copy(
        update={
            "action": Action.HOLD,
            "status": Status.OK,
            "reason": "Only 1 of 3 risk analysts favour SELL.",
        }
    )
    t = sell.trader
    text = render_report(hold)
    assert "Entry / stop / target" not in text and "Direction" not in text.split("## ")[1]
    assert f"{t.stop:.2f}" not in text.split("## Risk team")[0]
    assert "not traded (HOLD)" in text
    q = sell.quorum
    assert f"{q.notes}/{q.expected} answered, {q.sided} took a side" in text
    assert q.sided == sum(not n.abstained and abs(n.stance) > 0.05 for n in sell.analysts)
    # The order screen of the traded decision still shows its levels.
    assert "Entry / stop / target" in render_report(sell)


@pytest.mark.integration
def test_the_legend_defines_every_unit_on_screen(sell, nvda):
    text = render_report(sell)
    legend = text[text.index("## Legend") :]
    for unit in (
        "stance",
        "confidence",
        "conviction",
        "opposition",
        "took a side",
        "R",
        "ATR14",
        "expectation gap",
        "risk %",
        "P&L",
    ):
        assert f"**{unit}**" in legend
    assert {k for k, _ in LEGEND} <= {
        line.split("**")[1] for line in legend.splitlines() if line.startswith("- **")
    }
    rows = [(133, 134, 120, 121, 1)] * 10
    rv = review_decision(sell, pd.concat([nvda.loc[:"2019-06-03"], _after(rows)]))
    assert "## Legend" in render_review(rv) and "| P&L |" in render_review(rv)
