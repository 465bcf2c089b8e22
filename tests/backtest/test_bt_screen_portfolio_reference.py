"""The scaled portfolio screen equals the one it replaced, exactly (issue 30 item 4).

``backtest.screen.portfolio`` ranks the universe in a numba kernel and visits only the feeds
held or targeted; ``portfolio_reference`` is the plain-Python replay it replaced (every symbol
at every rebalance and fill). On random universes (prices on a coarse grid, so momentum ties
happen), specs and costs the two must give the same fills, the same value at every bar and the
same figures, float for float; and the kernel's ends of the ranking must be the strategy's
``ranked.sort(reverse=True)``.
"""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from portfolio_reference import ListWindow
from portfolio_reference import evaluate as evaluate_reference

from backtest.contracts import CostModel, Fold
from backtest.screen.indicators import IndicatorZeroDivision
from backtest.screen.portfolio import PortfolioWindow, books_result, evaluate
from backtest.screen.portfolio_kernels import rank_ends
from strategies.families import PARAM_SPACE, PORTFOLIO_PARAMS, snap_params
from strategies.portfolio import portfolio_spec
from strategies.spec import PortfolioFamily, StrategySpec


def _universe(seed: int, n_symbols: int, n_bars: int, tick: float) -> dict[str, pd.DataFrame]:
    """Random walks rounded to ``tick`` (a coarse tick makes equal momentum scores)."""
    rng = np.random.default_rng(seed)
    index = pd.bdate_range("2010-01-04", periods=n_bars)
    frames = {}
    for k in range(n_symbols):
        steps = rng.normal(0.0003 * (k % 5 - 2), 0.02, n_bars)
        close = np.maximum(np.round(20.0 * np.exp(np.cumsum(steps)) / tick) * tick, tick)
        opens = np.maximum(np.round(close * (1 + rng.normal(0, 0.005, n_bars)) / tick) * tick, tick)
        high = np.maximum(opens, close) + tick * rng.integers(0, 3, n_bars)
        low = np.maximum(np.minimum(opens, close) - tick * rng.integers(0, 3, n_bars), tick / 2)
        frames[f"S{k:03d}"] = pd.DataFrame(
            {"open": opens, "high": high, "low": low, "close": close, "volume": 1e6}, index=index
        )
    return frames


def _spec_strategy() -> st.SearchStrategy[StrategySpec]:
    def grid(name: str) -> st.SearchStrategy:
        r = PARAM_SPACE[name]
        high = min(r.high, 90) if name == "xs_lookback" else r.high  # fits the short windows
        steps = int(round((high - r.low) / r.step))
        return st.integers(0, steps).map(lambda k: r.low + k * r.step)

    @st.composite
    def build(draw: st.DrawFn) -> StrategySpec:
        family = draw(
            st.sampled_from([PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, PortfolioFamily.ROTATION])
        )
        params = {}
        for name, default in PORTFOLIO_PARAMS[family].items():
            params[name] = draw(st.booleans() if isinstance(default, bool) else grid(name))
        return portfolio_spec(family, snap_params(params), long_short=draw(st.booleans()))

    return build()


def _assert_equal(spec: StrategySpec, window: PortfolioWindow, costs: CostModel) -> None:
    try:
        old = evaluate_reference(spec, ListWindow(window), costs=costs)
    except IndicatorZeroDivision:
        with pytest.raises(IndicatorZeroDivision):
            evaluate(spec, window, costs=costs)
        return
    new = evaluate(spec, window, costs=costs)
    assert new.fill_bars == old.fill_bars
    assert new.fill_symbols == old.fill_symbols
    assert new.fill_sizes == old.fill_sizes
    assert new.fill_prices == old.fill_prices
    assert new.pnls == old.pnls
    assert np.array_equal(new.values, old.values)
    assert np.array_equal(new.in_market, old.in_market)
    assert (new.refused, new.borrow_paid) == (old.refused, old.borrow_paid)
    assert books_result(spec, new) == books_result(spec, old)


@pytest.mark.unit
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=_spec_strategy(),
    seed=st.integers(0, 10_000),
    n_symbols=st.integers(2, 40),
    tick=st.sampled_from([0.01, 0.5]),
    commission=st.sampled_from([0.0, 0.1, 0.5]),
    slippage=st.sampled_from([0.0, 0.05, 0.5]),
    cash=st.sampled_from([2_000.0, 100_000.0]),
    borrow=st.sampled_from([0.0, 3.0, 40.0]),
)
def test_the_scaled_screen_equals_the_plain_replay_exactly(
    spec: StrategySpec,
    seed: int,
    n_symbols: int,
    tick: float,
    commission: float,
    slippage: float,
    cash: float,
    borrow: float,
) -> None:
    frames = _universe(seed, n_symbols, 420, tick)
    index = next(iter(frames.values())).index
    fold = Fold(
        index=0, warmup_start=index[0].date(), start=index[150].date(), end=index[-1].date()
    )
    costs = CostModel(
        commission_pct=commission, slippage_pct=slippage, cash=cash, borrow_pct=borrow
    )
    _assert_equal(spec, PortfolioWindow.from_frames(frames, fold), costs)


@pytest.mark.unit
def test_a_wide_universe_equals_the_plain_replay_exactly() -> None:
    frames = _universe(3, 150, 700, 0.5)
    index = next(iter(frames.values())).index
    fold = Fold(
        index=0, warmup_start=index[0].date(), start=index[200].date(), end=date(2099, 1, 1)
    )
    window = PortfolioWindow.from_frames(frames, fold)
    for long_short in (False, True):
        spec = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, long_short=long_short)
        _assert_equal(spec, window, CostModel(commission_pct=0.1, slippage_pct=0.05))
    _assert_equal(portfolio_spec(PortfolioFamily.ROTATION), window, CostModel())


@pytest.mark.unit
@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(
        st.sampled_from([-0.5, -0.1, 0.0, 0.1, 0.2, math.nan]), min_size=1, max_size=30
    ),
    k=st.integers(1, 6),
)
def test_the_ends_of_the_ranking_are_the_strategys_sort(scores: list[float], k: int) -> None:
    # One bar with lookback 1 and no skip: score_j = close[1, j] / close[0, j] - 1.
    past = np.array([-1.0 if math.isnan(s) else 1.0 for s in scores])
    close = np.vstack([past, [1.0 + (0.0 if math.isnan(s) else s) for s in scores]])
    count, best, worst, top = rank_ends(close, np.array([1]), 1, 0, k)
    ranked = sorted(((s, j) for j, s in enumerate(scores) if not math.isnan(s)), reverse=True)
    valid = [close[1, j] / close[0, j] - 1.0 for _, j in ranked]
    assert count[0] == len(ranked)
    kept = min(k, len(ranked))
    assert best[0, :kept].tolist() == [j for _, j in ranked[:kept]]
    assert worst[0, :kept].tolist() == [j for _, j in ranked[len(ranked) - kept :]]
    assert (best[0, kept:] == -1).all() and (worst[0, kept:] == -1).all()
    assert (top[0] == valid[0]) if ranked else math.isnan(top[0])
