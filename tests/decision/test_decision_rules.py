"""Pure decision rules of the pipeline, table-tested: quorum, conviction calibration, the
thesis validator, the risk engine's checks and its sizing formula."""

from __future__ import annotations

import math

import pytest

from swarm.analyze.analysts import quorum
from swarm.analyze.contracts import (
    AnalysisConfig,
    AnalystNote,
    AnalystRole,
    CheckName,
    Direction,
    Portfolio,
    RiskLimits,
    Side,
    TraderThesis,
)
from swarm.analyze.debate import calibrate_conviction, haircut, opposition_share
from swarm.analyze.risk import position_size, risk_engine
from swarm.analyze.trader import anchored_prices, validate

pytestmark = pytest.mark.unit


def note(role: AnalystRole, stance: float = 0.0, conf: float = 0.5, abstained: bool = False):
    return AnalystNote(
        role=role,
        ticker="XYZ",
        as_of="2020-01-02",
        stance=stance,
        confidence=0.0 if abstained else conf,
        summary="s",
        abstained=abstained,
    )


M, S, N, F = AnalystRole.MARKET, AnalystRole.SENTIMENT, AnalystRole.NEWS, AnalystRole.FUNDAMENTALS


# --------------------------------------------------------------------------- quorum


@pytest.mark.parametrize(
    ("notes", "failed", "met"),
    [
        ([note(M), note(S), note(N), note(F)], [], True),
        (
            [note(M), note(S, abstained=True), note(N, abstained=True), note(F, abstained=True)],
            [],
            True,
        ),
        ([note(M), note(N), note(F, abstained=True)], [S], True),  # 3 of 4
        ([note(M), note(F, abstained=True)], [S, N], False),  # 2 of 4: DEGRADED
        ([], [M, S, N, F], False),
    ],
)
def test_quorum_counts_abstentions_not_failures(notes, failed, met):
    q = quorum(notes, failed=failed)
    assert q.met is met
    assert q.notes == len(notes) and q.abstained == sum(n.abstained for n in notes)
    assert q.failed == sorted(failed)


# --------------------------------------------------------------------------- conviction


@pytest.mark.parametrize(
    ("proposed", "opposition", "expected"),
    [
        (0.8, 0.0, 0.8),  # nobody opposes: unchanged
        (0.8, 1.0, 0.32),  # full opposition: the 60% haircut
        (0.8, 0.5, 0.56),
        (1.0, 0.25, 0.85),
        (0.5, 2.0, 0.2),  # opposition is clamped to 1
        (1.3, 0.0, 1.0),  # conviction is clamped to 1
        (0.0, 1.0, 0.0),
    ],
)
def test_haircut_table(proposed, opposition, expected):
    assert math.isclose(haircut(proposed, opposition), expected, abs_tol=1e-12)


# AAPL 2020-03-16 (benzinga analyst-ratings headlines): market bearish, sentiment bullish,
# news neutral, fundamentals abstaining. One of the two analysts that took a side opposes
# the bear: 50%, where counting every note's confidence gave 17%.
AAPL_2020_03_16 = [
    note(M, -0.539, 0.559),
    note(S, 0.455, 0.183),
    note(N, -0.008, 0.321),
    note(F, abstained=True),
]


@pytest.mark.parametrize(
    ("notes", "winner", "opposition"),
    [
        ([note(M, 0.6, 0.5), note(N, 0.2, 0.5)], Side.BULL, 0.0),
        ([note(M, 0.6, 0.6), note(N, -0.4, 0.2)], Side.BULL, 0.5),  # 1 of 2 sided, not 0.2 of 0.8
        ([note(M, -0.6, 0.5), note(N, -0.2, 0.5)], Side.BULL, 1.0),  # full opposition
        ([note(M, 0.6, 0.5), note(N, -0.03, 0.5)], Side.BULL, 0.0),  # inside the dead band
        ([note(M, 0.6, 0.5), note(S, abstained=True)], Side.BEAR, 1.0),  # abstentions: not sided
        ([note(M, 0.6, 0.5), note(S, 0.3, 0.0)], Side.BEAR, 1.0),  # no confidence: not sided
        ([note(M, 0.6, 0.9), note(S, 0.3, 0.2), note(N, -0.5, 0.1)], Side.BULL, 1 / 3),
        (
            [note(M, 0.6, 0.5), note(S, -0.3, 0.5), note(N, 0.0, 0.9), note(F, abstained=True)],
            Side.BULL,
            0.5,
        ),  # a neutral, confident note does not dilute the split
        (AAPL_2020_03_16, Side.BEAR, 0.5),
        ([note(M, 0.6, 0.5)], Side.NONE, 0.0),
        ([note(M, 0.01, 0.5), note(S, abstained=True)], Side.BULL, 0.0),  # nobody took a side
    ],
)
def test_opposition_share_table(notes, winner, opposition):
    assert math.isclose(opposition_share(notes, winner), opposition, abs_tol=1e-12)
    calibrated, opp = calibrate_conviction(0.9, notes, winner)
    assert math.isclose(calibrated, 0.9 * (1 - 0.6 * opposition), abs_tol=1e-6)
    assert math.isclose(opp, opposition, abs_tol=1e-6)


def test_full_opposition_cuts_conviction_by_60_percent():
    notes = [note(M, -0.6, 0.5), note(S, -0.2, 0.1), note(N, 0.0, 0.9)]
    assert calibrate_conviction(0.5, notes, Side.BULL) == (0.2, 1.0)
    # AAPL 2020-03-16: the manager's 0.289 becomes 0.202, not 0.259.
    assert calibrate_conviction(0.288977, AAPL_2020_03_16, Side.BEAR) == (0.202284, 0.5)


# --------------------------------------------------------------------------- the thesis


def thesis(direction=Direction.LONG, entry=100.0, stop=96.0, target=108.0, atr=2.0):
    t = TraderThesis(
        direction=direction,
        entry=entry,
        stop=stop,
        target=target,
        atr=atr,
        atr_period=14,
        horizon_days=10,
        rationale="r",
    )
    return validate(t, max_stop_atr=4.0)


def test_anchored_prices_follow_the_formula():
    assert anchored_prices(Direction.LONG, close=100, atr=2, stop_atr=2, reward_risk=2) == (96, 108)
    assert anchored_prices(Direction.SHORT, close=100, atr=2, stop_atr=2, reward_risk=2) == (
        104,
        92,
    )
    assert anchored_prices(Direction.FLAT, close=100, atr=2, stop_atr=2, reward_risk=2) == (
        100,
        100,
    )


@pytest.mark.parametrize(
    ("kwargs", "failing"),
    [
        ({}, set()),
        ({"direction": Direction.SHORT, "stop": 104.0, "target": 92.0}, set()),
        ({"stop": 100.0}, {"stop_not_entry", "stop_side"}),  # stop = entry
        ({"target": 95.0}, {"target_side"}),  # target on the wrong side
        ({"stop": 91.0}, {"stop_within_max_atr"}),  # 4.5 ATR away
        ({"stop": 92.0}, set()),  # exactly 4 ATR: allowed
        ({"direction": Direction.SHORT}, {"stop_side", "target_side"}),
        (
            {"direction": Direction.FLAT, "stop": 100.0, "target": 100.0},
            {"direction", "stop_not_entry", "stop_side", "target_side"},
        ),
        (
            {"atr": float("nan")},
            {"finite_prices", "stop_not_entry", "stop_side", "target_side", "stop_within_max_atr"},
        ),
    ],
)
def test_thesis_validator_fails_closed(kwargs, failing):
    t = thesis(**kwargs)
    assert {c.name for c in t.validator if not c.ok} == failing
    assert t.valid is (not failing)


# --------------------------------------------------------------------------- the risk engine


@pytest.mark.parametrize(
    ("capital", "risk_pct", "entry", "stop", "qty"),
    [
        (100_000, 1.0, 100.0, 96.0, 250),
        (100_000, 1.0, 133.779999, 144.63628986103848, 92),
        (100_000, 0.5, 50.0, 48.5, 333),
        (1_000, 1.0, 100.0, 80.0, 0),  # 10 of risk, 20 a share
        (100_000, 1.0, 100.0, 100.0, 0),
    ],
)
def test_position_size_formula(capital, risk_pct, entry, stop, qty):
    assert position_size(capital=capital, risk_pct=risk_pct, entry=entry, stop=stop) == qty
    if abs(entry - stop) > 0:
        assert qty == math.floor(capital * risk_pct / 100 / abs(entry - stop))


@pytest.mark.parametrize(
    ("cfg", "t", "failed"),
    [
        (AnalysisConfig(), thesis(), []),
        (
            AnalysisConfig(),
            thesis(stop=100.0),
            [CheckName.DEGENERATE_THESIS, CheckName.SIZE_NONZERO],
        ),
        (
            AnalysisConfig(capital=1_000),
            thesis(stop=80.0, atr=6.0, target=140.0),
            [CheckName.SIZE_NONZERO],
        ),
        (
            AnalysisConfig(portfolio=Portfolio(loss_today=1_500)),
            thesis(),
            [CheckName.DAILY_LOSS_CAP],
        ),
        (AnalysisConfig(portfolio=Portfolio(cash=10_000)), thesis(), [CheckName.MARGIN_SUFFICIENT]),
        (
            AnalysisConfig(limits=RiskLimits(max_notional_pct=20)),
            thesis(),
            [CheckName.MAX_NOTIONAL_PCT],
        ),
        (
            AnalysisConfig(portfolio=Portfolio(open_positions=10)),
            thesis(),
            [CheckName.MAX_POSITIONS],
        ),
        (
            AnalysisConfig(portfolio=Portfolio(gross_exposure=80_000)),
            thesis(),
            [CheckName.EXPOSURE_CAP],
        ),
        # A short needs 150% of its notional in cash: 104 x 250 x 1.5 = 39,000.
        (
            AnalysisConfig(portfolio=Portfolio(cash=30_000)),
            thesis(direction=Direction.SHORT, stop=104.0, target=92.0),
            [CheckName.MARGIN_SUFFICIENT],
        ),
    ],
)
def test_risk_engine_one_failed_check_rejects(cfg, t, failed):
    out = risk_engine(t, cfg)
    assert out.failed == failed
    assert out.approved is (not failed)
    assert [c.name for c in out.checks] == list(CheckName)  # every check, in order
    if failed:
        assert out.size == 0 and out.notional == 0
    else:
        assert out.size == position_size(
            capital=cfg.capital, risk_pct=cfg.risk_pct, entry=t.entry, stop=t.stop
        )
        assert math.isclose(out.notional, out.size * t.entry)
