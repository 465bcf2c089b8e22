"""The batched sweep (``backtest.screen.batch``) against the per-set one, bit for bit.

A sweep ranks on the per-set path's figures and the calibration's verdicts depend on them: the
batched path must give the very same ``ScreenedSet`` records (Sharpe, trades, observations,
errors), ranking and return matrix, on real bars, for every block family, long only and
long/short, with costs.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backtest.contracts import CostModel, Fold
from backtest.screen import evaluate, screen_sets, windows_for
from backtest.screen.batch import condition_key, prepare, run_window
from strategies.families import TEMPLATES, spec_from_template
from strategies.mutate import neighbourhood
from strategies.spec import Family

pytestmark = pytest.mark.unit

FOLDS = [
    Fold(index=0, warmup_start=date(2013, 1, 2), start=date(2014, 1, 2), end=date(2015, 6, 30)),
    Fold(index=1, warmup_start=date(2014, 7, 1), start=date(2015, 7, 1), end=date(2016, 12, 30)),
    # no warm-up: the fold starts at the window's first bar (the equity starts at the cash)
    Fold(index=2, warmup_start=date(2016, 1, 4), start=date(2016, 1, 4), end=date(2016, 12, 30)),
]
COSTS = CostModel(commission_pct=0.1, slippage_pct=0.05, borrow_pct=3.0)


@pytest.fixture(scope="module")
def wins():
    frames = {s: read_real_bars(s, "2013-01-01", "2016-12-31") for s in ("AAPL", "MSFT", "NVDA")}
    return windows_for(frames, FOLDS)


def _same(specs, windows, costs=COSTS, min_trades=3):
    kw = {"costs": costs, "bars_per_year": 252, "periods_per_year": 252, "min_trades": min_trades}
    new = screen_sets(specs, windows, **kw)
    old = screen_sets(specs, windows, batched=False, **kw)
    assert new.sets == old.sets  # every figure, to the bit (floats compare exactly)
    assert new.ranked == old.ranked and new.dates == old.dates
    assert np.array_equal(new.returns, old.returns)
    return new


def test_every_family_long_only_and_long_short_in_one_sweep(wins):
    specs = []
    for family in Family:
        for k in range(len(TEMPLATES[family])):
            for ls in (False, True):
                parent = spec_from_template(family, k, long_short=ls)
                specs += neighbourhood(parent, 4, seed=(k, int(ls), 7), seen=set())
    sweep = _same(specs, wins)
    assert len(sweep.sets) == len(specs) > 60
    assert any(s.n_trades for s in sweep.sets) and len({s.sharpe for s in sweep.sets}) > 20


def test_sets_sharing_their_conditions_are_batched_together_and_stay_exact(wins):
    parent = spec_from_template(Family.TREND, 0)
    specs = neighbourhood(parent, 40, seed=(1, 1, 1), seen=set())
    # only the exit's and sizing's knobs move: one condition key for all
    fixed = {k: parent.parameters[k] for k in ("fast_period", "slow_period", "adx_min")}
    specs = [s.model_copy(update={"parameters": {**s.parameters, **fixed}}) for s in specs]
    assert len({condition_key(s) for s in specs}) == 1
    assert len(prepare(specs, COSTS, 252).specs) == 1
    _same(specs, wins)


def test_a_window_run_is_evaluate_for_every_set(wins):
    specs = neighbourhood(
        spec_from_template(Family.MEAN_REVERSION, 0), 6, seed=(2, 2, 2), seen=set()
    )
    window = wins[("MSFT", 1)]
    run = run_window(prepare(specs, COSTS, 252), window)
    assert run.whole.tolist() == list(range(len(specs))) and not run.ragged
    for row, spec in enumerate(specs):
        one = evaluate(spec, window, costs=COSTS)
        assert np.array_equal(run.returns[row], one.returns())
        assert run.trades[row] == one.fill_sizes.size // 2


def test_a_division_by_zero_is_the_same_error_on_the_same_window():
    index = pd.bdate_range("2015-01-01", "2016-12-30")
    flat = pd.DataFrame(
        {"open": 10.0, "high": 10.0, "low": 10.0, "close": 10.0, "volume": 1e6}, index=index
    )
    real = read_real_bars("AAPL", "2015-01-01", "2016-12-30")
    fold = Fold(
        index=0, warmup_start=date(2015, 1, 1), start=date(2015, 7, 1), end=date(2016, 12, 30)
    )
    windows = windows_for({"FLAT": flat, "AAPL": real}, [fold])
    specs = neighbourhood(spec_from_template(Family.TREND, 0), 5, seed=(3, 3, 3), seen=set())
    sweep = _same(specs, windows)
    assert all(s.error and s.error.startswith("FLAT/fold0: ZeroDivisionError") for s in sweep.sets)


def test_portfolio_windows_keep_the_per_set_path():
    from backtest.screen import portfolio_windows_for
    from strategies.portfolio import PortfolioFamily, portfolio_spec

    frames = {s: read_real_bars(s, "2014-01-01", "2016-12-30") for s in ("AAPL", "MSFT", "NVDA")}
    fold = Fold(
        index=0, warmup_start=date(2014, 1, 2), start=date(2015, 1, 2), end=date(2016, 12, 30)
    )
    parent = portfolio_spec(PortfolioFamily.CROSS_SECTIONAL_MOMENTUM, {"xs_top_n": 1})
    specs = neighbourhood(parent, 3, seed=(4, 4, 4), seen=set())
    sweep = _same(specs, portfolio_windows_for(frames, [fold]))
    assert sweep.n_symbols == 3 and any(s.n_trades for s in sweep.sets)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    family=st.sampled_from(list(Family)),
    k=st.integers(0, 1),
    long_short=st.booleans(),
    seed=st.integers(0, 10_000),
    commission=st.sampled_from([0.0, 0.05, 0.1, 0.5]),
    slippage=st.sampled_from([0.0, 0.05, 0.2]),
    cash=st.sampled_from([5_000.0, 100_000.0]),
)
def test_random_neighbourhoods_are_the_same(
    wins, family, k, long_short, seed, commission, slippage, cash
):
    k = k % len(TEMPLATES[family])
    parent = spec_from_template(family, k, long_short=long_short)
    specs = neighbourhood(parent, 6, seed=(seed,), seen=set())
    costs = CostModel(commission_pct=commission, slippage_pct=slippage, cash=cash, borrow_pct=1.0)
    some = {key: w for key, w in wins.items() if key[1] != 1}
    _same(specs, some, costs=costs)


@pytest.mark.parametrize("n_dates", [2, 3, 8, 9, 127, 129, 2520, 7561])
@pytest.mark.parametrize("n_sets", [1, 2, 300])
def test_the_sweeps_sharpes_in_one_reduction_are_the_row_by_row_floats(n_sets, n_dates) -> None:
    from backtest.screen.sweep import sharpe_pp, sharpes_pp

    rng = np.random.default_rng(n_sets * 10_000 + n_dates)
    returns = rng.standard_normal((n_sets, n_dates)) * rng.uniform(1e-4, 1e-1)
    have = np.tile(rng.uniform(size=n_dates) > 0.1, (n_sets, 1))
    if n_sets > 2:
        have[1, :3] = False  # a set with a failed window: its own dates
        returns[2] = 0.0  # a flat set: no Sharpe
    want = [sharpe_pp(returns[i][have[i]]) for i in range(n_sets)]
    assert sharpes_pp(returns, have) == want


def _levered(n: int) -> list:
    """Long/short sets sized at three times the equity: some go through zero on AMD."""
    specs = []
    for family in Family:
        for k in range(len(TEMPLATES[family])):
            parent = spec_from_template(family, k, long_short=True)
            for s in neighbourhood(parent, n, seed=(k, 3, 3), seen=set()):
                params = {**s.parameters, "position_fraction": 3.0}
                specs.append(s.model_copy(update={"parameters": params}))
    return specs


def test_sets_that_go_broke_are_the_books_figures_while_the_others_are_added_in_the_kernel():
    frames = {s: read_real_bars(s, "2013-01-01", "2016-12-31") for s in ("AMD", "NVDA")}
    fold = Fold(
        index=0, warmup_start=date(2013, 1, 2), start=date(2014, 1, 2), end=date(2016, 12, 30)
    )
    windows = windows_for(frames, [fold])
    costs = CostModel(max_gross_leverage=4.0)
    specs = _levered(10)
    prepared = prepare(specs, costs, 252)
    window = windows[("AMD", 0)]
    kept = run_window(prepared, window)  # the window's returns as a matrix
    assert kept.ragged and not kept.added  # a set went through zero: the books' returns
    at = np.arange(len(window.bars) - window.first, dtype=np.int64) + 3
    total = np.full((len(specs), at.size + 5), 0.25)
    added = run_window(prepared, window, total=total, at=at)
    assert added.added and added.returns.shape[0] == 0
    assert np.array_equal(added.whole, kept.whole) and np.array_equal(added.trades, kept.trades)
    assert added.ragged.keys() == kept.ragged.keys()
    assert all(np.array_equal(added.ragged[k], r) for k, r in kept.ragged.items())
    want = np.full_like(total, 0.25)
    want[np.ix_(kept.whole, at)] += kept.returns
    assert np.array_equal(total, want)  # only the whole sets' cells, one addition each
    _same(specs, windows, costs=costs)  # and the sweep is the per-set one, bit for bit


def test_a_fold_from_the_windows_first_bar_adds_nothing_in_the_kernel(wins):
    specs = neighbourhood(spec_from_template(Family.TREND, 0), 4, seed=(5, 5, 5), seen=set())
    window = wins[("AAPL", 2)]  # fold 2 has no warm-up
    assert window.first == 0
    total = np.zeros((len(specs), len(window.bars)))
    run = run_window(prepare(specs, COSTS, 252), window, total=total, at=np.arange(total.shape[1]))
    assert not run.added and not total.any() and len(run.ragged) == len(specs)
