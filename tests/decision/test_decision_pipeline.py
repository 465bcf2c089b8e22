"""The analysis graph end to end on real bars: prices pinned to TA-Lib and the formula, no
lookahead (cutting the data after the date changes nothing), the quorum, news never dated
after the date, the reviewer's outcome classes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import talib
from conftest import corpus_bars

from swarm.analyze.contracts import (
    Action,
    AnalysisConfig,
    AnalystRole,
    Direction,
    Outcome,
    OutcomeTag,
    Status,
    TraderThesis,
)
from swarm.analyze.pipeline import InsufficientHistoryError, cut_at, decide, decision_key
from swarm.analyze.review import HorizonNotPassedError, classify, review_decision
from swarm.analyze.trader import validate
from swarm.research.news import NewsItem

pytestmark = pytest.mark.integration


def bars_of(symbol: str) -> pd.DataFrame:
    return corpus_bars(symbol)


@pytest.fixture(scope="module")
def nvda() -> pd.DataFrame:
    return bars_of("NVDA")


def test_atr_stop_target_and_size_are_pinned_to_talib_and_the_formula(nvda):
    cfg = AnalysisConfig()
    d = decide("NVDA", "2019-06-03", nvda, cfg)
    cut = nvda.loc[:"2019-06-03"]
    atr = talib.ATR(cut["high"].to_numpy(), cut["low"].to_numpy(), cut["close"].to_numpy(), 14)[-1]
    close = cut["close"].iloc[-1]
    t = d.trader
    assert t.atr == atr and t.atr_period == 14 and t.entry == close
    sign = 1 if t.direction == Direction.LONG else -1
    assert t.direction in (Direction.LONG, Direction.SHORT) and t.valid
    assert math.isclose(t.stop, close - sign * 2 * atr, rel_tol=1e-12)
    assert math.isclose(t.target, close + sign * 4 * atr, rel_tol=1e-12)  # 2R
    if d.action != Action.HOLD:
        assert d.risk.size == math.floor(100_000 * 1.0 / 100 / abs(close - t.stop))
        assert math.isclose(d.risk.notional, d.risk.size * close)
        assert d.risk.approved and all(d.risk.checks.values())
    # Pinned figures (NVDA, corpus close 133.779999 on 2019-06-03).
    assert round(atr, 6) == 5.428145 and d.debate.winner.value == "bear"
    assert (d.action, d.risk.size) == (Action.SELL, 92)


@pytest.mark.parametrize(
    ("symbol", "dates"),
    [("NVDA", ["2016-03-01", "2019-06-03", "2020-03-20"]), ("AAPL", ["2014-06-09", "2018-10-01"])],
)
def test_removing_the_data_after_the_date_leaves_the_decision_unchanged(symbol, dates):
    full = bars_of(symbol)
    cfg = AnalysisConfig(debate_rounds=2, risk_rounds=2)
    for day in dates:
        a = decide(symbol, day, full, cfg)
        b = decide(symbol, day, full.loc[:day], cfg)
        assert a.model_dump_json() == b.model_dump_json()
        assert a.data["last_bar"] == day
        # A perturbation after the date does not matter either; one before it does.
        later = full.copy()
        later.loc[later.index > pd.Timestamp(day), "close"] *= 3.0
        assert decide(symbol, day, later, cfg).model_dump_json() == a.model_dump_json()
        assert decision_key(symbol, day, later, cfg, "rules") == decision_key(
            symbol, day, full, cfg, "rules"
        )


def test_graph_end_to_end_fills_every_part_of_decision_json(nvda):
    d = decide("NVDA", "2016-03-01", nvda, AnalysisConfig(debate_rounds=2, risk_rounds=2))
    assert [n.role for n in d.analysts] == list(AnalystRole)
    fundamentals = d.analysts[-1]
    assert fundamentals.abstained and fundamentals.model_used == "deterministic-abstain"
    assert fundamentals.reason and "lookahead" in fundamentals.reason
    market = d.analysts[0]
    assert not market.abstained and market.model_used == "rules"
    # Every number the market note cites is the bundle's value at the date (or derived).
    for key in ("EMA_20", "SWING_HIGH_5", "SWING_LOW_5", "GAP_PCT", "FORECAST_MID_60_10"):
        assert key in market.evidence
    assert d.quorum.met and d.status in (Status.OK, Status.REJECTED)
    assert len(d.debate.rounds) == 2 and len(d.risk.rounds) == 2
    assert all(len(r.turns) == 3 for r in d.risk.rounds)
    assert d.debate.conviction <= d.debate.conviction_proposed + 1e-12
    assert d.risk.judge is not None and d.risk.judge.rationale
    dumped = d.model_dump(mode="json")
    for key in ("ticker", "date", "action", "analysts", "debate", "trader", "risk", "status"):
        assert key in dumped
    for key in (
        "rounds",
        "winner",
        "conviction",
        "conviction_proposed",
        "key_disagreements",
        "falsifiers",
    ):
        assert key in dumped["debate"]
    for key in (
        "direction",
        "entry",
        "stop",
        "target",
        "atr",
        "atr_period",
        "horizon_days",
        "valid",
        "validator",
    ):
        assert key in dumped["trader"]
    for key in ("rounds", "judge", "checks", "size", "capital", "risk_pct", "approved"):
        assert key in dumped["risk"]


def test_two_failed_analysts_degrade_the_decision_to_no_trade(nvda):
    from swarm.analyze.analysts import RULES_ANALYSTS

    def broken(*_):
        raise RuntimeError("feed down")

    analysts = dict(RULES_ANALYSTS) | {AnalystRole.NEWS: broken, AnalystRole.SENTIMENT: broken}
    d = decide("NVDA", "2019-06-03", nvda, AnalysisConfig(), analysts=analysts)
    assert d.status == Status.DEGRADED and d.action == Action.HOLD
    assert d.debate is None and d.trader is None and d.risk.size == 0
    assert d.quorum.notes == 2 and set(d.quorum.failed) == {AnalystRole.NEWS, AnalystRole.SENTIMENT}
    one = dict(RULES_ANALYSTS) | {AnalystRole.NEWS: broken}
    assert (
        decide("NVDA", "2019-06-03", nvda, AnalysisConfig(), analysts=one).status != Status.DEGRADED
    )


def test_too_little_history_is_refused(nvda):
    with pytest.raises(InsufficientHistoryError, match="pick a later date"):
        decide("NVDA", "1999-03-01", nvda, AnalysisConfig())


def test_news_after_the_date_is_never_read(nvda):
    def item(day: str, text: str) -> NewsItem:
        return NewsItem(date=pd.Timestamp(day).date(), ticker="NVDA", headline=text, source="t")

    before = [
        item("2019-05-20", "NVDA upgraded to buy, price target raised"),
        item("2019-05-28", "NVIDIA beats estimates and raises guidance"),
    ]
    after = [item("2019-06-04", "NVDA plunges after downgrade") for _ in range(5)]
    cfg = AnalysisConfig()
    a = decide("NVDA", "2019-06-03", nvda, cfg, news=before)
    b = decide("NVDA", "2019-06-03", nvda, cfg, news=before + after)
    assert a.model_dump_json() == b.model_dump_json()
    news = next(n for n in a.analysts if n.role == AnalystRole.NEWS)
    assert not news.abstained and news.evidence["news_count_30d"] == 2.0
    sentiment = next(n for n in a.analysts if n.role == AnalystRole.SENTIMENT)
    assert not sentiment.abstained and sentiment.stance > 0  # an upgrade and a target raise
    # Headline text never appears in the decision: only counts and scores.
    assert "upgraded to buy" not in a.model_dump_json()


# --------------------------------------------------------------------------- the reviewer


def _with_thesis(decision, direction, entry=100.0, atr=2.0):
    sign = 1 if direction == Direction.LONG else -1
    t = validate(
        TraderThesis(
            direction=direction,
            entry=entry,
            stop=entry - sign * 2 * atr,
            target=entry + sign * 4 * atr,
            atr=atr,
            atr_period=14,
            horizon_days=3,
            rationale="r",
        ),
        max_stop_atr=4,
    )
    return decision.model_copy(update={"trader": t})


def _after(rows):
    idx = pd.bdate_range("2019-06-04", periods=len(rows), name="date")
    return pd.DataFrame(rows, columns=["open", "high", "low", "close", "volume"], index=idx)


@pytest.mark.parametrize(
    ("direction", "rows", "outcome", "tag"),
    [
        (
            Direction.LONG,
            [(100, 101, 99, 100, 1), (100, 108.5, 99, 108, 1), (108, 109, 107, 108, 1)],
            Outcome.WIN,
            OutcomeTag.REALIZED,
        ),
        (
            Direction.LONG,
            [(100, 101, 95.5, 96, 1), (96, 109, 95, 108, 1), (108, 109, 107, 108, 1)],
            Outcome.LOSS,
            OutcomeTag.FALSIFIED,
        ),
        (
            Direction.LONG,
            [(100, 109, 95, 100, 1), (100, 101, 99, 100, 1), (100, 101, 99, 100, 1)],
            Outcome.LOSS,
            OutcomeTag.FALSIFIED,
        ),  # both in one bar: the stop, conservatively
        (
            Direction.LONG,
            [(100, 102, 99, 101, 1), (101, 103, 100, 102, 1), (102, 103, 101, 101, 1)],
            Outcome.SCRATCH,
            OutcomeTag.STRENGTHENED,
        ),  # +0.25R at the horizon: on its way
        (
            Direction.LONG,
            [(100, 102, 99, 101, 1), (101, 101, 98, 99, 1), (99, 100, 98, 99, 1)],
            Outcome.SCRATCH,
            OutcomeTag.WEAKENED,
        ),  # -0.25R at the horizon
        (
            Direction.SHORT,
            [(100, 101, 99, 100, 1), (100, 100, 91.5, 92, 1), (92, 93, 91, 92, 1)],
            Outcome.WIN,
            OutcomeTag.REALIZED,
        ),
        (
            Direction.SHORT,
            [(100, 104.5, 99, 104, 1), (104, 105, 103, 104, 1), (104, 105, 103, 104, 1)],
            Outcome.LOSS,
            OutcomeTag.FALSIFIED,
        ),
    ],
)
def test_reviewer_classifies_from_prices_alone(nvda, direction, rows, outcome, tag):
    base = decide("NVDA", "2019-06-03", nvda, AnalysisConfig())
    d = _with_thesis(base, direction)
    po = classify(d, _after(rows))
    assert po.outcome == outcome
    history = pd.concat([nvda.loc[:"2019-06-03"], _after(rows)])
    rv = review_decision(d, history)
    assert rv.outcome == outcome and rv.tag == tag and rv.critique and rv.lessons
    # P&L in currency: the size traded times the move to the exit, on the thesis's side.
    sign = 1 if direction == Direction.LONG else -1
    assert rv.size == d.risk.size >= 1
    assert rv.pnl == pytest.approx(sign * (rv.exit_price - 100.0) * rv.size)
    assert rv.r_multiple is not None and rv.thesis.startswith(d.action.value)
    with pytest.raises(HorizonNotPassedError):
        classify(d, _after(rows[:2]))


def test_reviewer_judges_a_stand_aside_by_the_move_in_atr(nvda):
    base = decide("NVDA", "2019-06-03", nvda, AnalysisConfig())
    flat = _with_thesis(base, Direction.LONG).trader.model_copy(
        update={"direction": Direction.FLAT, "valid": False}
    )
    d = base.model_copy(update={"trader": flat})
    quiet = [(100, 101, 99, 100 + i, 1) for i in range(3)]
    wild = [(100, 110, 99, 100 + 5 * i, 1) for i in range(3)]
    quiet_po, wild_po = classify(d, _after(quiet)), classify(d, _after(wild))
    assert quiet_po.outcome == wild_po.outcome == Outcome.STOOD_ASIDE
    assert (quiet_po.tag, wild_po.tag) == (OutcomeTag.REALIZED, OutcomeTag.WEAKENED)
    assert quiet_po.r_multiple is None and quiet_po.pnl == 0
    assert np.isfinite(wild_po.move_atr)


def test_cut_at_keeps_the_whole_decision_day():
    idx = pd.DatetimeIndex(["2020-01-02 10:00", "2020-01-02 15:00", "2020-01-03 10:00"])
    df = pd.DataFrame({"close": [1.0, 2.0, 3.0]}, index=idx)
    assert list(cut_at(df, "2020-01-02")["close"]) == [1.0, 2.0]


def test_opposition_counts_only_the_analysts_that_took_a_side():
    """Issue 28, AAPL 2020-03-16 on the real corpus: market bearish, sentiment (analyst
    ratings) bullish, news neutral, fundamentals abstaining -> 1 of 2 sided: 50%."""
    from conftest import SHARED_DATA

    from swarm.research.news import load_news_csv

    path = SHARED_DATA / "news" / "benzinga_analyst_ratings_subset.csv"
    if not path.exists():
        pytest.skip("real corpus not found")
    d = decide("AAPL", "2020-03-16", bars_of("AAPL"), AnalysisConfig(), news=load_news_csv(path))
    sides = {n.role: n.stance for n in d.analysts if not n.abstained}
    assert sides[AnalystRole.MARKET] < -0.05 < 0.05 < sides[AnalystRole.SENTIMENT]
    assert abs(sides[AnalystRole.NEWS]) <= 0.05
    assert d.debate.winner.value == "bear" and d.debate.opposition == 0.5
    assert d.debate.conviction == pytest.approx(d.debate.conviction_proposed * 0.7, abs=1e-6)
