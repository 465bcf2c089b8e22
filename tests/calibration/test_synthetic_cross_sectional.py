"""The cross-sectional synthetic universe: its only edge is each symbol's rank among the others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from swarm.calibration.synthetic_universe import UniverseSpec, generate_universe

pytestmark = pytest.mark.unit


def _universe(seed: int = 0, **kw):
    spec = UniverseSpec(
        kind="cross_sectional", seed=seed, n_symbols=8, years=6, drift_annual=0.05, **kw
    )
    return generate_universe(spec)


def test_tilts_sum_to_zero_and_follow_the_ranks_of_past_returns() -> None:
    u = _universe()
    tilt = np.column_stack(list(u.regimes.values()))
    assert np.allclose(tilt.sum(axis=1), 0.0)
    assert tilt.max() == 1.0 and tilt.min() == -1.0
    spec = u.spec
    span = spec.xs_lookback + spec.xs_skip
    assert np.all(tilt[:span] == 0.0)  # no ranking before there is history
    closes = pd.concat([b["close"] for b in u.bars.values()], axis=1).to_numpy()
    t = span + 5 * spec.xs_rebalance  # a re-ranking date
    t -= t % spec.xs_rebalance
    past = np.log(closes[t - 1 - spec.xs_skip] / closes[t - 1 - span])
    assert np.argmax(tilt[t]) == np.argmax(past) and np.argmin(tilt[t]) == np.argmin(past)


def test_the_same_seed_gives_the_same_bars_and_kinds_do_not_share_shocks() -> None:
    a, b = _universe(3), _universe(3)
    for sym in a.bars:
        pd.testing.assert_frame_equal(a.bars[sym], b.bars[sym])
    null = generate_universe(UniverseSpec(kind="null", seed=3, n_symbols=8, years=6))
    assert not np.allclose(a.bars["SYNA"]["close"], null.bars["SYNA"]["close"])


def test_leaders_earn_more_than_laggards_and_the_average_only_the_drift() -> None:
    """Over several seeds: the next month of the top-ranked symbols beats the bottom's."""
    spreads = []
    for seed in range(6):
        u = _universe(seed, xs_sharpe=1.0)
        tilt = np.column_stack(list(u.regimes.values()))
        rets = pd.concat([b["close"].pct_change() for b in u.bars.values()], axis=1).to_numpy()
        top, bottom = tilt > 0.5, tilt < -0.5
        days = top.any(axis=1)
        lead = (rets * top).sum(axis=1)[days] / top.sum(axis=1)[days]
        lag = (rets * bottom).sum(axis=1)[days] / bottom.sum(axis=1)[days]
        spreads.append(np.nanmean(lead - lag) * 252)
    assert np.mean(spreads) > 0.05, spreads


def test_a_universe_of_one_cannot_be_ranked() -> None:
    with pytest.raises(ValueError, match="at least 2 symbols"):
        generate_universe(UniverseSpec(kind="cross_sectional", n_symbols=1, years=2))
