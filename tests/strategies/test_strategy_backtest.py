"""Every family's designs run in plain backtrader on real AAPL bars and trade."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from conftest import read_real_bars
from strategy_bt_helpers import run_code

from strategies.codegen import render
from strategies.families import TEMPLATES, default_spec, spec_from_template
from strategies.mutate import fix, refine, toward_more_trades, tune
from strategies.spec import Family

pytestmark = pytest.mark.integration

CASES = [
    (family, t, long_short)
    for family in Family
    for t in range(len(TEMPLATES[family]))
    for long_short in (False, True)
]


@pytest.fixture(scope="module")
def aapl() -> pd.DataFrame:
    return read_real_bars("AAPL", "2014-01-01", "2018-12-31")


@pytest.mark.parametrize(("family", "template", "long_short"), CASES)
def test_template_trades_on_real_data(
    aapl: pd.DataFrame, family: Family, template: int, long_short: bool
) -> None:
    spec = spec_from_template(family, template, long_short=long_short)
    result = run_code(render(spec), aapl)
    assert result.closed_trades >= 1, spec.name
    assert result.final_value > 0


def test_momentum_long_short_takes_short_trades(aapl: pd.DataFrame) -> None:
    result = run_code(render(default_spec(Family.MOMENTUM, long_short=True)), aapl)
    assert result.short_trades >= 1
    assert result.closed_trades > result.short_trades  # and longs too


def test_mean_reversion_long_short_stays_long_only(aapl: pd.DataFrame) -> None:
    result = run_code(render(default_spec(Family.MEAN_REVERSION, long_short=True)), aapl)
    assert result.closed_trades >= 1
    assert result.short_trades == 0


@pytest.mark.parametrize("family", list(Family))
def test_no_lookahead_truncation_invariance(aapl: pd.DataFrame, family: Family) -> None:
    """Fills up to a cut-off must not change when the future after it is removed."""
    code = render(default_spec(family, long_short=True))
    cut = aapl.index[900]
    full = run_code(code, aapl)
    short = run_code(code, aapl.loc[:cut])
    before = [f for f in full.fills if f[0] < cut]
    assert before, "expected fills before the cut-off"
    assert [f for f in short.fills if f[0] < cut] == before


@pytest.mark.parametrize("family", list(Family))
def test_mutated_specs_run(aapl: pd.DataFrame, family: Family) -> None:
    spec = default_spec(family, long_short=True)
    rng = random.Random(11)
    seen = {spec.trial_key()}
    variants = [
        *tune(spec, 1, rng=rng, seen=seen),
        fix(spec, "zero_trades", rng=rng, seen=seen),
        refine(spec, failure_hint="deep_drawdown", rng=rng, seen=seen),
        refine(spec, failure_hint="fold_collapse", rng=rng, seen=seen),
    ]
    for variant in variants:
        result = run_code(render(variant), aapl)
        assert result.final_value > 0, variant.name
    assert run_code(render(variants[1]), aapl).closed_trades >= 1


def test_volatility_target_sizes_smaller_when_more_bars_a_year(aapl: pd.DataFrame) -> None:
    """Same realised per-bar vol annualised over more bars: a higher vol, smaller positions."""
    spec = next(
        s
        for s in (spec_from_template(f, t) for f in Family for t in range(len(TEMPLATES[f])))
        if s.sizing == "volatility_target"
    )
    # 9x and 36x the daily count: realised vol x3 and x6, neither capped by position_fraction
    daily = run_code(render(spec, bars_per_year=252), aapl)
    fewer = run_code(render(spec, bars_per_year=252 * 9), aapl)
    more = run_code(render(spec, bars_per_year=252 * 36), aapl)
    assert daily.fills and fewer.fills and more.fills
    assert daily.fills[0][0] == fewer.fills[0][0] == more.fills[0][0]  # same signal, same bar
    size_daily, size_fewer, size_more = (abs(r.fills[0][1]) for r in (daily, fewer, more))
    assert size_more < size_fewer < size_daily
    assert size_more == pytest.approx(size_fewer / 2, rel=0.01)


@pytest.mark.parametrize("family", list(Family))
def test_toward_more_trades_never_trades_less_on_real_data(
    aapl: pd.DataFrame, family: Family
) -> None:
    base = default_spec(family)
    before = run_code(render(base), aapl).closed_trades
    moved = toward_more_trades(base, 4, rng=random.Random(0), seen={base.trial_key()})
    after = [run_code(render(spec), aapl).closed_trades for spec in moved]
    assert after and all(n >= before for n in after), (before, after)
