"""Issue 28, item 1: code owns prices and risk. The price forecast is evidence only (no
risk-team rule, risk-engine check or sizing reads it), and the trader's levels are the ATR
anchors whatever brain proposed them, except when the ATR is sub-tick."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import DAILY_DIR

from swarm.analyze import pipeline, risk
from swarm.analyze.contracts import AnalysisConfig, DebateVerdict, Direction, Side, TraderThesis
from swarm.analyze.trader import TICK, anchor, validate
from swarm.research.features import FeatureBundle

FORECAST = ("FORECAST_MID_60_10", "FORECAST_UPPER_60_10", "FORECAST_LOWER_60_10")
CFG = AnalysisConfig()


def _thesis(direction=Direction.LONG, entry=100.0, stop=96.0, target=108.0, atr=2.0):
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


VERDICT = DebateVerdict(winner=Side.BULL, rationale="r", conviction_proposed=0.6, conviction=0.6)


@pytest.mark.unit
def test_the_risk_team_reads_no_forecast():
    ev = {"NATR_14": 2.0, "ADX_14": 30.0, "RSI_14": 50.0}
    # A band projecting far below a long's entry: it once made the safe analyst hold.
    bearish = ev | {
        "FORECAST_MID_60_10": 80.0,
        "FORECAST_LOWER_60_10": 60.0,
        "FORECAST_UPPER_60_10": 90.0,
    }
    assert risk.risk_evidence(bearish) == {"NATR_14": 2.0, "ADX_14": 30.0}
    t = _thesis()
    assert risk.concerns(t, VERDICT, bearish, CFG) == risk.concerns(t, VERDICT, ev, CFG) == []
    assert risk.team(t, VERDICT, bearish, CFG) == risk.team(t, VERDICT, ev, CFG)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("direction", "proposed", "anchored"),
    [
        # The accepted LLM answer of the issue: a 3.9-ATR stop with a 1.1R target.
        (Direction.LONG, (92.2, 108.58), (96.0, 108.0)),
        (Direction.SHORT, (107.8, 91.42), (104.0, 92.0)),
        (Direction.LONG, (96.0, 108.0), (96.0, 108.0)),  # already the anchors: unchanged
    ],
)
def test_anchor_overwrites_the_proposed_levels(direction, proposed, anchored):
    t = _thesis(direction, stop=proposed[0], target=proposed[1])
    out, how = anchor(t.model_copy(update={"entry": 99.0}), close=100.0, cfg=CFG)
    assert (out.entry, out.stop, out.target) == (100.0, *anchored)
    assert not how.kept_proposal and how.changed is (proposed != anchored)
    assert how.event()["kind"] == "trader_anchored"
    assert validate(out, max_stop_atr=CFG.max_stop_atr).valid


@pytest.mark.unit
def test_anchor_keeps_the_proposal_only_when_the_atr_is_sub_tick():
    atr = TICK / 2  # a 2-ATR stop would sit one tick from the entry: not quotable
    t = _thesis(entry=1.0, stop=0.99, target=1.02, atr=atr)
    out, how = anchor(t, close=1.0, cfg=CFG)
    assert how.kept_proposal and (out.stop, out.target) == (0.99, 1.02)
    assert how.event()["kind"] == "trader_subtick_kept"
    # At one tick exactly the anchors apply again.
    out, how = anchor(t.model_copy(update={"atr": TICK}), close=1.0, cfg=CFG)
    assert not how.kept_proposal and out.stop == pytest.approx(1.0 - 2 * TICK)


def _bars(symbol: str) -> pd.DataFrame:
    if not (DAILY_DIR / f"{symbol}.csv").exists():
        pytest.skip("real corpus not found")
    df = pd.read_csv(DAILY_DIR / f"{symbol}.csv", parse_dates=["date"]).set_index("date")
    return df[["open", "high", "low", "close", "volume"]].astype("float64")


def _risk_path(d):
    """Everything the risk path decided: the thesis's levels, every risk-team vote, the
    judge, every engine check, the size, the order."""
    return (
        d.action,
        d.status,
        d.trader
        and (d.trader.direction, d.trader.entry, d.trader.stop, d.trader.target, d.trader.valid),
        [(t.stance, t.favours) for r in d.risk.rounds for t in r.turns],
        d.risk.judge and d.risk.judge.action,
        d.risk.checks,
        d.risk.size,
        d.risk.notional,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("symbol", "dates"),
    [
        # NVDA 2016-02-29 flipped HOLD -> BUY on the forecast alone (issue 28).
        ("NVDA", ["2016-02-29", "2016-03-01", "2018-10-05", "2019-06-03", "2020-03-20"]),
        ("AAPL", ["2014-06-09", "2018-10-01", "2020-03-16"]),
    ],
)
def test_removing_the_forecast_from_the_bundle_changes_no_risk_decision(monkeypatch, symbol, dates):
    bars = _bars(symbol)
    with_forecast = {day: pipeline.decide(symbol, day, bars, CFG) for day in dates}
    real = pipeline.compute_features

    def without_forecast(ticker, cut):
        bundle = real(ticker, cut)
        pipeline.check_history(bundle)  # the history rule is unchanged; then drop the band
        # Undefined, as the bundle says it (NaN): no role can cite or read it.
        data = {k: np.full_like(v, np.nan) if k in FORECAST else v for k, v in bundle.data.items()}
        return FeatureBundle(symbol=bundle.symbol, index=bundle.index, data=data)

    monkeypatch.setattr(pipeline, "compute_features", without_forecast)
    monkeypatch.setattr(pipeline, "check_history", lambda bundle, atr_period=14: None)
    for day in dates:
        barred = pipeline.decide(symbol, day, bars, CFG)
        assert "FORECAST_MID_60_10" not in barred.analysts[0].evidence
        assert "FORECAST_MID_60_10" in with_forecast[day].analysts[0].evidence
        assert _risk_path(barred) == _risk_path(with_forecast[day]), day
