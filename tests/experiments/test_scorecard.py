"""The scorecard: each of the gate's bars for the best variant, with its margin, on hand-made figures."""

from __future__ import annotations

import pytest

from backtest.contracts import Metrics
from experiments.records import VariantEntry, Verdict
from experiments.scorecard import (
    FILLS,
    ROUND_TRIPS,
    concentration_line,
    criteria_rows,
    holdout_line,
    not_a_winner,
    other_vetoes,
    scorecard_table,
    trades_kind,
    verdict_line,
)
from gate.alpha import AlphaStats
from gate.criteria import parse_criteria
from strategies.spec import StrategySpec

pytestmark = pytest.mark.unit

CRITERIA = parse_criteria("sharpe>=1,max_drawdown_pct<=20,alpha_t>=2,min_trades>=30")
_FIGURES = dict.fromkeys(("sortino", "win_rate_pct", "profit_factor", "skew", "kurtosis"))
METRICS = Metrics(
    **_FIGURES,
    sharpe=1.68,
    sharpe_per_period=0.1,
    cagr_pct=9.0,
    total_return_pct=20.0,
    max_drawdown_pct=19.5,
    n_trades=44,
    exposure_pct=60.0,
    final_value=1.0,
    n_obs=500,
)
ALPHA = AlphaStats(
    benchmark="buy-and-hold", n_obs=500, t_stat=2.95, deflated_alpha=0.924, alpha_annual_pct=26.5
)
SPEC = StrategySpec(family="rotation", name="r", approach="a", entry="e", scope="portfolio")
VARIANT = VariantEntry(
    variant_id="i04-v02-rotation-77e959", iteration=4, route="TUNE", spec=SPEC, code_sha256="x"
)


def _verdict(decided: str, **kw) -> Verdict:
    return Verdict(
        verdict=decided, reason="r", iterations=1, score_threshold=0.6, dsr_threshold=0.95, **kw
    )


def _metrics(**kw) -> Metrics:
    return METRICS.model_copy(update=kw)


def _rows(**kw):
    args = dict(metrics=METRICS, alpha=ALPHA, score=0.853, dsr=0.999, spa_pvalue=0.006, cash=False)
    return criteria_rows(CRITERIA, **(args | kw))


def test_every_bar_of_the_gate_has_a_row_with_a_signed_margin():
    rows = {r.name: r for r in _rows()}
    assert list(rows) == [
        "sharpe>=1",
        "max_drawdown_pct<=20",
        "alpha_t>=2",
        "min trades (round trips)",
        "fuzzy score",
        "deflated Sharpe",
        "deflated alpha",
        "SPA p-value",
    ]
    assert rows["sharpe>=1"].passed and rows["sharpe>=1"].margin == pytest.approx(0.68)
    # an upper bound's margin is positive when under it
    assert rows["max_drawdown_pct<=20"].margin == pytest.approx(0.5)
    assert rows["alpha_t>=2"].value == 2.95  # read from the alpha figures, not the metrics
    da = rows["deflated alpha"]
    assert (
        not da.passed
        and da.margin == pytest.approx(-0.026)
        and da.miss() == ("deflated alpha (0.924 < 0.95)")
    )
    assert rows["SPA p-value"].passed and rows["SPA p-value"].attainment == pytest.approx(1.88)
    table = "\n".join(scorecard_table(list(rows.values())))
    assert "| deflated alpha | 0.924 | >= 0.95 | **FAIL** | -0.026 | 0.97 |" in table


def test_cash_and_an_unrun_spa_are_not_bars_and_a_missing_figure_fails():
    names = [r.name for r in _rows(cash=True, spa_pvalue=None)]
    assert "deflated alpha" not in names and "SPA p-value" not in names
    (sharpe,) = [r for r in _rows(metrics=_metrics(sharpe=None)) if r.name == "sharpe>=1"]
    assert not sharpe.passed and sharpe.margin is None and sharpe.miss() == "sharpe>=1 (missing)"


def test_the_verdict_line_names_the_closest_variant_and_what_it_failed():
    line = verdict_line(_verdict("ABANDON"), VARIANT, _rows())
    assert line == (
        "ABANDON: no strategy passed. The closest, i04-v02-rotation-77e959 (rotation), met 7 "
        "of 8 criteria; it failed deflated alpha (0.924 < 0.95)."
    )
    vetoed = verdict_line(_verdict("ABANDON"), VARIANT, _rows(), vetoes=["lookahead"])
    assert vetoed.endswith("failed deflated alpha (0.924 < 0.95), vetoed: lookahead.")
    passed = ALPHA.model_copy(update={"deflated_alpha": 0.97})
    ok = verdict_line(_verdict("SUCCESS"), VARIANT, _rows(alpha=passed))
    assert ok == "SUCCESS: i04-v02-rotation-77e959 (rotation) passed every criterion in-sample."
    assert verdict_line(_verdict("ABANDON"), None, []) == "ABANDON: no variant produced a result."


def test_too_few_trades_is_said_once_by_its_row():
    kinds = ["too_few_trades", "lookahead"]
    assert other_vetoes(["too few trades: 3 < 30", "peeks"], kinds) == ["peeks"]
    assert other_vetoes(["too few trades: 3 < 30"]) == ["too few trades: 3 < 30"]  # no kinds


def test_the_holdout_line_confirms_alpha_only_over_the_alpha_t_bar():
    bench = {"name": "buy-and-hold", "description": "the universe, equal weight"}

    def win(**alpha):
        held = AlphaStats(benchmark="buy-and-hold", n_obs=250, **alpha) if alpha else None
        return _verdict("SUCCESS", benchmark=bench, holdout_alpha=held)

    yes = holdout_line(win(t_stat=2.31, alpha_annual_pct=9.0), CRITERIA)
    assert yes == "Holdout: alpha confirmed (alpha 9% a year over buy-and-hold, HAC t 2.31 >= 2)."
    no = holdout_line(win(t_stat=2.5, alpha_annual_pct=-1.0), CRITERIA)
    assert no is not None and no.startswith("Holdout: alpha NOT confirmed")
    assert holdout_line(_verdict("ABANDON"), CRITERIA) is None
    assert "no alpha figures" in (holdout_line(win(), CRITERIA) or "")


def test_concentration_warns_when_one_symbol_holds_most_of_the_exposure():
    lopsided = {
        "AAPL": _metrics(exposure_pct=90.0),
        "MSFT": _metrics(exposure_pct=5.0),
        "NVDA": _metrics(exposure_pct=5.0),
    }
    line = concentration_line(lopsided, scope="symbol")
    assert line is not None and "AAPL holds 90%" in line
    even = {s: _metrics(exposure_pct=40.0) for s in ("AAPL", "MSFT", "NVDA")}
    assert concentration_line(even, scope="symbol") is None
    assert concentration_line({"AAPL": _metrics(exposure_pct=99.0)}, scope="symbol") is None
    unknown = concentration_line(lopsided, scope="portfolio")
    assert unknown is not None and "not recorded" in unknown


def test_trades_are_fills_for_a_portfolio_and_round_trips_for_a_symbol_job():
    assert trades_kind(SPEC, 5) == FILLS
    assert trades_kind(SPEC, 1) == ROUND_TRIPS
    assert trades_kind(SPEC.model_copy(update={"scope": "symbol"}), 5) == ROUND_TRIPS
    assert trades_kind(None, 5) == ROUND_TRIPS


def test_the_banner_marks_every_export_but_the_winner():
    rows = _rows()
    assert not_a_winner(_verdict("SUCCESS", best_variant="w"), "w", rows, []) is None
    banner = not_a_winner(_verdict("ABANDON", best_variant="w"), "w", rows, [])
    assert banner is not None and banner[0].startswith("NOT A WINNER: run verdict ABANDON")
    assert "deflated alpha (0.924 < 0.95)" in banner[0]
    passed = _rows(alpha=ALPHA.model_copy(update={"deflated_alpha": 0.97}))
    other = not_a_winner(_verdict("SUCCESS", best_variant="w"), "x", passed, [])
    assert other is not None and "not the run's choice" in other[0]
