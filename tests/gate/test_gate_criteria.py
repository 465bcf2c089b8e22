from __future__ import annotations

import pytest

from gate.contracts import Criterion
from gate.criteria import (
    DEFAULT_CRITERIA_TEXT,
    attainment,
    is_met,
    parse_criteria,
    rule_label,
    valid_metric_names,
)
from gate.errors import CriteriaError, GateError

pytestmark = pytest.mark.unit


def test_defaults() -> None:
    c = parse_criteria(None)
    assert c == parse_criteria("  ") == parse_criteria(DEFAULT_CRITERIA_TEXT)
    assert [rule_label(r) for r in c.rules] == [
        "sharpe>=1",
        "max_drawdown_pct<=20",
        "win_rate_pct>=40",
        "profit_factor>=1.2",
        "alpha_t>=2",
    ]
    assert c.min_trades == 30


def test_specials_and_ops() -> None:
    c = parse_criteria(" sharpe > 0.5 , sortino<3, min_trades>=12,score>=0.7,dsr>=0.9,")
    assert [(r.metric, r.op, r.threshold) for r in c.rules] == [
        ("sharpe", ">", 0.5),
        ("sortino", "<", 3.0),
    ]
    assert (c.min_trades, c.score_threshold, c.dsr_threshold) == (12, 0.7, 0.9)


def test_negative_and_scientific_numbers() -> None:
    c = parse_criteria("skew>=-0.5,cagr_pct>=1e1")
    assert [r.threshold for r in c.rules] == [-0.5, 10.0]


def test_unknown_metric_lists_valid_names() -> None:
    with pytest.raises(CriteriaError) as e:
        parse_criteria("sharpe>=1,alpha>=2")
    msg = str(e.value)
    assert "'alpha'" in msg and "max_drawdown_pct" in msg and "min_trades" in msg
    assert "\n" not in msg
    assert isinstance(e.value, GateError)


@pytest.mark.parametrize("text", ["sharpe=>1", "sharpe>=", "sharpe>=abc", "sharpe 1", ">=1"])
def test_malformed_item_names_item_and_form(text: str) -> None:
    with pytest.raises(CriteriaError) as e:
        parse_criteria(text)
    assert text.strip() in str(e.value) and "metric>=number" in str(e.value)


@pytest.mark.parametrize(
    "text", ["min_trades>=2.5", "min_trades<=10", "score>=1.5", "min_trades>=10"]
)
def test_invalid_specials(text: str) -> None:
    with pytest.raises(CriteriaError):
        parse_criteria(text)  # the last one has no metric rule at all


def test_valid_names_are_numeric_metrics_fields() -> None:
    names = valid_metric_names()
    assert {"sharpe", "max_drawdown_pct", "n_trades", "kurtosis"} <= set(names)


def test_attainment() -> None:
    ge = Criterion(metric="sharpe", op=">=", threshold=2.0)
    le = Criterion(metric="max_drawdown_pct", op="<=", threshold=20.0)
    assert attainment(ge, 1.0) == 0.5 and attainment(ge, 2.0) == 1.0 and attainment(ge, 9) == 2.0
    assert attainment(ge, -1.0) == 0.0 and attainment(ge, None) == 0.0
    assert attainment(le, 10.0) == 1.5 and attainment(le, 30.0) == 0.5 and attainment(le, 0) == 2
    zero = Criterion(metric="skew", op=">=", threshold=0.0)
    assert attainment(zero, 0.5) == 1.5
    assert is_met(le, 20.0) and not is_met(le, 20.1) and not is_met(ge, None)


def test_benchmark_relative_names_join_the_grammar() -> None:
    c = parse_criteria(
        "sharpe>=1,alpha_t>=2,information_ratio>=0.3,beta<=0.5,excess_sharpe>=0,"
        "deflated_alpha>=0.9,spa_p<=0.1"
    )
    assert [rule_label(r) for r in c.rules] == [
        "sharpe>=1",
        "alpha_t>=2",
        "information_ratio>=0.3",
        "beta<=0.5",
        "excess_sharpe>=0",
    ]
    assert (c.deflated_alpha_threshold, c.spa_threshold) == (0.9, 0.1)
    defaults = parse_criteria(None)
    assert (defaults.deflated_alpha_threshold, defaults.spa_threshold) == (0.95, 0.05)
    for name in ("alpha_t", "beta", "information_ratio", "excess_sharpe"):
        assert name in valid_metric_names()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("sharpe>=1,spa_p>=0.05", "'spa_p' only takes '<='"),
        ("sharpe>=1,deflated_alpha<=0.9", "'deflated_alpha' only takes '>='"),
        ("sharpe>=1,spa_p<=1.5", "within 0..1"),
    ],
)
def test_benchmark_specials_are_checked(text: str, needle: str) -> None:
    with pytest.raises(CriteriaError) as e:
        parse_criteria(text)
    assert needle in str(e.value)


def test_alpha_rules_read_the_alpha_figures() -> None:
    from gate.alpha import AlphaStats
    from gate.criteria import metric_value

    a = AlphaStats(benchmark="SPY", n_obs=500, t_stat=2.5, beta=0.2, information_ratio=0.4)
    assert metric_value(None, "alpha_t", a) == 2.5
    assert metric_value(None, "beta", a) == 0.2
    assert metric_value(None, "alpha_t", None) is None
    assert metric_value(None, "excess_sharpe", a) is None  # undefined attains nothing
