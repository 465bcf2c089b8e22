"""Calibration scenarios: what each universe holds, their seeds, the summary, the CLI.

No develop loop runs here: the universes are generated and measured directly, and the
summary and run lines are fed fake run records.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from swarm import calibrate
from swarm.calibrate import (
    ALIASES,
    DEFAULT_SCENARIOS,
    MAX_RUNS,
    SCENARIOS,
    LoopOptions,
    RunSpec,
    _plan,
    build_parser,
    main,
    parse_kinds,
    run_line,
    run_one,
    summarise,
    universe_seed,
)
from swarm.calibration import runner
from swarm.calibration.synthetic_universe import (
    UniverseSpec,
    describe,
    generate_universe,
    reversion_rule_returns,
    sharpe_annual,
    timing_alpha,
)

pytestmark = pytest.mark.unit


def _universe(name: str, index: int, years: float = 8.0):
    sc = SCENARIOS[name]
    spec = UniverseSpec(
        kind=sc.universe_kind,
        seed=universe_seed(0, name, index),
        drift_annual=sc.drift_annual,
        years=years,
    )
    return generate_universe(spec)


def _mean_annual_return(uni) -> float:
    c = [df["close"].to_numpy() for df in uni.bars.values()]
    return float(np.mean([np.mean(x[1:] / x[:-1] - 1.0) * 252 for x in c]))


# ------------------------------------------------------------------------- scenarios


def test_the_five_scenarios_and_their_drifts() -> None:
    assert DEFAULT_SCENARIOS == (
        "null-zero",
        "null-drift",
        "null-bull",
        "planted-momentum",
        "planted-reversion",
    )
    table = {n: (s.universe_kind, s.drift_annual, s.is_null) for n, s in SCENARIOS.items()}
    assert table == {
        "null-zero": ("null", 0.0, True),
        "null-drift": ("null", 0.05, True),
        "null-bull": ("null", 0.20, True),
        "planted-momentum": ("planted", 0.05, False),
        "planted-reversion": ("reversion", 0.05, False),
        "planted-momentum-zero": ("planted", 0.0, False),
        "planted-cross-sectional": ("cross_sectional", 0.05, False),
        "null-drift-10": ("null", 0.05, True),
        "planted-drawdown": ("planted", 0.05, False),
        "planted-vol-regime": ("vol_regime", 0.05, False),
        "planted-earnings-drift": ("earnings", 0.05, False),
        "null-earnings-drift": ("earnings_null", 0.05, True),
        "desk-null-zero": ("null", 0.0, True),
        "desk-null-bull": ("null", 0.20, True),
        "desk-planted-momentum": ("planted", 0.05, False),
    }
    desk = {n for n, s in SCENARIOS.items() if s.families == ("decision_pipeline",)}
    assert desk == {"desk-null-zero", "desk-null-bull", "desk-planted-momentum"}
    assert ALIASES == {"null": "null-zero", "planted": "planted-momentum-zero"}


def test_null_bull_drifts_20pct_and_momentum_has_no_edge_over_holding() -> None:
    """20 years of a bull market: holding earns ~20% a year; timing it by momentum adds
    nothing (its Sharpe is below buy and hold's, and its alpha over holding is noise)."""
    means, alpha_t = [], []
    for i in range(1, 4):
        uni = _universe("null-bull", i, years=20)
        d = describe(uni)
        means.append(_mean_annual_return(uni))
        alpha_t.append(d["portfolio_momentum_alpha_t"])
        assert d["portfolio_momentum_long_sharpe"] < d["portfolio_buy_hold_sharpe"]
        assert d["portfolio_buy_hold_sharpe"] > 0.4
        assert abs(d["portfolio_momentum_alpha_t"]) < 2.0
    assert np.mean(means) == pytest.approx(0.20, abs=0.06)
    assert abs(np.mean(alpha_t)) < 1.0


@pytest.mark.parametrize(("name", "drift"), [("null-drift", 0.05), ("planted-reversion", 0.05)])
def test_drifting_scenarios_earn_their_drift(name: str, drift: float) -> None:
    """Over 4 x 20 years the mean simple return is the drift (the reverting deviation
    adds timing, not return)."""
    means = [_mean_annual_return(_universe(name, i, years=20)) for i in range(1, 5)]
    assert np.mean(means) == pytest.approx(drift, abs=0.04)


def test_planted_reversion_is_findable_and_absent_from_nulls() -> None:
    """The 20-day 2-sd reversion rule earns a clear Sharpe and alpha after costs on the
    planted universes and nothing on the null ones; daily returns anti-correlate."""
    planted = [describe(_universe("planted-reversion", i)) for i in range(1, 4)]
    nulls = [describe(_universe(n, i)) for n in ("null-zero", "null-bull") for i in (1, 2)]
    for d in planted:
        assert d["portfolio_reversion_long_sharpe"] > 1.2
        assert d["portfolio_reversion_alpha_t"] > 3.0
        assert d["portfolio_oracle_long_sharpe"] > d["portfolio_reversion_long_sharpe"]
        assert abs(d["portfolio_buy_hold_sharpe"]) < 1.0
    for d in nulls:
        assert d["portfolio_reversion_alpha_t"] < 1.0
    assert max(d["portfolio_reversion_long_sharpe"] for d in nulls) < 0.8
    acf1 = []
    for df in _universe("planted-reversion", 1).bars.values():
        c = df["close"].to_numpy()
        r = c[1:] / c[:-1] - 1.0
        acf1.append(np.corrcoef(r[1:], r[:-1])[0, 1])
    assert np.mean(acf1) < -0.04


def test_planted_momentum_over_drift_stays_findable() -> None:
    """The time-series edge on a drifting market: the 60-day rule's timing adds alpha over
    holding (not just the drift's beta)."""
    ds = [describe(_universe("planted-momentum", i)) for i in range(1, 4)]
    assert np.mean([d["portfolio_momentum_long_sharpe"] for d in ds]) > 1.2
    assert min(d["portfolio_momentum_alpha_t"] for d in ds) > 3.0


def test_reversion_universe_keeps_fat_tails_clustering_and_determinism() -> None:
    spec = UniverseSpec(kind="reversion", seed=5, years=8, drift_annual=0.05)
    a, b = generate_universe(spec), generate_universe(spec)
    null = generate_universe(UniverseSpec(kind="null", seed=5, years=8, drift_annual=0.05))
    kurt, acf_sq = [], []
    for sym, df in a.bars.items():
        pd.testing.assert_frame_equal(df, b.bars[sym])
        np.testing.assert_array_equal(a.deviation[sym], b.deviation[sym])
        assert not df["close"].equals(null.bars[sym]["close"])
        assert (df["high"] >= df[["open", "close"]].max(axis=1)).all()
        assert (df["low"] <= df[["open", "close"]].min(axis=1)).all()
        c = df["close"].to_numpy()
        r = c[1:] / c[:-1] - 1.0
        assert r.std() * np.sqrt(252) / a.vol_annual[sym] == pytest.approx(1.0, abs=0.5)
        z = (r - r.mean()) / r.std()
        kurt.append(float(np.mean(z**4)))
        sq = z**2 - np.mean(z**2)
        acf_sq.append(float(np.sum(sq[1:] * sq[:-1]) / np.sum(sq * sq)))
    assert np.median(kurt) > 4.5 and np.median(acf_sq) > 0.05
    assert not np.any(a.regimes["SYNA"]) and not null.deviation


def test_reversion_rule_and_timing_alpha_on_known_series() -> None:
    # A zigzag below a flat mean: in on the first deep dip, out when back above the mean.
    close = np.array([10.0] * 5 + [8.0, 9.0, 11.0, 10.0, 7.0, 10.5])
    out = reversion_rule_returns(close, lookback=5, entry_z=1.0, cost=0.0)
    r = close[1:] / close[:-1] - 1.0
    # The 8.0 close (bar 5) is > 1 sd below the 5-bar mean: held on bars 5 and 6 (9 < mean),
    # out at 11 (bar 7); 7.0 (bar 9) enters again.
    expected_held = np.array([0, 0, 0, 0, 0, 1, 1, 0, 0, 1], dtype=float)
    np.testing.assert_allclose(out, (expected_held * r)[5:])
    rng = np.random.default_rng(0)
    market = rng.normal(0.0005, 0.01, 5000)
    rule = 0.5 * market + 0.0004
    alpha, beta, t = timing_alpha(rule + rng.normal(0, 0.002, 5000), market)
    assert beta == pytest.approx(0.5, abs=0.02)
    assert alpha == pytest.approx(0.0004 * 252, abs=0.02) and t > 5
    assert sharpe_annual(np.zeros(10)) == 0.0


# ------------------------------------------------------------------------------ seeds


def test_seeds_distinct_across_scenarios_indices_and_base_seeds() -> None:
    # A null shares a slot (its seeds) only with the planted twin it names; no other two do.
    by_slot: dict[int, list[str]] = {}
    for name, sc in SCENARIOS.items():
        by_slot.setdefault(sc.slot, []).append(name)
    for names in by_slot.values():
        assert len(names) == 1 or (
            len(names) == 2 and {SCENARIOS[n].pair for n in names} == {None, names[0]}
        )
    names = [n for n, sc in SCENARIOS.items() if sc.pair is None]
    bases = (0, 1, 2, calibrate.MAX_BASE_SEED - 1)
    seeds = [universe_seed(b, n, i) for b in bases for n in names for i in range(1, MAX_RUNS + 1)]
    assert len(set(seeds)) == len(seeds) and max(seeds) < 2**32
    with pytest.raises(ValueError, match="base seed"):
        universe_seed(calibrate.MAX_BASE_SEED, "null-zero", 1)
    twin = [universe_seed(1, "null-earnings-drift", i) for i in (1, 2)]
    assert twin == [universe_seed(1, "planted-earnings-drift", i) for i in (1, 2)]
    # The two pre-scenario kinds keep their seeds, so old calibrations reproduce.
    assert [universe_seed(1, "null", i) for i in (1, 2)] == [10_007 + 2, 10_007 + 4]
    assert universe_seed(1, "planted", 3) == universe_seed(1, "planted-momentum-zero", 3) == 10_014
    with pytest.raises(ValueError, match="1..999"):
        universe_seed(0, "null-zero", MAX_RUNS + 1)


def test_plan_builds_each_scenario_with_its_kind_drift_and_seed(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--runs", "2", "--seed", "3"])
    specs = _plan(args, tmp_path)
    assert [(s.kind, s.index) for s in specs[:5]] == [(n, 1) for n in DEFAULT_SCENARIOS]
    assert len(specs) == 10 and len({s.seed for s in specs}) == 10
    for s in specs:
        sc = SCENARIOS[s.kind]
        assert s.universe.kind == sc.universe_kind
        assert s.universe.drift_annual == sc.drift_annual
        assert s.seed == s.universe.seed == universe_seed(3, s.kind, s.index)
    over = _plan(
        build_parser().parse_args(["--runs", "1", "--kinds", "null-bull", "--drift", "0.1"]),
        tmp_path,
    )
    assert [s.universe.drift_annual for s in over] == [0.1]


# ---------------------------------------------------------------------------- the CLI


def test_kinds_accept_aliases_and_drop_duplicates() -> None:
    assert parse_kinds("null, planted") == ["null-zero", "planted-momentum-zero"]
    assert parse_kinds("null-bull,null,null-zero,") == ["null-bull", "null-zero"]


@pytest.mark.parametrize("seed", ["-1", "100000"])
def test_a_base_seed_outside_its_range_exits_2(seed: str, tmp_path: Path, capsys) -> None:
    assert main(["--seed", seed, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith("error: --seed: ")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kinds", ["bogus", "null,plantd", ",", ""])
def test_bad_kinds_exit_2_with_one_line(kinds: str, tmp_path: Path, capsys) -> None:
    assert main(["--kinds", kinds, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --kinds: ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()  # nothing made before the options were checked


# ------------------------------------------------------------------- summary and lines


def _record(kind: str, index: int, verdict: str, **extra) -> dict:
    rec = {
        "kind": kind,
        "index": index,
        "seed": universe_seed(0, kind, index),
        "universe_kind": SCENARIOS[kind].universe_kind,
        "verdict": verdict,
        "seconds": 12.0,
        "iterations": 3,
        "n_trials": 15,
        "best_sharpe": 1.1,
        "best_trades": 40,
        "best_score": 0.6,
        "best_dsr": 0.97,
        "holdout_sharpe": 0.8,
        "strength": {
            "portfolio_momentum_long_sharpe": 2.0,
            "portfolio_reversion_long_sharpe": 1.9,
            "portfolio_buy_hold_sharpe": 0.3,
        },
    }
    return rec | extra


def test_summary_has_a_line_per_scenario_and_pooled_lines(tmp_path: Path) -> None:
    records = (
        [_record("null-zero", i, "ABANDON") for i in range(1, 5)]
        + [_record("null-drift", i, "ABANDON") for i in range(1, 5)]
        + [_record("null-bull", i, "SUCCESS" if i <= 2 else "ABANDON") for i in range(1, 5)]
        + [_record("planted-momentum", i, "SUCCESS") for i in range(1, 5)]
        + [_record("planted-reversion", i, "SUCCESS" if i > 1 else "ABANDON") for i in range(1, 4)]
        + [{"kind": "planted-reversion", "index": 4, "seed": 1, "verdict": "ERROR", "seconds": 0}]
    )
    args = build_parser().parse_args([])
    summary = summarise(records, args, tmp_path, 60.0, UniverseSpec())
    lines = summary["lines"]
    fdr = [ln for ln in lines if ln.startswith("false-discovery rate: ")]
    power = [ln for ln in lines if ln.startswith("power: ")]
    assert len(fdr) == 4 and len(power) == 3  # 3 nulls + pooled, 2 planted + pooled
    assert "0/4 SUCCESS on null-zero (no edge, zero drift) = 0.0%" in fdr[0]
    assert "Wilson 0.0%-49.0%" in fdr[0] and "Clopper-Pearson 0.0%-60.2%" in fdr[0]
    assert fdr[0].endswith("target <= 5% -> met")
    assert "2/4 SUCCESS on null-bull (no edge, 20%/yr drift) = 50.0%" in fdr[2]
    assert fdr[2].endswith("-> NOT met")
    assert "2/12 SUCCESS on all nulls (pooled) = 16.7%" in fdr[3]
    assert "4/4 SUCCESS on planted-momentum" in power[0] and power[0].endswith(">= 90% -> met")
    assert "2/3 SUCCESS on planted-reversion" in power[1] and power[1].endswith("NOT met")
    assert "6/7 SUCCESS on all planted (pooled)" in power[2]
    assert lines[-1] == "runtime: 60s for 20 runs"
    rates = summary["rates"]
    assert list(rates) == list(DEFAULT_SCENARIOS)
    assert rates["planted-reversion"]["errors"] == 1 and rates["planted-reversion"]["runs"] == 3
    assert summary["false_discovery"]["runs"] == 12 and summary["power"]["successes"] == 6
    assert summary["scenarios"]["null-bull"] == {
        "universe_kind": "null",
        "drift_annual": 0.2,
        "null": True,
        "edge": "no edge",
        "families": [],
    }
    assert json.loads(json.dumps(summary))["runs"][0]["kind"] == "null-zero"


def test_summary_of_one_scenario_has_no_pooled_line(tmp_path: Path) -> None:
    args = build_parser().parse_args(["--kinds", "null-bull", "--drift", "0.1"])
    summary = summarise([_record("null-bull", 1, "ABANDON")], args, tmp_path, 5.0, UniverseSpec())
    assert summary["lines"][0].startswith(
        "false-discovery rate: 0/1 SUCCESS on null-bull (no edge, 10%/yr drift) = 0.0%"
    )
    assert len(summary["lines"]) == 2 and summary["power"] is None


def test_run_line_shows_benchmark_figures_when_present() -> None:
    plain = run_line(_record("planted-reversion", 1, "SUCCESS"))
    assert re.match(r"planted-reversion +#001 seed ", plain), plain
    assert "reversion rule sharpe 1.90, buy&hold 0.30" in plain and "beta" not in plain
    rich = run_line(
        _record(
            "null-bull",
            2,
            "ABANDON",
            best_alpha={
                "alpha_annual_pct": 1.234,
                "beta": 0.98,
                "t_stat": 0.4,
                "deflated_alpha": 0.12,
            },
            spa_pvalue=0.31,
        )
    )
    assert "alpha 1.2%/yr beta 0.98 alpha t 0.40 deflated alpha 0.120" in rich
    assert "SPA p 0.310" in rich and "momentum rule sharpe 2.00" in rich
    err = run_line({"kind": "null-zero", "index": 3, "seed": 6, "verdict": "ERROR", "seconds": 1})
    assert "ERROR" in err


def test_run_one_records_the_scenario_and_the_verdicts_benchmark_keys(
    tmp_path: Path, monkeypatch
) -> None:
    """run_one with the develop loop faked: the record keeps the scenario name and copies
    best_alpha / spa_pvalue / benchmark from verdict.json, or None before they exist."""
    verdicts = iter(
        [
            {
                "verdict": "ABANDON",
                "iterations": 2,
                "n_trials": 9,
                "best_alpha": {"alpha_annual_pct": 0.5, "beta": 1.0, "t_stat": 0.1},
                "spa_pvalue": 0.6,
                "benchmark": {"name": "buy_and_hold", "sharpe": 0.9},
            },
            {"verdict": "SUCCESS", "iterations": 1, "n_trials": 5},
        ]
    )

    class FakeVerdict:
        def __init__(self, data: dict) -> None:
            self.data = data

        def model_dump(self, mode: str = "python") -> dict:
            return json.loads(json.dumps(self.data))

    def fake_loop(config, criteria) -> calibrate.LoopResult:
        assert config.offline and config.source == "csv" and config.directive == "alpha"
        out = config.out / "run"
        out.mkdir(parents=True)
        (out / "checkpoints.sqlite").write_text("x")
        return calibrate.LoopResult(0, out, verdict=FakeVerdict(next(verdicts)))

    monkeypatch.setattr(runner, "run_loop", fake_loop)  # run_one looks it up there
    recs = []
    for name in ("null-bull", "planted-reversion"):
        sc = SCENARIOS[name]
        universe = UniverseSpec(
            kind=sc.universe_kind, seed=1, drift_annual=sc.drift_annual, years=2, n_symbols=2
        )
        spec = RunSpec(name, 1, 1, universe, LoopOptions(), tmp_path, workers=1)
        recs.append(run_one(spec))
    first, second = recs
    assert first["kind"] == "null-bull" and first["universe_kind"] == "null"
    assert first["drift_annual"] == 0.2 and first["verdict"] == "ABANDON"
    assert first["best_alpha"]["beta"] == 1.0 and first["spa_pvalue"] == 0.6
    assert first["benchmark"] == {"name": "buy_and_hold", "sharpe": 0.9}
    assert second["kind"] == "planted-reversion" and second["verdict"] == "SUCCESS"
    assert second["best_alpha"] is None and second["spa_pvalue"] is None
    assert "portfolio_reversion_long_sharpe" in second["strength"]
    assert (tmp_path / "data" / "planted-reversion-001" / "SYNA.csv").exists()
    assert not list((tmp_path / "runs").rglob("checkpoint*"))
    # The directive names no family: a planted edge must be found, not announced.
    from swarm.directive import parse_directive

    assert parse_directive(calibrate.DEFAULT_DIRECTIVE).preferred_families == []


# ------------------------------------------------------- the repair-needing planted kinds


def _scenario_spec(name: str, seed: int) -> UniverseSpec:
    sc = SCENARIOS[name]
    return UniverseSpec(
        kind=sc.universe_kind,
        seed=seed,
        drift_annual=sc.drift_annual,
        years=8.0,
        **dict(sc.universe),
    )


def _momentum_book(uni, *, target_vol: float | None) -> np.ndarray:
    """Equal-weight long-only 60-day momentum, 0.95 of equity or volatility-targeted (20-day
    realised, capped at 0.95), after 0.15% per unit of turnover: the lab's own sizings."""
    books = []
    for df in uni.bars.values():
        c = df["close"].to_numpy()
        r = c[1:] / c[:-1] - 1.0
        trail = np.full(len(c), np.nan)
        trail[60:] = c[60:] / c[:-60] - 1.0
        pos = np.nan_to_num(np.maximum(np.sign(trail), 0.0)) * 0.95
        if target_vol is not None:
            vol = pd.Series(np.r_[np.nan, r]).rolling(20).std().to_numpy() * np.sqrt(252)
            pos = pos / 0.95 * np.nan_to_num(np.minimum(0.95, target_vol / vol))
        pos = pos[:-1]
        books.append((pos * r - 0.0015 * np.abs(np.diff(np.r_[0.0, pos])))[60:])
    return np.mean(books, axis=0)


def _max_drawdown_pct(r: np.ndarray) -> float:
    equity = np.cumprod(1.0 + r)
    return float((1.0 - equity / np.maximum.accumulate(equity)).max() * 100.0)


def test_planted_drawdown_breaks_the_limit_raw_and_passes_it_volatility_targeted() -> None:
    raw, targeted = [], []
    for seed in range(6):
        uni = generate_universe(_scenario_spec("planted-drawdown", seed))
        raw.append(_momentum_book(uni, target_vol=None))
        targeted.append(_momentum_book(uni, target_vol=0.15))
    raw_dd = [_max_drawdown_pct(r) for r in raw]
    vt_dd = [_max_drawdown_pct(r) for r in targeted]
    assert np.median(raw_dd) > 25.0 and sum(d > 20.0 for d in raw_dd) >= 5
    assert max(vt_dd) < 20.0
    assert np.median([sharpe_annual(r) for r in targeted]) > 1.5


def test_planted_vol_regime_holds_its_edge_in_calm_markets_only() -> None:
    uni = generate_universe(_scenario_spec("planted-vol-regime", 4))
    for sym, df in uni.bars.items():
        r = df["close"].pct_change().to_numpy()[1:]
        vol = pd.Series(r).rolling(20).std().to_numpy() * np.sqrt(252)
        storm = vol > 0.45  # calm 15-25%, storms 3x
        assert 0.05 < np.nanmean(storm) < 0.6, sym  # storms last ~100 days, calms ~250
        state = uni.regimes[sym][1:]
        assert not np.any(state[vol > 0.9])  # no drift regime deep inside a storm
    sharpes = []
    for seed in range(6):
        u = generate_universe(_scenario_spec("planted-vol-regime", seed))
        sharpes.append(
            (
                sharpe_annual(_momentum_book(u, target_vol=None)),
                sharpe_annual(_momentum_book(u, target_vol=0.15)),
            )
        )
    raw, targeted = np.median(sharpes, axis=0)
    assert targeted > raw + 0.3 and targeted > 1.2


def test_new_planted_kinds_are_planted_and_set_their_universe(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["--runs", "1", "--kinds", "planted-drawdown,planted-vol-regime", "--strength", "2"]
    )
    dd, vr = _plan(args, tmp_path)
    assert not SCENARIOS["planted-drawdown"].is_null and not SCENARIOS["planted-vol-regime"].is_null
    assert dd.universe.kind == "planted" and dd.universe.vol_range == (0.45, 0.65)
    assert dd.universe.regime_sharpe == 2.0  # the CLI's strength where the scenario sets none
    assert vr.universe.kind == "vol_regime" and vr.universe.regime_sharpe == 4.0


def test_criteria_reach_each_run_as_develop_reads_them(tmp_path: Path) -> None:
    """Issue 27: no --criteria is exactly the defaults; --criteria lays its rules over them,
    --criteria-replace replaces them, as in ``python -m swarm.develop``."""
    from gate.criteria import parse_criteria

    meta = {"symbols": ["SYNA"], "start": "2012-01-02", "end": "2019-12-31"}

    def criteria_of(*argv: str):
        spec = _plan(build_parser().parse_args(["--kinds", "null", *argv]), tmp_path)[0]
        config, criteria = runner.run_config(spec, meta, tmp_path)
        assert config.criteria_text == spec.options.criteria
        assert config.criteria_replace == spec.options.criteria_replace
        return criteria

    assert criteria_of() == parse_criteria(None)
    merged = criteria_of("--criteria", "sharpe>=0.5,min_trades>=10")
    assert [r.metric for r in merged.rules][1:] == [r.metric for r in parse_criteria(None).rules][
        1:
    ]
    assert merged.rules[0].threshold == 0.5 and merged.min_trades == 10
    assert criteria_of("--criteria", "sharpe>=0.5", "--criteria-replace") == parse_criteria(
        "sharpe>=0.5"
    )
    with pytest.raises(ValueError, match="--criteria-replace"):
        _plan(build_parser().parse_args(["--criteria-replace"]), tmp_path)


def test_desk_kinds_run_the_decision_pipeline_alone_with_their_cache_in_the_calibration(
    tmp_path: Path,
) -> None:
    """Issue 28 item 8: the desk's kinds name the decision_pipeline family alone, and its
    decisions are cached under the calibration's folder, never the user's cache; the other
    kinds keep every family and no cache setting (their runs are unchanged)."""
    meta = {"symbols": ["SYNA", "SYNB", "SYNC"], "start": "2012-01-02", "end": "2019-12-31"}
    kinds = "desk-null-zero,desk-null-bull,desk-planted-momentum,null-zero"
    specs = _plan(build_parser().parse_args(["--runs", "1", "--kinds", kinds]), tmp_path)
    configs = {s.kind: runner.run_config(s, meta, tmp_path)[0] for s in specs}
    for kind in ("desk-null-zero", "desk-null-bull", "desk-planted-momentum"):
        assert configs[kind].families == ["decision_pipeline"]
        assert configs[kind].decision_cache_dir == (tmp_path / "decisions").resolve()
        assert configs[kind].alt_data is None
    assert configs["null-zero"].families == [] and configs["null-zero"].decision_cache_dir is None
    seeds = {s.kind: s.seed for s in specs}
    assert len(set(seeds.values())) == 4  # own slots: no desk kind replays another's universe


def test_synthetic_names_stay_letters_past_z() -> None:
    """Past 26 symbols the names go on as spreadsheet columns (SYNAA …): ``chr`` gave ``SYN[``
    and ``SYNa``, which read the files of ``SYN_`` and ``SYNA``."""
    from swarm.calibration.synthetic_universe import UniverseSpec

    names = UniverseSpec(n_symbols=800).symbol_names()
    assert names[:3] == ["SYNA", "SYNB", "SYNC"] and names[25:28] == ["SYNZ", "SYNAA", "SYNAB"]
    assert names[701:703] == ["SYNZZ", "SYNAAA"]
    assert all(n.isalpha() and n.isupper() for n in names)
    assert len({n.lower() for n in names}) == 800
