"""The planted-earnings-drift scenario and its null: reports in the corpus layout, a drift
that starts where the release-time rule lets a daily rule act, and nothing else between them."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path

import exchange_calendars as xcals
import numpy as np
import pandas as pd
import pytest

from altdata.corpus import AltData
from strategies.earnings_drift import date_key, events
from swarm.calibrate import SCENARIOS, _plan, build_parser, run_line, universe_seed
from swarm.calibration import runner
from swarm.calibration.synthetic_earnings import (
    COLUMNS,
    drift_sides,
    earnings_rule_returns,
    report_events,
)
from swarm.calibration.synthetic_universe import (
    TRADING_DAYS,
    UniverseSpec,
    generate_universe,
    write_universe,
)

pytestmark = pytest.mark.unit

PLANTED, NULL = "planted-earnings-drift", "null-earnings-drift"


def _spec(name: str, index: int = 1, **extra) -> UniverseSpec:
    sc = SCENARIOS[name]
    return UniverseSpec(
        kind=sc.universe_kind,
        seed=universe_seed(0, name, index),
        n_symbols=sc.n_symbols or 3,
        start=date(2012, 1, 2),
        years=8.0,
        drift_annual=sc.drift_annual,
        **extra,
    )


def _returns(uni, sym: str) -> np.ndarray:
    c = uni.bars[sym]["close"].to_numpy()
    return c[1:] / c[:-1] - 1.0


def _unit(uni, sym: str) -> float:
    """The planted drift per bar, by hand: pead_sharpe daily sds of the symbol's long-run vol."""
    return uni.spec.pead_sharpe * uni.vol_annual[sym] / TRADING_DAYS


# ------------------------------------------------------------------------------ the data


def test_same_seed_same_universe_and_reports() -> None:
    a, b = generate_universe(_spec(PLANTED)), generate_universe(_spec(PLANTED))
    pd.testing.assert_frame_equal(a.reports, b.reports)
    for sym, df in a.bars.items():
        pd.testing.assert_frame_equal(df, b.bars[sym])
    other = generate_universe(_spec(PLANTED, index=2))
    assert not other.reports.equals(a.reports)
    assert not other.bars["SYNA"]["close"].equals(a.bars["SYNA"]["close"])


def test_reports_are_quarterly_and_load_through_the_corpus_layer(tmp_path: Path) -> None:
    meta = write_universe(_spec(PLANTED), tmp_path / "u")
    root = Path(meta["alt_data"])
    assert root == tmp_path / "u" / "alt" and (tmp_path / "u" / "SYNA.csv").is_file()
    table = AltData(root).table("surprises")
    assert table is not None
    frame = table.frame
    assert list(frame.columns) == [*COLUMNS, "known_at"]
    assert set(frame["ticker"]) == {f"SYN{c}" for c in "ABCDE"}
    assert set(frame["release_time"]) == {"pre", "post"}
    days = pd.to_datetime(frame["report_date"])
    assert (days.dt.day_of_week < 5).all()
    for _, rows in frame.groupby("ticker"):
        gaps = pd.to_datetime(rows["report_date"]).sort_values().diff().dt.days.dropna()
        assert 28 <= len(rows) <= 33 and gaps.between(75, 110).all()  # 8 years, quarterly
    np.testing.assert_allclose(
        frame["surprise"], (frame["eps_reported"] - frame["eps_consensus_est"]).round(2), atol=1e-9
    )
    # Skewed to beats like the corpus: about half at least +5%, a minority at -5% or worse.
    pct = 100 * frame["surprise"] / frame["eps_consensus_est"].abs()
    assert 0.35 < (pct >= 5).mean() < 0.65 and 0.05 < (pct <= -5).mean() < 0.3
    # The family reads the same (first tradable day, surprise %) the generator planted on.
    end = date.fromisoformat(meta["end"])
    family = events(table, sorted(set(frame["ticker"])), through=end)
    mine = report_events(pd.read_csv(root / "analyst/earnings_surprises_2012_2019.csv"))
    for ticker, rows in family.items():
        ours = mine[mine["ticker"] == ticker]
        keys = sorted(
            (date_key(d), p)
            for d, p in zip(ours["first_tradable"], ours["surprise_pct"], strict=True)
            if d <= end  # a report after the last close is known to neither
        )
        assert [(e.day, e.surprise_pct) for e in rows] == keys and len(keys) >= 28


def test_null_and_planted_share_reports_and_noise_and_differ_by_the_drift_only() -> None:
    planted, null = generate_universe(_spec(PLANTED)), generate_universe(_spec(NULL))
    assert _spec(PLANTED).seed == _spec(NULL).seed
    pd.testing.assert_frame_equal(planted.reports, null.reports)
    assert planted.vol_annual == null.vol_annual
    for sym in planted.bars:
        assert not np.any(null.regimes[sym]) and np.any(planted.regimes[sym])
        # Hand computation: planted - null = side x unit on every bar, 0 elsewhere (the closes
        # are rounded to 4 decimals, hence the tolerance: the drift is ~2e-3 a bar).
        diff = _returns(planted, sym) - _returns(null, sym)
        np.testing.assert_allclose(diff, planted.regimes[sym][1:] * _unit(planted, sym), atol=2e-5)


def _nyse_first_tradable(report_date: str, release: str) -> pd.Timestamp:
    """The release-time rule by hand: a pre-market report's own session, else the next one."""
    cal = xcals.get_calendar("XNYS", start="2011-01-01")
    session = cal.date_to_session(pd.Timestamp(report_date), direction="next")
    return session if release == "pre" else cal.next_session(session)


def test_drift_starts_after_the_first_session_that_may_know_the_report() -> None:
    """Thursday 2015-07-02 before the July 3 holiday (a bar in the synthetic calendar, no NYSE
    session): pre-market, the drift starts with Friday's bar; after the close, Monday 07-06
    is the first session that knows it and the drift starts with Tuesday's return."""
    dates = pd.bdate_range("2015-06-01", "2015-08-31")
    reports = pd.DataFrame(
        [
            ["2015-07-02", "PRE", "15-Jun", 1.00, 1.10, 0.10, "pre"],
            ["2015-07-02", "POST", "15-Jun", 1.00, 0.90, -0.10, "post"],
            ["2015-07-02", "SMALL", "15-Jun", 1.00, 1.04, 0.04, "post"],
        ],
        columns=COLUMNS,
    )
    sides, reactions = drift_sides(
        reports, dates, ["PRE", "POST", "SMALL"], threshold_pct=5.0, days=3
    )
    at = {d: i for i, d in enumerate(dates.strftime("%Y-%m-%d"))}
    assert _nyse_first_tradable("2015-07-02", "post") == pd.Timestamp("2015-07-06")
    assert np.flatnonzero(sides["PRE"]).tolist() == [
        at["2015-07-03"],
        at["2015-07-06"],
        at["2015-07-07"],
    ]
    assert np.flatnonzero(sides["POST"]).tolist() == [
        at["2015-07-07"],
        at["2015-07-08"],
        at["2015-07-09"],
    ]
    assert set(sides["PRE"][sides["PRE"] != 0]) == {1.0}
    assert set(sides["POST"][sides["POST"] != 0]) == {-1.0}
    assert not np.any(sides["SMALL"])  # 4% < the threshold: no drift, only the reaction
    assert reactions["PRE"][at["2015-07-02"]] == pytest.approx(10.0)
    assert reactions["POST"][at["2015-07-06"]] == pytest.approx(-10.0)
    assert reactions["SMALL"][at["2015-07-06"]] == pytest.approx(4.0)


def test_drift_is_present_after_eligible_reports_in_the_planted_returns_only() -> None:
    """From the written frames alone: the mean return the surprise's way over the 40 bars
    after each eligible report's first tradable session (found by hand from the release
    rule) is the planted drift in the planted universe, and noise in the null."""
    planted, null = generate_universe(_spec(PLANTED)), generate_universe(_spec(NULL))
    spec = planted.spec
    dates = planted.bars["SYNA"].index
    pos = {d: i for i, d in enumerate(dates)}
    signed = {"planted": [], "null": []}
    expected, first_bar = [], []
    for row in planted.reports.itertuples():
        pct = 100 * (row.eps_reported - row.eps_consensus_est) / abs(row.eps_consensus_est)
        if abs(pct) < spec.pead_threshold_pct:
            continue
        t0 = pos.get(_nyse_first_tradable(row.report_date, row.release_time))
        if t0 is None or t0 + spec.pead_days >= len(dates):
            continue
        side = math.copysign(1.0, pct)
        for key, uni in (("planted", planted), ("null", null)):
            r = _returns(uni, row.ticker)  # r[t - 1] is bar t's return
            signed[key].append(side * r[t0 : t0 + spec.pead_days])
        expected.append(_unit(planted, row.ticker))
        # The first tradable session's own return carries no drift (deciding on it at its
        # close is the earliest a rule can act), unless an earlier report's window covers it.
        if not planted.regimes[row.ticker][t0]:
            first_bar.append(
                _returns(planted, row.ticker)[t0 - 1] - _returns(null, row.ticker)[t0 - 1]
            )
    assert len(expected) > 60 and len(first_bar) > 60
    np.testing.assert_allclose(first_bar, 0.0, atol=2e-5)

    def t_stat(x: np.ndarray) -> float:
        return float(x.mean() / (x.std(ddof=1) / math.sqrt(len(x))))

    p = np.concatenate(signed["planted"])
    n = np.concatenate(signed["null"])
    drift = float(np.mean(expected))
    assert t_stat(p) > 4.0 and abs(t_stat(n)) < 2.5
    assert (p - n).mean() == pytest.approx(drift, rel=0.05)  # the same noise cancels
    assert p.mean() == pytest.approx(drift, abs=3 * p.std(ddof=1) / math.sqrt(len(p)))


def test_the_family_rule_earns_the_drift_and_not_on_the_null() -> None:
    planted, null = generate_universe(_spec(PLANTED)), generate_universe(_spec(NULL))
    from swarm.calibration.synthetic_universe import describe

    p, n = describe(planted), describe(null)
    assert p["portfolio_earnings_long_sharpe"] > 1.0 and p["portfolio_earnings_alpha_t"] > 2.0
    assert n["portfolio_earnings_long_sharpe"] < 0.8 and n["portfolio_earnings_alpha_t"] < 2.0
    assert p["reports"] == n["reports"] and p["eligible_reports"] == n["eligible_reports"]


def test_earnings_rule_returns_on_a_known_series() -> None:
    close = np.array([10.0, 10.0, 11.0, 12.1, 12.1, 11.0, 11.0])
    r = close[1:] / close[:-1] - 1.0
    sides = np.array([0, 1, 0, 0, -1, 0, 0], dtype=float)
    long = earnings_rule_returns(close, sides, hold=2)
    np.testing.assert_allclose(long, np.array([0, 1, 1, 0, 0, 0]) * r)
    ls = earnings_rule_returns(close, sides, hold=2, delay=1, cost=0.01, long_short=True)
    held = np.array([0, 0, 1, 1, 0, -1])
    np.testing.assert_allclose(ls, held * r - 0.01 * np.abs(np.diff(np.r_[0, held])))


# ------------------------------------------------------------------------ the scenarios


def test_scenarios_pair_seeds_and_pass_families_and_alt_data(tmp_path: Path) -> None:
    planted, null = SCENARIOS[PLANTED], SCENARIOS[NULL]
    assert not planted.is_null and null.is_null and null.pair == PLANTED
    args = build_parser().parse_args(
        ["--runs", "2", "--kinds", f"{PLANTED},{NULL}", "--earnings-strength", "1.5"]
    )
    specs = _plan(args, tmp_path)
    assert [(s.kind, s.index) for s in specs] == [(PLANTED, 1), (NULL, 1), (PLANTED, 2), (NULL, 2)]
    assert specs[0].seed == specs[1].seed != specs[2].seed == specs[3].seed
    for s in specs:
        assert s.families == ("earnings_drift",) and s.universe.n_symbols == 5
        assert s.universe.pead_sharpe == 1.5
    assert (specs[0].universe.kind, specs[1].universe.kind) == ("earnings", "earnings_null")
    meta = write_universe(specs[1].universe, tmp_path / "data")
    config, _ = runner.run_config(specs[1], meta, tmp_path / "data")
    assert config.families == ["earnings_drift"]
    assert config.alt_data == (tmp_path / "data" / "alt").resolve()
    from swarm.families import registry

    registry().preflight(config)  # the family finds its reports
    other = _plan(build_parser().parse_args(["--runs", "1", "--kinds", "null-zero"]), tmp_path)[0]
    config, _ = runner.run_config(
        other, {"symbols": ["SYNA"], "start": "2012-01-02", "end": "2019-12-31"}, tmp_path
    )
    assert config.families == [] and config.alt_data is None


def test_run_line_names_the_earnings_rule() -> None:
    line = run_line(
        {
            "kind": NULL,
            "index": 1,
            "seed": 3,
            "verdict": "ABANDON",
            "seconds": 30.0,
            "universe_kind": "earnings_null",
            "iterations": 2,
            "n_trials": 10,
            "best_sharpe": 0.4,
            "best_trades": 50,
            "best_score": 0.3,
            "best_dsr": 0.5,
            "holdout_sharpe": 0.1,
            "strength": {"portfolio_earnings_long_sharpe": 0.25, "portfolio_buy_hold_sharpe": 0.6},
        }
    )
    assert "earnings rule sharpe 0.25" in line and "buy&hold 0.60" in line


@pytest.mark.e2e
@pytest.mark.slow
def test_both_kinds_run_the_loop_with_the_family_and_its_reports(tmp_path: Path, capsys) -> None:
    """One small run of each through the develop loop: the earnings_drift family is tried on
    the reports the run got as --alt-data, and both records name their scenario."""
    from swarm.calibrate import main

    code = main(
        [
            "--runs",
            "1",
            "--seed",
            "3",
            "--out",
            str(tmp_path),
            "--years",
            "6",
            "--variants",
            "3",
            "--max-iterations",
            "2",
            "--quiet",
            "--kinds",
            f"{PLANTED},{NULL}",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "earnings rule sharpe" in out
    summary = json.loads((tmp_path / "calibration.json").read_text())
    assert [r["kind"] for r in summary["runs"]] == [PLANTED, NULL]
    assert summary["runs"][0]["seed"] == summary["runs"][1]["seed"]
    assert summary["scenarios"][NULL]["null"] and summary["scenarios"][PLANTED]["families"] == [
        "earnings_drift"
    ]
    for r in summary["runs"]:
        assert r["verdict"] in ("SUCCESS", "ABANDON")
        manifest = json.loads((Path(r["run_dir"]) / "manifest.json").read_text())
        config = manifest.get("config", manifest)
        assert config["families"] == ["earnings_drift"]
        assert config["alt_data"] == str(tmp_path / "data" / f"{r['kind']}-001" / "alt")
        families = {
            json.loads(line).get("family")
            for line in (Path(r["run_dir"]) / "experiments.jsonl").read_text().splitlines()
        }
        assert "earnings_drift" in families
