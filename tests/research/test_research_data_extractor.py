from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars

from swarm.research.data_extractor import (
    WindowStats,
    brief_symbol,
    build_data_brief,
    classify_window,
    render_data_brief_md,
    window_stats,
)
from swarm.research.models import Regime

SHA = "ab" * 32


def _frame(close: np.ndarray) -> pd.DataFrame:
    idx = pd.bdate_range("2015-01-01", periods=len(close), name="date")
    return pd.DataFrame(
        {
            "open": close,
            "high": close * 1.005,
            "low": close * 0.995,
            "close": close,
            "volume": np.full(len(close), 1e6),
        },
        index=idx,
    )


def synthetic(regime: Regime, n: int = 756, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    noise = rng.normal(0, 0.01, n)
    noise -= noise.mean()  # the drift is then exactly the built-in trend
    if regime == Regime.TRENDING_UP:  # +0.1%/day drift, 1% daily noise
        logp = np.cumsum(0.001 + noise)
    elif regime == Regime.TRENDING_DOWN:
        logp = np.cumsum(-0.001 + noise)
    elif regime == Regime.RANGE_BOUND:  # oscillates +-4% around 100 with 0.5% noise
        logp = 0.04 * np.sin(2 * np.pi * t / 60) + rng.normal(0, 0.005, n)
    else:  # high-vol chop: log price is white noise around 100 (~56% vol, no net move)
        logp = rng.normal(0, 0.025, n)
    return _frame(100 * np.exp(logp))


@pytest.mark.unit
@pytest.mark.parametrize("regime", list(Regime))
@pytest.mark.parametrize("seed", [1, 2, 7])
def test_regime_on_synthetic_series(regime: Regime, seed: int) -> None:
    bars = synthetic(regime, seed=seed)
    b = brief_symbol("SYN", bars, quality=None, sha256=SHA)
    assert b.regime == regime, b.regime_reasoning
    assert 0.5 <= b.regime_confidence <= 0.99
    assert b.recent_bars == 252 and b.regime_reasoning


@pytest.mark.unit
def test_window_rule_boundaries_and_confidence() -> None:
    def ws(r: float, v: float, d: float = 10.0, w: float = 0.2) -> WindowStats:
        return WindowStats(500, r, r, v, d, w)

    assert classify_window(ws(6, 20))[0] == Regime.TRENDING_UP
    assert classify_window(ws(30, 20))[1] > classify_window(ws(6, 20))[1]
    assert classify_window(ws(-6, 20))[0] == Regime.TRENDING_DOWN
    assert classify_window(ws(3, 20))[0] == Regime.RANGE_BOUND
    assert classify_window(ws(8, 55))[0] == Regime.HIGH_VOL_CHOP
    assert classify_window(ws(25, 55))[0] == Regime.TRENDING_UP  # big net move is a trend
    # A deep drawdown keeps the trend label but lowers its confidence.
    assert classify_window(ws(20, 20, d=60))[1] < classify_window(ws(20, 20, d=10))[1]
    # A wide range lowers a range-bound confidence.
    assert classify_window(ws(0, 20, w=1.0))[1] < classify_window(ws(0, 20, w=0.2))[1]


@pytest.mark.unit
def test_window_stats_match_hand_computation() -> None:
    close = np.array([100.0, 110.0, 99.0, 120.0])
    s = window_stats(close)
    assert s.total_return_pct == pytest.approx(20.0)
    assert s.max_drawdown_pct == pytest.approx(10.0)
    rets = np.array([0.1, -0.1, 120 / 99 - 1])
    assert s.annual_volatility_pct == pytest.approx(np.std(rets, ddof=1) * math.sqrt(252) * 100)


@pytest.mark.integration
def test_real_brief_and_universe(daily_dir) -> None:
    briefs = []
    for sym in ("AAPL", "MSFT"):
        bars = read_real_bars(sym, "2012-01-01", "2018-12-31")
        b = brief_symbol(sym, bars, quality={"coverage_pct": 99.0, "gaps": 2}, sha256=SHA)
        assert b.price_high == bars["high"].max() and b.price_low == bars["low"].min()
        assert b.price_median == pytest.approx(bars["close"].median())
        assert b.total_return_pct == pytest.approx(
            100 * (bars["close"].iloc[-1] / bars["close"].iloc[0] - 1)
        )
        assert b.end == "2018-12-31" and b.coverage_pct == 99.0 and b.quality_issues == ["gaps: 2"]
        briefs.append(b)
    brief = build_data_brief(briefs)
    assert brief.regime == Regime.TRENDING_UP  # MSFT 2012-2018: +21%/yr, 20% drawdown
    s = brief.suggested
    assert s.family == "momentum"
    vol = float(np.median([b.recent_volatility_pct for b in briefs]))
    assert s.stop_loss_pct == pytest.approx(round(2.5 * vol / math.sqrt(252), 2))
    assert s.take_profit_pct == pytest.approx(round(2 * s.stop_loss_pct, 2))
    md = render_data_brief_md(brief)
    assert "| AAPL |" in md and "| MSFT |" in md and f"{s.stop_loss_pct:.2f}" in md
    assert f"{briefs[1].total_return_pct:+.1f}" in md


@pytest.mark.unit
def test_universe_vote_is_confidence_weighted() -> None:
    up = brief_symbol("UP", synthetic(Regime.TRENDING_UP), quality=None, sha256=SHA)
    rng1 = brief_symbol("R1", synthetic(Regime.RANGE_BOUND, seed=1), quality=None, sha256=SHA)
    rng2 = brief_symbol("R2", synthetic(Regime.RANGE_BOUND, seed=2), quality=None, sha256=SHA)
    brief = build_data_brief([up, rng1, rng2])
    assert brief.regime == Regime.RANGE_BOUND
    share = (rng1.regime_confidence + rng2.regime_confidence) / sum(
        b.regime_confidence for b in (up, rng1, rng2)
    )
    mean_conf = (rng1.regime_confidence + rng2.regime_confidence) / 2
    assert brief.regime_confidence == pytest.approx(share * mean_conf)
    assert brief.suggested.family == "mean_reversion"


@pytest.mark.unit
def test_quality_report_shapes() -> None:
    bars = synthetic(Regime.RANGE_BOUND)
    report = {  # shaped like backtest.data.quality.QualityReport.model_dump()
        "timeframe": "1d",
        "n_bars": 756,
        "expected_bars": 760,
        "coverage_pct": 99.5,
        "n_gaps": 1,
        "gaps": [{"start": "x"}],
        "ohlc_violations": 0,
        "zero_volume_bars": 0,
        "issues": ["1 gap(s) longer than 4 days"],
    }
    b = brief_symbol("Q", bars, quality=report, sha256=SHA)
    assert b.quality_issues == ["1 gap(s) longer than 4 days"] and b.coverage_pct == 99.5
    counts = brief_symbol("Q", bars, quality={"n_bars": 756, "outliers": 3}, sha256=SHA)
    assert counts.quality_issues == ["outliers: 3"]


@pytest.mark.unit
def test_basic_quality_flags_problems() -> None:
    bars = synthetic(Regime.TRENDING_UP)
    bars.iloc[100, bars.columns.get_loc("high")] = bars["low"].iloc[100] * 0.9  # high < low
    b = brief_symbol("BAD", bars, quality=None, sha256=SHA)
    assert any("OHLC violations" in i for i in b.quality_issues)
