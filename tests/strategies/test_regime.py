"""The index regime filter (``strategies.regime``): a catalogue filter any family can take,
reading an index (SPY, QQQ, VIX) as an extra feed it never trades."""

from __future__ import annotations

import random
from datetime import date
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import read_real_bars
from strategy_bt_helpers import run_exported

from backtest.contracts import BacktestJob, Fold, JobStatus
from backtest.engine import execute
from backtest.splits import TimeSplit
from strategies.codegen import class_name, render
from strategies.families import default_spec, initial_specs, reconcile, with_regime_filter
from strategies.mutate import tune
from strategies.portfolio import LABEL, portfolio_slots, portfolio_spec, propose_portfolio_specs
from strategies.regime import (
    INDEX_REGIME,
    REGIME_STYLE,
    VIX_REGIME,
    feed_name,
    index_symbols,
    spec_index_symbols,
)
from strategies.spec import Family, PortfolioFamily
from strategies.validate import validate_code
from swarm.directive import parse_directive
from swarm.memo import RunMemo

XS = PortfolioFamily.CROSS_SECTIONAL_MOMENTUM
FOLD = Fold(index=0, warmup_start=date(2007, 1, 3), start=date(2008, 1, 2), end=date(2010, 12, 31))


def _trend(regime_index: int = 0):
    spec = with_regime_filter(default_spec(Family.TREND))
    params = dict(spec.parameters) | {"regime_index": regime_index}
    return reconcile(spec.model_copy(update={"parameters": params}))


@pytest.mark.unit
def test_the_code_names_the_index_it_reads_and_lints_clean() -> None:
    spec = _trend()
    assert spec.filters[-1] == INDEX_REGIME and spec.name.endswith("+index_regime")
    assert {"regime_index", "regime_ma"} <= set(spec.parameters)
    code = render(spec)
    assert validate_code(code).ok
    assert 'self.getdatabyname("index:SPY")' in code
    assert index_symbols(code) == spec_index_symbols(spec.filters, spec.parameters) == ["SPY"]
    # The index is data written into the code, not a run-time parameter.
    assert '("regime_index"' not in code and '("regime_ma", 200)' in code
    qqq = _trend(1)
    assert index_symbols(render(qqq)) == ["QQQ"] and qqq.trial_key() != spec.trial_key()
    vix = reconcile(default_spec(Family.MOMENTUM).model_copy(update={"filters": [VIX_REGIME]}))
    assert index_symbols(render(vix)) == ["VIX"] and vix.parameters["vix_max"] == 25.0
    assert index_symbols(render(default_spec(Family.TREND))) == []
    assert index_symbols("not python (") == []


@pytest.mark.unit
def test_the_tuner_moves_the_filter_s_parameters() -> None:
    spec = _trend()
    moved = tune(spec, 40, rng=random.Random(3), seen=set())
    changed = {k for m in moved for k in m.parameters if m.parameters[k] != spec.parameters[k]}
    assert {"regime_index", "regime_ma"} <= changed
    assert all(m.filters == spec.filters for m in moved)
    assert {tuple(index_symbols(render(m))) for m in moved} == {("SPY",), ("QQQ",)}


@pytest.mark.unit
def test_the_screen_reports_the_filter_unsupported() -> None:
    from backtest.screen.blocks import Unsupported, check_supported

    check_supported(default_spec(Family.TREND))  # the same design without it is screened
    with pytest.raises(Unsupported, match="filter index_regime: reads an index feed"):
        check_supported(_trend())


@pytest.mark.unit
@pytest.mark.parametrize(
    ("directive", "regime"),
    [
        ("trend following on US indices", True),
        ("momentum in tech, regime filtered", True),
        ("cross-sectional momentum in tech with a risk-on filter", True),
        ("breakout when the index is above its 200-day average", True),
        ("trend following in tech", False),
        ("trend following on SPY", False),
        ("mean reversion in tech", False),
    ],
)
def test_the_directive_asks_for_the_filter(directive: str, regime: bool) -> None:
    plan = parse_directive(directive)
    assert (REGIME_STYLE in plan.preferred_families) is regime
    assert plan.style != REGIME_STYLE


@pytest.mark.unit
def test_the_named_family_s_designs_come_without_then_with_the_filter() -> None:
    rng = random.Random(0)
    named = ["trend", REGIME_STYLE]
    specs = initial_specs(5, preferred_families=["trend"], suggested=None, rng=rng, named=named)
    trend = [s for s in specs if s.family == Family.TREND]
    assert len(trend) == 3
    assert [INDEX_REGIME in s.filters for s in trend] == [False, True, False]
    # Like with like: the filtered slot is the design of the slot before it, plus the filter.
    assert trend[1].entry == trend[0].entry and trend[1].filters == [
        *trend[0].filters,
        INDEX_REGIME,
    ]
    assert trend[2].entry != trend[0].entry  # then the family's next design
    assert all(INDEX_REGIME not in s.filters for s in specs if s.family != Family.TREND)
    plain = initial_specs(5, preferred_families=["trend"], suggested=None, rng=rng, named=["trend"])
    assert not any(INDEX_REGIME in s.filters for s in plain)
    alone = initial_specs(4, preferred_families=[], suggested=None, rng=rng, named=[REGIME_STYLE])
    assert [INDEX_REGIME in s.filters for s in alone] == [False, True, False, True]


@pytest.mark.unit
def test_portfolio_families_take_the_filter_too() -> None:
    assert portfolio_slots(["cross_sectional_momentum", REGIME_STYLE], 4, 5) == 4
    props = propose_portfolio_specs(
        families=["cross_sectional_momentum", REGIME_STYLE],
        route="INITIAL",
        n=4,
        rng=random.Random(0),
        seen=set(),
        best=None,
    )
    assert [INDEX_REGIME in p.spec.filters for p in props] == [False, True, False, True]
    for p in props:
        code = render(p.spec)
        assert validate_code(code).ok
        assert index_symbols(code) == (["SPY"] if p.spec.filters else [])
    # Only regime filters survive on a portfolio spec; the trial key changes with them.
    spec = reconcile(portfolio_spec(XS).model_copy(update={"filters": ["adx", INDEX_REGIME]}))
    assert spec.filters == [INDEX_REGIME] and spec.trial_key() != portfolio_spec(XS).trial_key()


def _risk_on(day_index: pd.DatetimeIndex, spy: pd.DataFrame, period: int = 200) -> pd.Series:
    close = spy["close"]
    return (close > close.rolling(period).mean()).reindex(day_index)


@pytest.mark.integration
def test_a_symbol_job_enters_only_when_the_index_is_risk_on() -> None:
    """AAPL with SPY as its index feed through 2008: every entry is decided on a bar where
    SPY closes above its 200-day average; the fills are all AAPL's."""
    spec = _trend()
    aapl = read_real_bars("AAPL", "2007-01-01", "2010-12-31")
    spy = read_real_bars("SPY", "2007-01-01", "2010-12-31")
    job = BacktestJob(
        job_id="r",
        variant_id="v",
        code=render(spec),
        symbol="AAPL",
        bars={"AAPL": aapl, feed_name("SPY"): spy},
        fold=FOLD,
    )
    run = execute(job)
    assert run.result.status == JobStatus.OK, run.result.error
    assert run.fills and {f.symbol for f in run.fills} == {"AAPL"}
    on = _risk_on(aapl.index, spy)
    entries = [f for f in run.fills if f.side == "buy"]
    assert entries and all(on[pd.Timestamp(f.created)] for f in entries)
    plain = execute(
        BacktestJob(
            job_id="p",
            variant_id="v",
            code=render(default_spec(Family.TREND)),
            symbol="AAPL",
            bars=aapl,
            fold=FOLD,
        )
    )
    assert plain.result.metrics.n_trades > run.result.metrics.n_trades


@pytest.mark.integration
def test_a_portfolio_goes_to_cash_when_the_index_is_risk_off() -> None:
    symbols = ("AAPL", "MSFT", "NVDA")
    bars = {s: read_real_bars(s, "2007-01-01", "2010-12-31") for s in symbols}
    spy = read_real_bars("SPY", "2007-01-01", "2010-12-31")
    spec = portfolio_spec(XS, {"rebalance_bars": 5}, filters=(INDEX_REGIME,))
    code = render(spec)
    run = execute(
        BacktestJob(
            job_id="p",
            variant_id="v",
            code=code,
            symbol=LABEL,
            bars=bars | {feed_name("SPY"): spy},
            fold=FOLD,
        )
    )
    assert run.result.status == JobStatus.OK, run.result.error
    assert {f.symbol for f in run.fills} <= set(symbols)
    on = _risk_on(bars["AAPL"].index, spy)
    # No purchase is decided while SPY is below its average (risk-off rebalances sell only).
    assert all(on[pd.Timestamp(f.created)] for f in run.fills if f.side == "buy")
    plain = execute(
        BacktestJob(
            job_id="q",
            variant_id="v",
            code=render(portfolio_spec(XS, {"rebalance_bars": 5})),
            symbol=LABEL,
            bars=bars,
            fold=FOLD,
        )
    )
    assert run.result.metrics.exposure_pct < plain.result.metrics.exposure_pct


@pytest.mark.unit
def test_job_bars_add_the_index_feed_sealed_like_the_universe(tmp_path) -> None:
    from swarm.regime_data import reproduce_data, with_index_feeds

    idx = pd.bdate_range("2020-01-01", periods=40)
    frame = pd.DataFrame(
        {"open": 1.0, "high": 1.0, "low": 1.0, "close": 1.0, "volume": 1.0}, index=idx
    )
    spy = SimpleNamespace(bars=frame * 2, path=str(tmp_path / "SPY.csv"))
    ctx = SimpleNamespace(
        data={"AAPL": SimpleNamespace(bars=frame)},
        memo=RunMemo(index_bars={"SPY": spy}),
        split=TimeSplit(
            insample_start=idx[0].date(),
            insample_end=idx[29].date(),
            holdout_start=idx[30].date(),
            holdout_end=idx[-1].date(),
        ),
        config=None,
    )
    code = render(_trend())
    sealed = with_index_feeds(ctx, frame.iloc[:30], "AAPL", code)
    assert list(sealed) == ["AAPL", "index:SPY"]
    assert sealed["index:SPY"].index[-1] == idx[29]
    opened = with_index_feeds(ctx, frame, "AAPL", code, holdout=True)
    assert opened["index:SPY"].index[-1] == idx[-1]
    universe = {"AAPL": frame, "MSFT": frame}
    assert list(with_index_feeds(ctx, universe, LABEL, code)) == ["AAPL", "MSFT", "index:SPY"]
    plain = render(default_spec(Family.TREND))
    assert with_index_feeds(ctx, frame, "AAPL", plain) is frame
    assert reproduce_data(ctx, "AAPL.csv", code) == ["AAPL.csv", spy.path]
    assert reproduce_data(ctx, ["A.csv", "B.csv"], plain) == ["A.csv", "B.csv"]


@pytest.mark.integration
def test_a_missing_index_file_exits_2_naming_it(capsys, tmp_path, daily_dir) -> None:
    import shutil

    from swarm.develop import main

    data = tmp_path / "data"
    data.mkdir()
    for s in ("AAPL", "MSFT"):
        shutil.copy(daily_dir / f"{s}.csv", data / f"{s}.csv")
    code = main(
        [
            "--directive",
            "momentum, regime filtered",
            "--tickers",
            "AAPL,MSFT",
            "--data-dir",
            str(data),
            "--out",
            str(tmp_path / "runs"),
            "--offline",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"the regime filter needs SPY.csv in {data}; add it or drop the filter" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.integration
def test_an_exported_regime_strategy_reproduces_the_lab_s_final_value(tmp_path, daily_dir):
    """The index is one more --data, last; plain backtrader ends on the lab's final value."""
    import subprocess
    import sys

    from backtest.contracts import CostModel
    from experiments.export import standalone_source

    aapl = read_real_bars("AAPL", "2007-01-01", "2010-12-31")
    spy = read_real_bars("SPY", "2007-01-01", "2010-12-31")
    for spec, bars, symbol, files in (
        (_trend(), {"AAPL": aapl, "index:SPY": spy}, "AAPL", ["AAPL", "SPY"]),
        (
            portfolio_spec(XS, {"xs_top_n": 1}, filters=(INDEX_REGIME,)),
            {
                "AAPL": aapl,
                "MSFT": read_real_bars("MSFT", "2007-01-01", "2010-12-31"),
                "index:SPY": spy,
            },
            LABEL,
            ["AAPL", "MSFT", "SPY"],
        ),
    ):
        code = render(spec)
        lab = execute(
            BacktestJob(job_id="e", variant_id="v", code=code, symbol=symbol, bars=bars, fold=FOLD)
        ).result
        assert lab.status == JobStatus.OK and lab.metrics.n_trades > 0, lab.error
        script = tmp_path / f"{symbol}.py"
        source = standalone_source(code, class_name(spec.name), costs=CostModel())
        assert "INDEX_FEEDS = ('SPY',)" in source
        script.write_text(source)
        data = [a for s in files for a in ("--data", str(daily_dir / f"{s}.csv"))]
        value = run_exported(
            str(script),
            [*data, "--from", "2007-01-03", "--to", "2010-12-31", "--trade-start", "2008-01-02"],
        )
        assert value == pytest.approx(lab.metrics.final_value, abs=1e-6)
    short = subprocess.run(
        [sys.executable, str(script), "--data", str(daily_dir / "AAPL.csv")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert short.returncode == 2 and "SPY.csv" in short.stderr
    assert np.isfinite(lab.metrics.final_value)
