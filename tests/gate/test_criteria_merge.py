"""Issue 27: ``--criteria`` lays its rules over the defaults, ``--criteria-replace`` replaces
them; with neither the criteria are exactly the defaults."""

from __future__ import annotations

import pytest

from gate.contracts import Criteria
from gate.criteria import (
    DEFAULT_CRITERIA_TEXT,
    criteria_from_text,
    criteria_sources,
    merge_criteria,
    parse_criteria,
    rule_label,
)
from gate.errors import CriteriaError

pytestmark = pytest.mark.unit

DEFAULT_RULES = [
    "sharpe>=1",
    "max_drawdown_pct<=20",
    "win_rate_pct>=40",
    "profit_factor>=1.2",
    "alpha_t>=2",
]


def _labels(c: Criteria) -> list[str]:
    return [rule_label(r) for r in c.rules]


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        # same metric, same op: replaced in place
        ("sharpe>=0.8", ["sharpe>=0.8", *DEFAULT_RULES[1:]]),
        # same metric and direction, other op: still the same bar, replaced
        ("sharpe>0.5", ["sharpe>0.5", *DEFAULT_RULES[1:]]),
        ("max_drawdown_pct<15", ["sharpe>=1", "max_drawdown_pct<15", *DEFAULT_RULES[2:]]),
        # a new metric, or the other direction of a default one: added after the defaults
        ("beta<=0.6", [*DEFAULT_RULES, "beta<=0.6"]),
        ("sharpe<=3", [*DEFAULT_RULES, "sharpe<=3"]),
        # within the text the later rule of a metric and direction wins
        ("alpha_t>=1,alpha_t>=1.5", [*DEFAULT_RULES[:4], "alpha_t>=1.5"]),
        # special names only: the default rules stay whole
        ("min_trades>=10", DEFAULT_RULES),
        ("", DEFAULT_RULES),
    ],
)
def test_merge_replaces_by_metric_and_direction_and_adds_the_rest(text, rules) -> None:
    assert _labels(merge_criteria(parse_criteria(None), text)) == rules


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("min_trades>=10", "min_trades", 10),
        ("dsr>=0.5", "dsr_threshold", 0.5),
        ("deflated_alpha>=0.9", "deflated_alpha_threshold", 0.9),
        ("spa_p<=0.1", "spa_threshold", 0.1),
        ("score>=0.7", "score_threshold", 0.7),
    ],
)
def test_special_names_override_only_their_threshold(text, field, value) -> None:
    base = parse_criteria(None)
    merged = merge_criteria(base, text)
    assert getattr(merged, field) == value
    assert merged.model_dump(exclude={field}) == base.model_dump(exclude={field})


def test_no_text_is_exactly_the_defaults_either_way() -> None:
    defaults = parse_criteria(DEFAULT_CRITERIA_TEXT)
    for text in (None, "", "  "):
        for replace in (False, True):
            assert criteria_from_text(text, replace=replace) == defaults


def test_replace_keeps_only_the_given_rules_and_unnamed_thresholds() -> None:
    c = criteria_from_text("sharpe>=0.5,min_trades>=10", replace=True)
    assert _labels(c) == ["sharpe>=0.5"]
    assert c == parse_criteria("sharpe>=0.5,min_trades>=10")
    assert (c.min_trades, c.dsr_threshold, c.spa_threshold) == (10, 0.95, 0.05)
    merged = criteria_from_text("sharpe>=0.5,min_trades>=10")
    assert _labels(merged) == ["sharpe>=0.5", *DEFAULT_RULES[1:]] and merged.min_trades == 10


@pytest.mark.parametrize("text", ["shrape>=1", "dsr<=0.5", "min_trades>=2.5", "sharpe=>1"])
def test_merge_rejects_what_parse_rejects(text) -> None:
    with pytest.raises(CriteriaError):
        criteria_from_text(text)


def test_replace_still_needs_a_metric_rule() -> None:
    with pytest.raises(CriteriaError, match="no metric rule"):
        criteria_from_text("min_trades>=10", replace=True)


def test_sources_name_the_users_bars_and_the_defaults_kept() -> None:
    none = criteria_sources(None)
    assert none.user == [] and none.displaced == [] and not none.replaced
    assert none.defaults == [
        *DEFAULT_RULES,
        "min_trades>=30",
        "score>=0.6",
        "dsr>=0.95",
        "deflated_alpha>=0.95",
        "spa_p<=0.05",
    ]

    merged = criteria_sources("sharpe>=0.8,beta<=0.6,min_trades>=10")
    assert merged.user == ["sharpe>=0.8", "beta<=0.6", "min_trades>=10"]
    assert merged.displaced == ["sharpe>=1", "min_trades>=30"]
    assert merged.defaults[:4] == DEFAULT_RULES[1:] and "min_trades>=30" not in merged.defaults

    replaced = criteria_sources("sharpe>=0.8,min_trades>=10", replace=True)
    assert replaced.replaced and replaced.user == ["sharpe>=0.8", "min_trades>=10"]
    assert replaced.displaced == [*DEFAULT_RULES, "min_trades>=30"]
    assert replaced.defaults == ["score>=0.6", "dsr>=0.95", "deflated_alpha>=0.95", "spa_p<=0.05"]
