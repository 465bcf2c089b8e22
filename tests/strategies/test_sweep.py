"""TUNE through the screen (``backtest/screen/sweep.py``, ``strategies.mutate.neighbourhood``).

The sample is a pure function of its seed; the ranking picks the screen's best; and the best,
run through Backtrader on the same windows, trades and scores exactly as it was screened.
"""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pytest
from conftest import read_real_bars

from backtest.contracts import BacktestJob, CostModel, Fold
from backtest.engine import execute
from backtest.screen import (
    books_result,
    evaluate,
    read_batch,
    screen_sets,
    supported,
    windows_for,
    write_batch,
)
from backtest.trade_list import FillRow, pair_fills
from gate.aggregate import aggregate_variant
from strategies.codegen import render
from strategies.families import PARAM_SPACE, reconcile, spec_from_template
from strategies.mutate import neighbourhood
from strategies.spec import Family

pytestmark = pytest.mark.unit

FOLDS = [
    Fold(index=0, warmup_start=date(2013, 1, 2), start=date(2014, 1, 2), end=date(2015, 6, 30)),
    Fold(index=1, warmup_start=date(2014, 7, 1), start=date(2015, 7, 1), end=date(2016, 12, 30)),
]
COSTS = CostModel()


@pytest.fixture(scope="module")
def windows():
    frames = {s: read_real_bars(s, "2013-01-01", "2016-12-31") for s in ("AAPL", "MSFT")}
    return frames, windows_for(frames, FOLDS)


def test_neighbourhood_is_deterministic_fresh_and_near_the_parent():
    parent = spec_from_template(Family.MOMENTUM, 0)
    base = reconcile(parent)
    seen = {s.trial_key() for s in neighbourhood(parent, 5, seed=(9, 9, 9), seen=set())}
    a = neighbourhood(parent, 60, seed=(1, 2, 1), seen=seen)
    b = neighbourhood(parent, 60, seed=(1, 2, 1), seen=seen)
    c = neighbourhood(parent, 60, seed=(1, 3, 1), seen=seen)
    keys = [s.trial_key() for s in a]
    assert keys == [s.trial_key() for s in b]  # same seed, same sample
    assert keys != [s.trial_key() for s in c]  # another iteration, another sample
    assert len(set(keys)) == 60 and not set(keys) & (seen | {base.trial_key()})
    for s in a:
        assert (s.entry, s.filters, s.exits, s.sizing) == (
            base.entry,
            base.filters,
            base.exits,
            base.sizing,
        )
        for name, value in s.parameters.items():
            r = PARAM_SPACE.get(name)
            if r is not None and r.tunable:
                assert abs(float(value) - float(base.parameters[name])) <= 6 * r.step + 1e-9


def test_sweep_ranks_by_the_portfolio_sharpe_the_gate_computes(windows):
    _, wins = windows
    parent = spec_from_template(Family.TREND, 0)
    specs = neighbourhood(parent, 12, seed=(0, 2, 1), seen=set())
    sweep = screen_sets(
        specs, wins, costs=COSTS, bars_per_year=252, periods_per_year=252, min_trades=0
    )
    again = screen_sets(
        specs, wins, costs=COSTS, bars_per_year=252, periods_per_year=252, min_trades=0
    )
    assert [s.trial_key for s in sweep.top(12)] == [s.trial_key for s in again.top(12)]
    assert sweep.n_symbols == 2 and sweep.n_folds == 2 and len(sweep.sets) == 12
    # Each set's Sharpe is gate.aggregate's over the screen's own per-window results.
    for s in sweep.sets:
        results = [
            books_result(s.spec, evaluate(s.spec, w, costs=COSTS), COSTS).model_copy(
                update={"fold": fold}
            )
            for (_, fold), w in wins.items()
        ]
        metrics, _, _ = aggregate_variant(results)
        assert metrics is not None and s.sharpe is not None
        assert math.isclose(s.sharpe, metrics.sharpe, rel_tol=1e-9, abs_tol=1e-12)
        assert s.n_trades == metrics.n_trades
    best = max(sweep.sets, key=lambda s: s.sharpe if s.sharpe is not None else -math.inf)
    assert sweep.top(1)[0].trial_key == best.trial_key


def test_sets_under_the_trade_floor_rank_last(windows):
    _, wins = windows
    specs = neighbourhood(spec_from_template(Family.TREND, 0), 12, seed=(0, 2, 1), seen=set())
    floor = sorted(
        s.n_trades
        for s in screen_sets(specs, wins, costs=COSTS, bars_per_year=252, periods_per_year=252).sets
    )[6]
    sweep = screen_sets(
        specs, wins, costs=COSTS, bars_per_year=252, periods_per_year=252, min_trades=floor
    )
    flags = [s.n_trades >= floor for s in sweep.top(12)]
    assert flags == sorted(flags, reverse=True) and any(flags) and not all(flags)


def test_the_confirmed_best_trades_in_backtrader_as_it_was_screened(windows):
    frames, wins = windows
    specs = neighbourhood(spec_from_template(Family.MOMENTUM, 0), 10, seed=(3, 2, 1), seen=set())
    sweep = screen_sets(specs, wins, costs=COSTS, bars_per_year=252, periods_per_year=252)
    top = sweep.top(1)[0]
    results = []
    for (symbol, fold_index), window in wins.items():
        fold = FOLDS[fold_index]
        job = BacktestJob(
            job_id="confirm",
            variant_id="v",
            code=render(top.spec),
            symbol=symbol,
            bars=frames[symbol],
            fold=fold,
            costs=COSTS,
        )
        run = execute(job)
        bt_trades = pair_fills(
            symbol, [FillRow(f.executed.isoformat(), f.size, f.price) for f in run.fills]
        )
        sc_trades = evaluate(top.spec, window, costs=COSTS).trades()
        assert [(t.entry_date, t.exit_date, t.size) for t in bt_trades] == [
            (t.entry_date, t.exit_date, t.size) for t in sc_trades
        ]
        for a, b in zip(bt_trades, sc_trades, strict=True):
            assert abs(a.entry_price - b.entry_price) <= 1e-6
        results.append(run.result.model_copy(update={"fold": fold_index}))
    metrics, _, _ = aggregate_variant(results)
    assert math.isclose(metrics.sharpe, top.sharpe, rel_tol=1e-9)
    assert metrics.n_trades == top.n_trades


def test_batch_file_round_trips(tmp_path, windows):
    _, wins = windows
    specs = neighbourhood(spec_from_template(Family.TREND, 0), 4, seed=(0, 1, 1), seen=set())
    sweep = screen_sets(specs, wins, costs=COSTS, bars_per_year=252, periods_per_year=252)
    write_batch(tmp_path / "screens" / "i02.npz", sweep)
    keys, dates, matrix = read_batch(tmp_path / "screens" / "i02.npz")
    assert keys == [s.trial_key for s in sweep.sets] and dates == sweep.dates
    assert np.array_equal(matrix, sweep.returns.astype(np.float32).astype(np.float64))


def test_only_single_symbol_catalogue_specs_are_screened():
    from strategies.portfolio import propose_portfolio_specs  # noqa: F401

    assert supported(spec_from_template(Family.MOMENTUM, 0))
    custom = spec_from_template(Family.MOMENTUM, 0).model_copy(update={"source_sha": "ab" * 32})
    assert not supported(custom)
